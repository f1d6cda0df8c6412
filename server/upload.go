package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"

	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
)

// ImageQuery turns the bytes of an uploaded image into a query of one item
// for the index's model: it decodes the image (refusing what its limits
// refuse, with an error that wraps ErrBadImage or ErrImageTooLarge),
// extracts its features and encodes them. Package extract does it for
// xmr serve.
type ImageQuery func(ctx context.Context, image []byte, m model.Model) (*model.Embeddings, error)

// querySearcher is an index that searches by an encoded query: a local
// index (index.Index, index.Live).
type querySearcher interface {
	Search(ctx context.Context, q *model.Embeddings, queryIsText bool, o *index.SearchOptions) ([]index.Result, error)
}

// Errors an ImageQuery wraps for images it refuses: 400 and 413.
var (
	ErrBadImage      = errors.New("bad image")
	ErrImageTooLarge = errors.New("image too large")
)

// DefaultMaxUploadBytes is the default cap on an uploaded image.
const DefaultMaxUploadBytes = 8 << 20

// searchUpload answers POST /api/search/upload?k=N: the captions that
// describe an uploaded image, given as the raw body (Content-Type
// image/jpeg, image/png or application/octet-stream) or as the file field
// "image" of a multipart/form-data body.
func (s *Server) searchUpload(w http.ResponseWriter, r *http.Request) (any, error) {
	local, ok := s.ix.(querySearcher)
	switch {
	case !ok:
		return nil, errorf(http.StatusNotImplemented, "this server takes no uploaded images: its index is not a local one")
	case s.opts.ImageQuery == nil && s.opts.NoImageQuery != "":
		return nil, errorf(http.StatusNotImplemented, "this server takes no uploaded images: %s", s.opts.NoImageQuery)
	case s.opts.ImageQuery == nil:
		return nil, errorf(http.StatusNotImplemented, "this server takes no uploaded images: its index's model was not trained on features that xmr extract makes")
	}
	k := 0
	if v := r.URL.Query().Get("k"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "k: want a whole number, got %q", v)
		}
		k = n
	}
	k, err := s.checkK(k)
	if err != nil {
		return nil, err
	}
	body, err := s.readUpload(w, r)
	if err != nil {
		return nil, err
	}
	opts := &index.SearchOptions{K: k}
	return s.respond(r, fmt.Sprintf("uploaded image (%d bytes)", len(body)), "image-to-text", func(ctx context.Context) ([]index.Result, error) {
		m, err := s.ix.Model()
		if err != nil {
			return nil, err
		}
		q, err := s.opts.ImageQuery(ctx, body, m)
		switch {
		case errors.Is(err, ErrImageTooLarge):
			return nil, errorf(http.StatusRequestEntityTooLarge, "%v", err)
		case errors.Is(err, ErrBadImage):
			return nil, errorf(http.StatusBadRequest, "%v", err)
		case err != nil:
			return nil, err
		}
		return local.Search(ctx, q, false, opts)
	}, func(h index.Result) resultJSON {
		return resultJSON{Rank: h.Rank, Item: h.Item, Score: h.Score,
			Caption: &captionJSON{Item: h.Item, Text: h.Caption.Text, ImageID: h.Caption.ImageID}}
	})
}

// readUpload reads the image of an upload request, at most
// Options.MaxUploadBytes of it.
func (s *Server) readUpload(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := s.opts.MaxUploadBytes
	r.Body = http.MaxBytesReader(w, r.Body, limit+64<<10) // room for a form's headers
	tooLarge := func(err error) bool {
		var mbe *http.MaxBytesError
		return errors.As(err, &mbe)
	}
	var src io.Reader = r.Body
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "image/jpeg", "image/png", "application/octet-stream", "":
	case "multipart/form-data":
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				return nil, errorf(http.StatusBadRequest, "the form has no file field \"image\"")
			}
			if err != nil {
				if tooLarge(err) {
					return nil, errorf(http.StatusRequestEntityTooLarge, "upload larger than %d bytes", limit)
				}
				return nil, errorf(http.StatusBadRequest, "malformed multipart body: %v", err)
			}
			if p.FormName() == "image" {
				src = p
				break
			}
		}
	default:
		return nil, errorf(http.StatusUnsupportedMediaType, "Content-Type %s: send the image as image/jpeg or image/png, or as the field \"image\" of a multipart/form-data body", ct)
	}
	b, err := io.ReadAll(io.LimitReader(src, limit+1))
	if err != nil {
		if tooLarge(err) {
			return nil, errorf(http.StatusRequestEntityTooLarge, "upload larger than %d bytes", limit)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, errorf(http.StatusRequestTimeout, "the upload did not arrive within the server's %v read timeout (%d bytes came): send a smaller image, or over a faster link", s.opts.ReadTimeout, len(b))
		}
		return nil, errorf(http.StatusBadRequest, "read the upload: %v", err)
	}
	if int64(len(b)) > limit {
		return nil, errorf(http.StatusRequestEntityTooLarge, "image larger than %d bytes", limit)
	}
	if len(b) == 0 {
		return nil, errorf(http.StatusBadRequest, "empty upload: send a JPEG or PNG image")
	}
	return b, nil
}

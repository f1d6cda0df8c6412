package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
)

// ImageQuery turns the bytes of an uploaded image into a query of one item
// for each of models, in order (the index's model, or each member's of a
// fusion of indexes): it decodes the image once (refusing what its limits
// refuse, with an error that wraps ErrBadImage or ErrImageTooLarge),
// extracts its features and encodes them with each model. Package
// extract does it for xmr serve. It must return promptly, with the context's error, once ctx
// is done (the search timeout, the client gone, the shutdown timeout),
// even while the image decodes. The server calls it holding, from
// Options.UploadPixelBudget, the pixels that the image's header declares
// (a JPEG's or a PNG's, read with image.DecodeConfig), weighted by the
// bytes its format needs (see decodeCost); an image whose header does not
// parse holds none, and ImageQuery must refuse it before decoding a
// pixel.
type ImageQuery func(ctx context.Context, image []byte, models []model.Model) ([]*model.Embeddings, error)

// querySearcher is an index that searches by an encoded query: a local
// index (index.Index, index.Live).
type querySearcher interface {
	Search(ctx context.Context, q *model.Embeddings, queryIsText bool, o *index.SearchOptions) ([]index.Result, error)
}

// fusedSearcher is a fusion of local indexes (index.Fusion): an upload is
// encoded by each member's model and searched as one query.
type fusedSearcher interface {
	Members() []*index.Index
	Weights() []float32
	SearchEncoded(ctx context.Context, qs []*model.Embeddings, queryIsText bool, o *index.SearchOptions) ([]index.Result, error)
}

// takesUploads reports whether the index searches by an encoded image: a
// local index or a fusion of local ones.
func takesUploads(ix index.Searcher) bool {
	_, local := ix.(querySearcher)
	_, fused := ix.(fusedSearcher)
	return local || fused
}

// Errors an ImageQuery wraps for images it refuses: 400 and 413.
var (
	ErrBadImage      = errors.New("bad image")
	ErrImageTooLarge = errors.New("image too large")
)

// DefaultMaxUploadBytes is the default cap on an uploaded image.
const DefaultMaxUploadBytes = 8 << 20

// The largest upload limits that xmr serve takes. An upload is read into
// memory whole before it is decoded, so its cap is a gigabyte at most
// (a camera's largest JPEG is a few tens of megabytes); the pixel budget
// costs about 7 bytes a pixel while the pixels are decoded, so 2^40
// pixels (7.7 TB) is beyond any machine. Both keep the sums the server
// makes of them (a form's headers past the cap, pixels held and wanted)
// far from the largest int64, where they wrapped: a cap of 2^63-1 made
// every upload an "empty upload", one less every upload a 413.
const (
	MaxUploadBytesCeiling    = 1 << 30
	UploadPixelBudgetCeiling = 1 << 40
)

// addCapped returns a+b for a, b >= 0, or math.MaxInt64 where the sum
// would wrap past it.
func addCapped(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// searchUpload answers POST /api/search/upload?k=N: the captions that
// describe an uploaded image, given as the raw body (Content-Type
// image/jpeg, image/png or application/octet-stream) or as the file field
// "image" of a multipart/form-data body.
func (s *Server) searchUpload(w http.ResponseWriter, r *http.Request) (any, error) {
	switch {
	case !takesUploads(s.ix):
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
	// The decoded pixels are held from the budget shared by the uploads in
	// flight, before the search's turn is taken: a wait for pixels holds
	// no turn from the text searches. One deadline, Options.SearchTimeout,
	// bounds the wait, the turn and the search together.
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.SearchTimeout)
	defer cancel()
	// Past the shutdown timeout the upload is cancelled, its decode with
	// it (ImageQuery returns once its context is done).
	defer context.AfterFunc(s.aborted, cancel)()
	release, err := s.holdPixels(ctx, r, body)
	if err != nil {
		return nil, err
	}
	defer release(false)
	r = r.WithContext(ctx)
	opts := &index.SearchOptions{K: k}
	return s.respond(r, fmt.Sprintf("uploaded image (%d bytes)", len(body)), "image-to-text", func(ctx context.Context) ([]index.Result, error) {
		models, err := s.queryModels()
		if err != nil {
			return nil, err
		}
		qs, err := s.opts.ImageQuery(ctx, body, models)
		if err == nil && len(qs) != len(models) {
			err = fmt.Errorf("the image query encoded the upload for %d models, want %d", len(qs), len(models))
		}
		// The image is decoded and encoded (or refused): its pixels are
		// garbage now, and the upload's bytes too.
		body = nil
		release(err == nil)
		switch {
		case errors.Is(err, ErrImageTooLarge):
			return nil, errorf(http.StatusRequestEntityTooLarge, "%v", err)
		case errors.Is(err, ErrBadImage):
			return nil, errorf(http.StatusBadRequest, "%v", err)
		case err != nil:
			return nil, err
		}
		if fused, ok := s.ix.(fusedSearcher); ok {
			return fused.SearchEncoded(ctx, qs, false, opts)
		}
		return s.ix.(querySearcher).Search(ctx, qs[0], false, opts)
	}, func(h index.Result) resultJSON {
		return resultJSON{Rank: h.Rank, Item: h.Item, Score: h.Score,
			Caption: &captionJSON{Item: h.Item, Text: h.Caption.Text, ImageID: h.Caption.ImageID}}
	})
}

// queryModels returns the models that encode an uploaded image: the
// index's, or each member's of a fusion.
func (s *Server) queryModels() ([]model.Model, error) {
	fused, ok := s.ix.(fusedSearcher)
	if !ok {
		m, err := s.ix.Model()
		return []model.Model{m}, err
	}
	var out []model.Model
	for _, ix := range fused.Members() {
		m, err := ix.Model()
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// holdPixels holds from the upload budget the pixels that img's header
// declares (weighted by the bytes its format needs, see decodeCost),
// waiting for them as long as ctx allows, and returns the function that
// gives them back, first collecting the garbage when
// decoded says the image was decoded (see collectAfterPixels); only its
// first call counts. An image larger than the whole budget is refused
// with 413; one that waits past ctx's deadline gets 503 and Retry-After.
// An image whose header does not parse holds nothing: the ImageQuery
// refuses it before it allocates a pixel.
func (s *Server) holdPixels(ctx context.Context, r *http.Request, img []byte) (release func(decoded bool), err error) {
	wd, ht, cm, ok := declaredSize(img)
	if !ok {
		return func(bool) {}, nil
	}
	px := int64(wd) * int64(ht)
	n, bpp := decodeCost(wd, ht, cm)
	// What the image is, for the errors: its pixels, and what they are
	// charged as where its format needs more than 8-bit colour does.
	what := fmt.Sprintf("image of %dx%d = %d pixels", wd, ht, px)
	if n != px {
		what = fmt.Sprintf("image of %dx%d = %d pixels of %d bytes each decoded, as many bytes as %d pixels of 8-bit colour", wd, ht, px, bpp, n)
	}
	if n > s.pixels.size {
		return nil, errorf(http.StatusRequestEntityTooLarge, "%s: more than the %d pixels that this server decodes at once; send a smaller image", what, s.pixels.size)
	}
	start := time.Now()
	if err := s.pixels.acquire(ctx, n); err != nil {
		if r.Context().Err() != nil {
			return nil, err // the client has gone
		}
		this := fmt.Sprintf("this %dx%d image (%d pixels)", wd, ht, n)
		if n != px {
			this = fmt.Sprintf("this %dx%d image (%d pixels of %d bytes each, charged as %d)", wd, ht, px, bpp, n)
		}
		return nil, &httpError{status: http.StatusServiceUnavailable, retryAfter: 1,
			msg: fmt.Sprintf("the server is decoding other uploaded images (%d of the %d pixels it decodes at once are in use); %s waited %v for room: try again shortly",
				s.pixels.inUse(), s.pixels.size, this, time.Since(start).Round(time.Millisecond))}
	}
	var once sync.Once
	return func(decoded bool) {
		once.Do(func() {
			if decoded && n >= collectAfterPixels {
				runtime.GC()
			}
			s.pixels.release(n)
		})
	}, nil
}

// collectAfterPixels: an upload of at least this many pixels runs the
// garbage collector before it gives its pixels back, so that the next
// image is decoded into the memory this one's leaves, not beside it. A
// decoded image is a few large blocks that the collector's pacing does
// not foresee: 20 uploads of a 7000x7000 PNG, one decoded at a time,
// took 890 to 980 MB of RSS without the collection and 540 MB with it
// (one image's 390 MB of buffers, and the rest of the server), and
// answered more of them in the same time, the memory being reused.
// 4 megapixels leave about 28 MB of garbage.
const collectAfterPixels = 4_000_000

// readUpload reads the image of an upload request, at most
// Options.MaxUploadBytes of it.
func (s *Server) readUpload(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := s.opts.MaxUploadBytes
	r.Body = http.MaxBytesReader(w, r.Body, addCapped(limit, 64<<10)) // room for a form's headers
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
	b, err := io.ReadAll(io.LimitReader(src, addCapped(limit, 1))) // one byte past the limit tells a larger image
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

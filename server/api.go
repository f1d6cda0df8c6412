package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/text"
)

// routes registers every endpoint on a ServeMux (method and path
// patterns) and wraps it in the middleware.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	endpoints := []struct {
		method, path string
		h            http.Handler
	}{
		{"GET", "/{$}", http.HandlerFunc(s.page)},
		{"GET", "/static/{file}", http.HandlerFunc(s.static)},
		{"POST", "/api/search/text", s.api(s.searchText)},
		{"POST", "/api/search/image", s.api(s.searchImage)},
		{"POST", "/api/search/upload", s.api(s.searchUpload)},
		{"POST", "/api/align", s.api(s.align)},
		{"GET", "/api/images/{id}", s.api(s.imageDetails)},
		{"GET", "/api/captions/{item}", s.api(s.captionDetails)},
		{"GET", "/api/info", s.api(s.info)},
		{"GET", "/images/{path...}", http.HandlerFunc(s.imageFile)},
		{"GET", "/healthz", http.HandlerFunc(s.healthz)},
		{"GET", "/metrics", s.metrics.handler()},
	}
	for _, e := range endpoints {
		mux.Handle(e.method+" "+e.path, e.h)
		// The same path with any other method: 405, naming the allowed ones.
		allow := e.method
		if e.method == "GET" {
			allow = "GET, HEAD"
		}
		mux.Handle(e.path, methodNotAllowed(allow))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s (see docs/api.md)", r.Method, r.URL.Path))
	})
	return s.middleware(mux)
}

func methodNotAllowed(allow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s: use %s", r.Method, r.URL.Path, allow))
	})
}

// httpError is an error that answers with a given status.
type httpError struct {
	status int
	msg    string
	// retryAfter, when positive, is sent as the Retry-After header, in
	// seconds.
	retryAfter int
}

func (e *httpError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) error {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}

// statusClientClosed is logged and counted (never sent) for a request
// whose client went away before the answer: nginx's convention.
const statusClientClosed = 499

// errorBody is every error's JSON.
type errorBody struct {
	Error string `json:"error"`
}

// apiFunc is a JSON endpoint: it returns the value to encode, or an error
// that fail turns into a status and a JSON error.
type apiFunc func(w http.ResponseWriter, r *http.Request) (any, error)

func (s *Server) api(f apiFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := f(w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
}

// fail answers err: an httpError with its status, an unknown id 404, a
// query that cannot be searched 400, a search past its time 503, and
// anything else 500 (logged; the client is told no details).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	status, msg := http.StatusInternalServerError, "internal error"
	switch {
	case errors.As(err, &he):
		status, msg = he.status, he.msg
		if he.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(he.retryAfter))
		}
	case errors.Is(err, index.ErrNotFound):
		status, msg = http.StatusNotFound, err.Error()
	case errors.Is(err, index.ErrBadQuery):
		status, msg = http.StatusBadRequest, err.Error()
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client has gone: nobody reads the answer.
		if rec, ok := w.(*recorder); ok {
			rec.status = statusClientClosed
		}
		return
	case errors.Is(err, context.DeadlineExceeded):
		status, msg = http.StatusServiceUnavailable, fmt.Sprintf("the search took longer than %v (the server is busy, or the query is expensive): try again", s.opts.SearchTimeout)
		w.Header().Set("Retry-After", "1")
	default:
		s.opts.Logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, status, msg)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{Error: "internal error: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// decode reads the request body, at most Options.MaxBodyBytes, as one
// JSON object into v, refusing unknown fields and trailing data.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("data after the JSON object")
			var mbe *http.MaxBytesError
			if errors.As(terr, &mbe) {
				err = terr
			}
		}
	}
	if err == nil {
		return nil
	}
	var mbe *http.MaxBytesError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &mbe):
		return errorf(http.StatusRequestEntityTooLarge, "request body larger than %d bytes", mbe.Limit)
	case errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, "empty request body: want a JSON object")
	case errors.As(err, &syn):
		return errorf(http.StatusBadRequest, "malformed JSON at byte %d: %v", syn.Offset, err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, "malformed JSON: the body ends in the middle of the object")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return errorf(http.StatusBadRequest, "want a JSON object, got a JSON %s", typ.Value)
		}
		return errorf(http.StatusBadRequest, "field %q: want %s, got a JSON %s", typ.Field, jsonKind(typ.Type), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return errorf(http.StatusBadRequest, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return errorf(http.StatusBadRequest, "malformed JSON: %v", err)
}

// jsonKind names the JSON value that decodes into a Go type.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a JSON " + t.Kind().String()
}

// checkText checks a query sentence given as field.
func (s *Server) checkText(field, t string) error {
	switch n := utf8.RuneCountInString(t); {
	case !utf8.ValidString(t):
		return errorf(http.StatusBadRequest, "%s: not valid UTF-8", field)
	case text.Blank(t):
		return errorf(http.StatusBadRequest, "%s: required, a sentence describing an image", field)
	case n > s.opts.MaxQueryChars:
		return errorf(http.StatusBadRequest, "%s: %d characters, at most %d", field, n, s.opts.MaxQueryChars)
	}
	return nil
}

// checkK returns the number of results to return for the request's k.
func (s *Server) checkK(k int) (int, error) {
	switch {
	case k == 0:
		return min(10, s.opts.MaxK), nil
	case k < 0 || k > s.opts.MaxK:
		return 0, errorf(http.StatusBadRequest, "k: want a number of results from 1 to %d, got %d", s.opts.MaxK, k)
	}
	return k, nil
}

// checkID checks an image id given as field.
func checkID(field, id string) error {
	switch {
	case id == "":
		return errorf(http.StatusBadRequest, "%s: required, an indexed image's id", field)
	case len(id) > 512 || !utf8.ValidString(id):
		return errorf(http.StatusBadRequest, "%s: want an indexed image's id, got %d bytes", field, len(id))
	}
	return nil
}

// run runs a search with the request's context, bounded by
// Options.SearchTimeout, once one of the Options.MaxConcurrent turns is
// free: a client that goes away, or a search past its time, cancels it.
func (s *Server) run(r *http.Request, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.SearchTimeout)
	defer cancel()
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.sem }()
	if s.searching != nil {
		s.searching(ctx)
	}
	return f(ctx)
}

// imageJSON is an image as the API shows it.
type imageJSON struct {
	ID     string  `json:"id"`
	Width  float32 `json:"width,omitempty"`
	Height float32 `json:"height,omitempty"`
	// URL is the image file's address on this server; empty when no
	// file is served for it.
	URL   string       `json:"url,omitempty"`
	Boxes [][4]float32 `json:"boxes"`
}

// captionJSON is a caption as the API shows it.
type captionJSON struct {
	Item    int    `json:"item"`
	Text    string `json:"text"`
	ImageID string `json:"image_id"`
}

// alignmentJSON is one word's best region.
type alignmentJSON struct {
	Word   string      `json:"word"`
	Region int         `json:"region"`
	Box    *[4]float32 `json:"box,omitempty"`
	Cosine float32     `json:"cosine"`
	// StopWord marks a stop word or punctuation, which the page hides
	// unless asked.
	StopWord bool `json:"stop_word"`
}

type resultJSON struct {
	Rank       int             `json:"rank"`
	Item       int             `json:"item"`
	Score      float32         `json:"score"`
	Image      *imageJSON      `json:"image,omitempty"`
	Caption    *captionJSON    `json:"caption,omitempty"`
	Alignments []alignmentJSON `json:"alignments,omitempty"`
}

type searchResponse struct {
	Query   string        `json:"query"`
	Mode    string        `json:"mode"`
	Scoring model.Scoring `json:"scoring"`
	// Fusion lists the members of a fused index, whose fused scores the
	// results' are (Scoring is then the first member's).
	Fusion []fusionJSON `json:"fusion,omitempty"`
	// QueryBank, on a text search of a fused index with a query bank,
	// says that the scores are less each image's offset under it.
	QueryBank *queryBankJSON `json:"querybank,omitempty"`
	Results   []resultJSON   `json:"results"`
	Millis    float64        `json:"ms"`
}

// fusionJSON is a member of a fused index (index.Fusion).
type fusionJSON struct {
	Model   string        `json:"model"`
	Scoring model.Scoring `json:"scoring"`
	Weight  float32       `json:"weight"`
}

// queryBankJSON is a fused index's query bank (index.Fusion.SetQueryBank):
// its text searches' scores are the fused scores less each image's offset
// under these captions.
type queryBankJSON struct {
	Captions int     `json:"captions"`
	Beta     float64 `json:"beta"`
}

// queryBank describes the query bank of the server's index, nil when it
// has none (an index of one model, or a fusion without a bank).
func (s *Server) queryBank() *queryBankJSON {
	f, ok := s.ix.(interface{ QueryBank() (int, float64) })
	if !ok {
		return nil
	}
	n, beta := f.QueryBank()
	if n == 0 {
		return nil
	}
	return &queryBankJSON{Captions: n, Beta: beta}
}

// fusion describes the members of the server's index when it is a fusion.
func (s *Server) fusion() []fusionJSON {
	f, ok := s.ix.(fusedSearcher)
	if !ok {
		return nil
	}
	var out []fusionJSON
	for k, ix := range f.Members() {
		info := ix.ModelInfo()
		out = append(out, fusionJSON{Model: info.Name, Scoring: info.Scoring, Weight: f.Weights()[k]})
	}
	return out
}

func (s *Server) image(row index.ImageRow) *imageJSON {
	boxes := row.Boxes
	if boxes == nil {
		boxes = [][4]float32{}
	}
	return &imageJSON{ID: row.ID, Width: row.Width, Height: row.Height, URL: s.images.url(row), Boxes: boxes}
}

func alignments(as []index.Alignment) []alignmentJSON {
	out := make([]alignmentJSON, len(as))
	for i, a := range as {
		out[i] = alignmentJSON{Word: a.Word, Region: a.Region, Box: a.Box, Cosine: a.Cosine, StopWord: minorWord(a.Word)}
	}
	return out
}

// minorWord reports whether w is a stop word or has no letter or digit.
func minorWord(w string) bool {
	if text.IsStopWord(w) {
		return true
	}
	return strings.IndexFunc(w, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) < 0
}

func (s *Server) scoring() model.Scoring { return s.ix.ModelInfo().Scoring }

// textSearch is the body of POST /api/search/text.
type textSearch struct {
	Text    string `json:"text"`
	K       int    `json:"k"`
	Explain bool   `json:"explain"`
}

func (s *Server) searchText(w http.ResponseWriter, r *http.Request) (any, error) {
	var q textSearch
	if err := s.decode(w, r, &q); err != nil {
		return nil, err
	}
	if err := s.checkText("text", q.Text); err != nil {
		return nil, err
	}
	k, err := s.checkK(q.K)
	if err != nil {
		return nil, err
	}
	opts := &index.SearchOptions{K: k, Explain: q.Explain}
	return s.respond(r, q.Text, "text-to-image", func(ctx context.Context) ([]index.Result, error) {
		return s.ix.SearchText(ctx, q.Text, opts)
	}, func(h index.Result) resultJSON {
		return resultJSON{Rank: h.Rank, Item: h.Item, Score: h.Score, Image: s.image(*h.Image), Alignments: alignments(h.Explain)}
	})
}

// respond runs search under the server's limits and times it, and answers
// with its results, each turned into JSON by row.
func (s *Server) respond(r *http.Request, query, mode string, search func(context.Context) ([]index.Result, error), row func(index.Result) resultJSON) (any, error) {
	var res []index.Result
	start := time.Now()
	err := s.run(r, func(ctx context.Context) (err error) {
		res, err = search(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := searchResponse{Query: query, Mode: mode, Scoring: s.scoring(), Fusion: s.fusion(), Results: []resultJSON{}, Millis: millis(start)}
	if mode == "text-to-image" {
		out.QueryBank = s.queryBank()
	}
	for _, h := range res {
		out.Results = append(out.Results, row(h))
	}
	return out, nil
}

// imageSearch is the body of POST /api/search/image.
type imageSearch struct {
	ImageID string `json:"image_id"`
	K       int    `json:"k"`
	Explain bool   `json:"explain"`
}

func (s *Server) searchImage(w http.ResponseWriter, r *http.Request) (any, error) {
	var q imageSearch
	if err := s.decode(w, r, &q); err != nil {
		return nil, err
	}
	if err := checkID("image_id", q.ImageID); err != nil {
		return nil, err
	}
	k, err := s.checkK(q.K)
	if err != nil {
		return nil, err
	}
	opts := &index.SearchOptions{K: k, Explain: q.Explain}
	return s.respond(r, q.ImageID, "image-to-text", func(ctx context.Context) ([]index.Result, error) {
		return s.ix.SearchImage(ctx, q.ImageID, opts)
	}, func(h index.Result) resultJSON {
		return resultJSON{Rank: h.Rank, Item: h.Item, Score: h.Score,
			Caption: &captionJSON{Item: h.Item, Text: h.Caption.Text, ImageID: h.Caption.ImageID}, Alignments: alignments(h.Explain)}
	})
}

// alignRequest is the body of POST /api/align: an image and either a
// sentence or an indexed caption.
type alignRequest struct {
	ImageID string `json:"image_id"`
	Text    string `json:"text"`
	Caption *int   `json:"caption"`
}

type alignResponse struct {
	Image      *imageJSON      `json:"image"`
	Text       string          `json:"text"`
	Caption    *int            `json:"caption,omitempty"`
	Scoring    model.Scoring   `json:"scoring"`
	Score      float32         `json:"score"`
	Alignments []alignmentJSON `json:"alignments"`
}

func (s *Server) align(w http.ResponseWriter, r *http.Request) (any, error) {
	var q alignRequest
	if err := s.decode(w, r, &q); err != nil {
		return nil, err
	}
	if err := checkID("image_id", q.ImageID); err != nil {
		return nil, err
	}
	if (q.Text == "") == (q.Caption == nil) {
		return nil, errorf(http.StatusBadRequest, "give text (a sentence) or caption (an indexed caption's item number), one of them")
	}
	if q.Caption == nil {
		if err := s.checkText("text", q.Text); err != nil {
			return nil, err
		}
	}
	var m *index.Match
	var row index.ImageRow
	err := s.run(r, func(ctx context.Context) (err error) {
		if q.Caption != nil {
			var cp index.CaptionRow
			if cp, err = s.ix.Caption(ctx, *q.Caption); err != nil {
				return err
			}
			q.Text = cp.Text
			m, err = s.ix.AlignCaption(ctx, q.ImageID, *q.Caption, nil)
		} else {
			m, err = s.ix.Align(ctx, q.ImageID, q.Text, nil)
		}
		if err == nil {
			row, err = s.ix.Image(ctx, q.ImageID)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return alignResponse{Image: s.image(row), Text: q.Text, Caption: q.Caption, Scoring: s.scoring(), Score: m.Score, Alignments: alignments(m.Alignments)}, nil
}

type imageDetails struct {
	*imageJSON
	Captions []index.CaptionItem `json:"captions"`
}

func (s *Server) imageDetails(w http.ResponseWriter, r *http.Request) (any, error) {
	id := r.PathValue("id")
	if err := checkID("id", id); err != nil {
		return nil, err
	}
	row, err := s.ix.Image(r.Context(), id)
	if err != nil {
		return nil, err
	}
	caps, err := s.ix.ImageCaptions(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if caps == nil {
		caps = []index.CaptionItem{}
	}
	return imageDetails{imageJSON: s.image(row), Captions: caps}, nil
}

func (s *Server) captionDetails(w http.ResponseWriter, r *http.Request) (any, error) {
	v := r.PathValue("item")
	n, err := strconv.Atoi(v)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "item: want a caption's item number (a whole number), got %q", v)
	}
	cp, err := s.ix.Caption(r.Context(), n)
	if err != nil {
		return nil, err
	}
	return captionJSON{Item: n, Text: cp.Text, ImageID: cp.ImageID}, nil
}

type infoResponse struct {
	Images        int            `json:"images"`
	Captions      int            `json:"captions"`
	Model         string         `json:"model"`
	Scoring       model.Scoring  `json:"scoring"`
	Fusion        []fusionJSON   `json:"fusion,omitempty"`    // a fused index's members
	QueryBank     *queryBankJSON `json:"querybank,omitempty"` // a fused index's query bank
	Dim           int            `json:"dim"`
	ImageFiles    bool           `json:"image_files"` // whether image files are served
	Example       string         `json:"example,omitempty"`
	MaxQueryChars int            `json:"max_query_chars"`
	MaxK          int            `json:"max_k"`
	MaxBodyBytes  int64          `json:"max_body_bytes"`
	// ImageUpload says whether POST /api/search/upload takes images, of
	// at most MaxUploadBytes.
	ImageUpload    bool  `json:"image_upload"`
	MaxUploadBytes int64 `json:"max_upload_bytes,omitempty"`
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) (any, error) {
	ni, nc := s.ix.Len()
	man := s.ix.ModelInfo()
	out := infoResponse{Images: ni, Captions: nc, Model: man.Name, Scoring: man.Scoring, Fusion: s.fusion(), QueryBank: s.queryBank(), Dim: man.Dim,
		ImageFiles: s.images != nil, MaxQueryChars: s.opts.MaxQueryChars, MaxK: s.opts.MaxK, MaxBodyBytes: s.opts.MaxBodyBytes}
	if takesUploads(s.ix) && s.opts.ImageQuery != nil {
		out.ImageUpload, out.MaxUploadBytes = true, s.opts.MaxUploadBytes
	}
	if nc > 0 {
		if cp, err := s.ix.Caption(r.Context(), 0); err == nil {
			out.Example = cp.Text
		}
	}
	return out, nil
}

// healthz answers 200 while serving and 503 once the server drains, so
// that a load balancer sends no more requests.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeError(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	}
	ni, nc := s.ix.Len()
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "images": ni, "captions": nc})
}

func millis(start time.Time) float64 {
	return float64(time.Since(start).Microseconds()) / 1000
}

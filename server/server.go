// Package server serves an index over HTTP: a JSON API for text-to-image
// and image-to-text search, the word-region alignment of an image and a
// caption, and the details of indexed items; the collection's image files;
// and a web page, embedded in the binary, that shows results and draws
// alignments. docs/api.md describes the API.
//
// It has what a service needs: a cap on request bodies and query lengths,
// server timeouts, searches that stop when their client goes away or
// their time is up, a bound on concurrent searches, graceful shutdown,
// /healthz, Prometheus metrics on /metrics, and access logs through
// log/slog. Routing is net/http's ServeMux with method and path patterns.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/xmr-project/xmr/index"
)

// Options tune a Server. The zero value (and nil) gives the defaults.
type Options struct {
	// Images is the directory of the collection's image files (ID.png,
	// ID.jpg, or the catalogue's file names, possibly in subfolders); no
	// file outside it is ever served. Empty serves no images, and the
	// page draws each image's regions as a placeholder.
	Images string
	// MaxBodyBytes caps a request body (0: 64 KiB); a larger one is
	// refused with 413.
	MaxBodyBytes int64
	// MaxQueryChars caps a text query, in characters (0: 1000).
	MaxQueryChars int
	// MaxK caps the results of one search (0: 100).
	MaxK int
	// SearchTimeout bounds one request's search or alignment (0: 10 s);
	// past it the request fails with 503.
	SearchTimeout time.Duration
	// MaxConcurrent is how many searches run at once (0: GOMAXPROCS);
	// the others wait for a turn within their SearchTimeout.
	MaxConcurrent int
	// ReadTimeout bounds the time a request, its body (an upload) included,
	// takes to arrive (0: 15 s); a slower upload is answered 408.
	ReadTimeout time.Duration
	// ShutdownTimeout bounds the drain once Serve's context is cancelled
	// (0: 15 s, more than the default SearchTimeout, within which every
	// request already accepted, waiting for its turn or running, ends);
	// then the uploads still decoding are cancelled and the connections
	// still open are closed.
	ShutdownTimeout time.Duration
	// Logger receives the access log and errors (nil: slog.Default()).
	Logger *slog.Logger
	// ImageQuery, when set, lets clients search a local index by an
	// uploaded image (POST /api/search/upload); nil refuses uploads.
	ImageQuery ImageQuery
	// NoImageQuery, when ImageQuery is nil, says why uploads are refused
	// (the detector's weights could not be loaded, say), for the 501 that
	// answers them; empty: the index's model does not read xmr extract's
	// features.
	NoImageQuery string
	// MaxUploadBytes caps an uploaded image (0: DefaultMaxUploadBytes);
	// a larger one is refused with 413.
	MaxUploadBytes int64
	// UploadPixelBudget caps the pixels, as their headers declare them,
	// of the uploaded images decoded at once (0:
	// DefaultUploadPixelBudget): an upload waits for room within its
	// SearchTimeout, then gets 503; an image larger than the whole
	// budget is refused with 413.
	UploadPixelBudget int64
}

// withDefaults returns o with its zero fields set to the defaults.
func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.MaxBodyBytes <= 0 {
		r.MaxBodyBytes = 64 << 10
	}
	if r.MaxQueryChars <= 0 {
		r.MaxQueryChars = 1000
	}
	if r.MaxK <= 0 {
		r.MaxK = 100
	}
	if r.SearchTimeout <= 0 {
		r.SearchTimeout = 10 * time.Second
	}
	if r.MaxConcurrent <= 0 {
		r.MaxConcurrent = runtime.GOMAXPROCS(0)
	}
	if r.ReadTimeout <= 0 {
		r.ReadTimeout = 15 * time.Second
	}
	if r.ShutdownTimeout <= 0 {
		r.ShutdownTimeout = 15 * time.Second
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	if r.MaxUploadBytes <= 0 {
		r.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if r.UploadPixelBudget <= 0 {
		r.UploadPixelBudget = DefaultUploadPixelBudget
	}
	return r
}

// Server serves one open index. Its methods are safe for concurrent use.
type Server struct {
	ix      index.Searcher
	opts    Options
	images  *imageFiles // nil without Options.Images
	handler http.Handler
	metrics *metrics
	sem     chan struct{} // one token per running search
	pixels  *pixelBudget  // decoded pixels of the uploads in flight

	draining atomic.Bool // set when shutdown begins

	// aborted is done once the shutdown timeout has passed: the uploads
	// still in flight are cancelled with it (their decoding stops), so
	// that Serve returns within the timeout and a small margin.
	aborted context.Context
	abort   context.CancelFunc

	// searching, when set (by tests), is called by each search once it
	// holds its turn, with the search's context.
	searching func(ctx context.Context)
	// drained, when set (by tests), is called by Serve once its
	// listener is closed and the idle connections are.
	drained func()
}

// New returns a server of ix, which must stay open while the server
// runs. It loads the index's model, so that the first query does not pay
// for it, and opens the image directory.
func New(ix index.Searcher, o *Options) (*Server, error) {
	opts := o.withDefaults()
	if _, err := ix.Model(); err != nil {
		return nil, err
	}
	s := &Server{ix: ix, opts: opts, sem: make(chan struct{}, opts.MaxConcurrent), pixels: newPixelBudget(opts.UploadPixelBudget)}
	s.aborted, s.abort = context.WithCancel(context.Background())
	if opts.Images != "" {
		f, err := openImageFiles(opts.Images)
		if err != nil {
			return nil, err
		}
		s.images = f
	}
	s.metrics = newMetrics(ix)
	s.handler = s.routes()
	return s, nil
}

// Close releases the image directory and cancels the uploads still in
// flight. It does not close the index.
func (s *Server) Close() error {
	s.abort()
	if s.images != nil {
		return s.images.root.Close()
	}
	return nil
}

// Handler returns the server's HTTP handler: the routes wrapped in the
// access log, the metrics and the shutdown check.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve answers HTTP requests on ln until ctx is cancelled, then shuts
// down gracefully: it stops accepting connections, serves the ones the
// kernel had already accepted (on Linux), closes the idle keep-alive
// connections at once, lets every request already accepted finish with
// its answer (those waiting for a turn included), each on a connection
// then closed, and returns nil as the last connection closes. After
// Options.ShutdownTimeout it cancels the uploads still in flight (their
// decoding stops), closes the connections still open and returns an
// error that counts them. It returns the error if serving
// fails. drain.go says what http.Server.Shutdown did instead.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	dl := newDrainListener(ln)
	conns := newConnTracker()
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       s.opts.ReadTimeout,
		WriteTimeout:      s.opts.SearchTimeout + 15*time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(s.opts.Logger.Handler(), slog.LevelWarn),
		ConnState:         conns.update,
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(dl) }()
	select {
	case err := <-errc:
		hs.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	start := time.Now()
	// From now on every answer says Connection: close.
	s.draining.Store(true)
	_, active := conns.open()
	s.opts.Logger.Info("shutting down: finishing the requests in flight", "active_connections", active, "timeout", s.opts.ShutdownTimeout)
	timeout := time.NewTimer(s.opts.ShutdownTimeout)
	defer timeout.Stop()
	// hs.Serve returns once the listener has handed over the connections
	// queued in the kernel and closed; each is then known to conns.
	dl.stop()
	var allClosed <-chan struct{}
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			hs.Close()
			return fmt.Errorf("serve: %w", err)
		}
		allClosed = conns.drain()
		if s.drained != nil {
			s.drained()
		}
	case <-timeout.C:
	}
	if allClosed != nil {
		select {
		case <-allClosed:
			hs.Close()
			s.opts.Logger.Info("shut down: every request answered", "took", time.Since(start).Round(time.Millisecond))
			return nil
		case <-timeout.C:
		}
	}
	n, active := conns.open()
	// Cancel the uploads still in flight: a request's own context ends
	// when its connection closes only once its body was read to the end
	// (a multipart upload's need not be), and the decode then stops.
	s.abort()
	hs.Close()
	s.opts.Logger.Warn("shutdown: connections still open after the timeout were closed", "connections", n, "answering", active, "timeout", s.opts.ShutdownTimeout)
	// Their requests' contexts are cancelled now; wait for the handlers
	// to return, so that the caller does not close the index under them.
	stopped := time.NewTimer(handlerStopWait)
	defer stopped.Stop()
	select {
	case <-conns.drain():
	case <-stopped.C:
		n, _ := conns.open()
		s.opts.Logger.Warn("shutdown: requests still running after their connections were closed", "requests", n, "waited", handlerStopWait)
	}
	return fmt.Errorf("shutdown: closed %d connection(s) still open after %v, %d of them answering a request", n, s.opts.ShutdownTimeout, active)
}

// handlerStopWait bounds the wait, once the shutdown timeout has closed
// the connections, for their handlers to see their cancelled contexts and
// return.
const handlerStopWait = 5 * time.Second

// ListenAndServe listens on the TCP address addr and serves as Serve
// does; ready, if not nil, is called with the listening address (useful
// with port 0).
func (s *Server) ListenAndServe(ctx context.Context, addr string, ready func(net.Addr)) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if ready != nil {
		ready(ln.Addr())
	}
	return s.Serve(ctx, ln)
}

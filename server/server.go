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
	// ShutdownTimeout is how long Serve waits for requests in flight
	// once its context is cancelled (0: 15 s); then it closes their
	// connections.
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

	draining atomic.Bool // set when shutdown begins

	// searching, when set (by tests), is called by each search once it
	// holds its turn, with the search's context.
	searching func(ctx context.Context)
}

// New returns a server of ix, which must stay open while the server
// runs. It loads the index's model, so that the first query does not pay
// for it, and opens the image directory.
func New(ix index.Searcher, o *Options) (*Server, error) {
	opts := o.withDefaults()
	if _, err := ix.Model(); err != nil {
		return nil, err
	}
	s := &Server{ix: ix, opts: opts, sem: make(chan struct{}, opts.MaxConcurrent)}
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

// Close releases the image directory. It does not close the index.
func (s *Server) Close() error {
	if s.images != nil {
		return s.images.root.Close()
	}
	return nil
}

// Handler returns the server's HTTP handler: the routes wrapped in the
// access log, the metrics and the shutdown check.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve answers HTTP requests on ln until ctx is cancelled, then shuts
// down gracefully: it stops accepting connections, answers 503 to
// requests that arrive on open connections, lets the requests in flight
// finish (for up to Options.ShutdownTimeout) and returns nil. It returns
// the error if serving fails.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       s.opts.ReadTimeout,
		WriteTimeout:      s.opts.SearchTimeout + 15*time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(s.opts.Logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.opts.Logger.Info("shutting down: finishing the requests in flight", "timeout", s.opts.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
		return fmt.Errorf("shutdown: requests still running after %v were cut off: %w", s.opts.ShutdownTimeout, err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

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

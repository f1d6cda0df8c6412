package server

import (
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/xmr-project/xmr/index"
)

// metrics are the server's Prometheus metrics, in a registry of its own
// (several servers may live in one process, as in the tests).
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec   // by endpoint and status code
	latency  *prometheus.HistogramVec // by endpoint
	inFlight prometheus.Gauge
}

// latencyBuckets are the histogram's upper bounds, in seconds: from a
// look-up (under a millisecond) to a search at its time limit.
var latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

func newMetrics(ix index.Searcher) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xmr_http_requests_total",
			Help: "HTTP requests answered, by endpoint (the route's pattern) and status code.",
		}, []string{"endpoint", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "xmr_http_request_duration_seconds",
			Help:    "Time from a request's arrival to its answer, by endpoint.",
			Buckets: latencyBuckets,
		}, []string{"endpoint"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "xmr_http_requests_in_flight",
			Help: "Requests being answered now.",
		}),
	}
	images, captions := ix.Len()
	m.reg.MustRegister(m.requests, m.latency, m.inFlight,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "xmr_index_images", Help: "Images in the served index."}, func() float64 { return float64(images) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "xmr_index_captions", Help: "Captions in the served index."}, func() float64 { return float64(captions) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// recorder remembers the status and size of an answer, and closes the
// connection after it once the server is draining.
type recorder struct {
	http.ResponseWriter
	status   int
	bytes    int64
	wrote    bool
	draining *atomic.Bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
		if r.draining.Load() {
			// Checked as the answer goes out, not as the request came:
			// a request that was running when the drain began closes
			// its connection too, and its client does not send another.
			r.Header().Set("Connection", "close")
		}
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// middleware sets the headers every answer carries, counts and times
// each request by endpoint, and writes the access log. Once the server
// is draining, requests are still answered (they came on connections
// accepted before), each closing its connection.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		rec := &recorder{ResponseWriter: w, status: http.StatusOK, draining: &s.draining}
		s.metrics.inFlight.Inc()
		next.ServeHTTP(rec, r)
		endpoint := r.Pattern
		if endpoint == "" {
			endpoint = "unmatched"
		}
		s.metrics.inFlight.Dec()
		d := time.Since(start)
		s.metrics.requests.WithLabelValues(endpoint, strconv.Itoa(rec.status)).Inc()
		s.metrics.latency.WithLabelValues(endpoint).Observe(d.Seconds())
		s.opts.Logger.LogAttrs(r.Context(), slog.LevelInfo, "http",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", rec.status),
			slog.Int64("bytes", rec.bytes), slog.Float64("ms", float64(d.Microseconds())/1000), slog.String("remote", r.RemoteAddr))
	})
}

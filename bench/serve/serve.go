// Package serve is `xmr bench serve`: a load test of the HTTP server on
// loopback. It builds an index of a synthetic world's images (5,000 by
// default), serves it, times one client alone (5 s: a search's own
// latency), then runs concurrent clients (64) that send text searches for
// a while (30 s, after 3 s of warm-up): it reports the errors, the latency
// percentiles, the throughput, and the process's memory (server and
// clients share it) before, during and after the load.
package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/server"
	"github.com/xmr-project/xmr/synth"
	"github.com/xmr-project/xmr/train"
)

// Benchmark is `xmr bench serve [key=value ...]`.
var Benchmark = bench.Benchmark{
	Name: "serve",
	Summary: "the HTTP server under load on loopback: concurrent clients send text searches to an index of a synthetic world " +
		"[images=5000 clients=64 duration=30s k=10 checkpoint=CKPT dir=DIR]",
	Run: run,
}

// params are the benchmark's arguments.
type params struct {
	images, clients, k, dim int
	duration, warmup, alone time.Duration
	checkpoint, config, dir string
}

func parse(opts bench.Options) (params, error) {
	p := params{images: 5000, clients: 64, k: 10, dim: 256, duration: 30 * time.Second, warmup: 3 * time.Second, alone: 5 * time.Second, config: "teran-mrsw-small"}
	if opts.Quick {
		p.images, p.clients, p.dim, p.duration, p.warmup, p.alone = 100, 4, 32, time.Second, 200*time.Millisecond, 300*time.Millisecond
	}
	err := bench.ParseArgs("serve", opts.Args, map[string]any{"images": &p.images, "clients": &p.clients, "k": &p.k, "dim": &p.dim,
		"duration": &p.duration, "warmup": &p.warmup, "alone": &p.alone, "checkpoint": &p.checkpoint, "config": &p.config, "dir": &p.dir})
	if err != nil {
		return p, err
	}
	if p.clients <= 0 || p.k <= 0 || p.dim <= 0 {
		return p, errors.New("serve: clients, k and dim must be positive")
	}
	if p.images < 100 {
		return p, fmt.Errorf("serve: images=%d: want at least 100", p.images)
	}
	if p.duration <= 0 || p.alone <= 0 {
		return p, errors.New("serve: duration and alone must be positive")
	}
	return p, nil
}

func run(ctx context.Context, opts bench.Options) error {
	p, err := parse(opts)
	if err != nil {
		return err
	}
	dir, cleanup, err := bench.WorkDir(p.dir, "xmr-bench-serve-")
	if err != nil {
		return err
	}
	defer cleanup()
	queries, err := prepare(ctx, p, dir)
	if err != nil {
		return err
	}
	ix, err := index.Open(ctx, filepath.Join(dir, "index"), nil)
	if err != nil {
		return err
	}
	defer ix.Close()
	s, err := server.New(ix, &server.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- s.Serve(sctx, ln) }()
	defer func() {
		stop()
		<-served
	}()
	url := "http://" + ln.Addr().String() + "/api/search/text"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: p.clients, MaxConnsPerHost: p.clients}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()

	debug.FreeOSMemory() // what building the index (in this process) left behind
	idle := sample()
	// One client alone: the time a search takes when none waits.
	alone, err := load(ctx, client, url, queries, 1, p.k, p.alone)
	if err != nil {
		return err
	}
	if _, err := load(ctx, client, url, queries, p.clients, p.k, p.warmup); err != nil {
		return err
	}
	before := sample()
	samples := []memSample{before}
	sampling := make(chan struct{})
	var sampled sync.WaitGroup
	sampled.Add(1)
	go func() {
		defer sampled.Done()
		t := time.NewTicker(p.duration / 6)
		defer t.Stop()
		for {
			select {
			case <-sampling:
				return
			case <-t.C:
				samples = append(samples, sample())
			}
		}
	}()
	start := time.Now()
	st, err := load(ctx, client, url, queries, p.clients, p.k, p.duration)
	elapsed := time.Since(start)
	close(sampling)
	sampled.Wait()
	if err != nil {
		return err
	}
	after := sample()
	samples = append(samples, after)

	ni, nc := ix.Len()
	shape := fmt.Sprintf("%d images, %d captions; %d clients, %v; k=%d; GOMAXPROCS %d", ni, nc, p.clients, p.duration, p.k, runtime.GOMAXPROCS(0))
	name := "serve"
	lat := st.latencies
	emit := func(metric string, v float64, unit string) {
		opts.Emit(bench.Result{Name: name, Metric: metric, Value: v, Unit: unit, Note: shape})
	}
	opts.Emit(bench.Result{Name: name, Metric: "latency p50, 1 client", Value: ms(bench.Percentile(alone.latencies, 0.5)), Unit: "ms",
		Note: fmt.Sprintf("%d requests in %v, %d errors", alone.requests, p.alone, alone.errors)})
	opts.Emit(bench.Result{Name: name, Metric: "throughput, 1 client", Value: float64(alone.requests) / p.alone.Seconds(), Unit: "req/s"})
	emit("requests", float64(st.requests), "count")
	emit("errors", float64(st.errors), "count")
	emit("throughput", float64(st.requests)/elapsed.Seconds(), "req/s")
	emit("latency p50", ms(bench.Percentile(lat, 0.50)), "ms")
	emit("latency p90", ms(bench.Percentile(lat, 0.90)), "ms")
	emit("latency p99", ms(bench.Percentile(lat, 0.99)), "ms")
	emit("latency max", ms(bench.Percentile(lat, 1)), "ms")
	emit("rss idle", idle.rss, "MiB")
	emit("rss before", before.rss, "MiB")
	emit("rss after", after.rss, "MiB")
	emit("rss max during", maxOf(samples, func(m memSample) float64 { return m.rss }), "MiB")
	emit("heap live idle", idle.heap, "MiB")
	emit("heap live before", before.heap, "MiB")
	emit("heap live after", after.heap, "MiB")
	emit("goroutines after", float64(after.goroutines), "count")
	var trace []string
	for _, m := range samples {
		trace = append(trace, fmt.Sprintf("%.0f/%.0f", m.rss, m.heap))
	}
	opts.Emit(bench.Result{Name: name, Metric: "rss/heap MiB over the run", Value: float64(len(samples)), Unit: "samples", Note: strings.Join(trace, " ")})
	if st.errors > 0 {
		return fmt.Errorf("serve: %d of %d requests failed; first: %s", st.errors, st.requests, st.firstError)
	}
	return nil
}

// prepare makes the world and the index in dir (or reuses those there)
// and returns the queries: the world's captions.
func prepare(ctx context.Context, p params, dir string) ([]string, error) {
	world := filepath.Join(dir, "world")
	if _, err := synth.LoadManifest(world); err != nil {
		slog.Info("bench serve: generating a world", "images", p.images, "dir", world)
		if _, err := synth.Generate(ctx, world, synth.Config{N: p.images + 200, Seed: 11, Dim: p.dim, Regions: 36, Noise: 0.1, NoImages: true, Dev: 100, Test: p.images, Progress: true}); err != nil {
			return nil, err
		}
	}
	split, err := data.LoadPrecomp(ctx, world, "testall", nil)
	if err != nil {
		return nil, err
	}
	defer split.Close()
	if split.NumImages() != p.images {
		return nil, fmt.Errorf("serve: the world in %s has %d images, not images=%d: give another dir", world, split.NumImages(), p.images)
	}
	queries := slices.Clone(split.Captions)
	idx := filepath.Join(dir, "index")
	if ix, err := index.Open(ctx, idx, &index.OpenOptions{SkipChecksums: true}); err == nil {
		ni, _ := ix.Len()
		ix.Close()
		if ni == p.images {
			return queries, nil
		}
	}
	m, err := benchModel(p, split)
	if err != nil {
		return nil, err
	}
	c := index.Collection{Images: split.Images}
	for i := 0; i < split.NumImages(); i++ {
		row := index.ImageRow{ID: split.ID(i)}
		if split.Sizes != nil {
			row.Width, row.Height = split.Sizes[i][0], split.Sizes[i][1]
		}
		for r := 0; r < split.Images.NumRegions(i); r++ {
			b := split.Images.Box5(i, r)
			row.Boxes = append(row.Boxes, [4]float32{b[0], b[1], b[2], b[3]})
		}
		c.ImageRows = append(c.ImageRows, row)
		for _, cp := range split.CaptionsOf(i) {
			c.Captions = append(c.Captions, index.CaptionRow{Text: cp, ImageID: row.ID})
		}
	}
	slog.Info("bench serve: building the index", "images", len(c.ImageRows), "captions", len(c.Captions), "dir", idx)
	if _, err := index.Build(ctx, idx, m, c, &index.BuildOptions{Mode: index.Overwrite, Progress: true}); err != nil {
		return nil, err
	}
	return queries, nil
}

// benchModel loads checkpoint=, or makes an untrained model of config=
// over the split's words: it ranks at random but costs what a trained one
// of its size does.
func benchModel(p params, split *data.Split) (model.Model, error) {
	if p.checkpoint != "" {
		m, f, err := model.Load(p.checkpoint)
		if err != nil {
			return nil, err
		}
		f.Close()
		if fd := m.Config().ImageModel.FeatDim; fd != p.dim {
			return nil, fmt.Errorf("serve: the checkpoint reads %d-d region features; give dim=%d", fd, fd)
		}
		return m, nil
	}
	cfg, err := train.LoadConfig(p.config)
	if err != nil {
		return nil, err
	}
	mc := cfg.ModelConfig()
	mc.ImageModel.FeatDim = p.dim
	tok, err := model.BuildTokenizer(mc, split.Captions)
	if err != nil {
		return nil, err
	}
	return model.New(mc, tok, 1)
}

// stats are what the clients saw.
type stats struct {
	requests, errors int64
	latencies        []time.Duration
	firstError       string
}

// load runs clients that send text searches (the queries in turn, each
// client from its own place) for d and collects what they saw.
func load(ctx context.Context, c *http.Client, url string, queries []string, clients, k int, d time.Duration) (*stats, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var st stats
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			var requests, errs int64
			var first string
			n := int64(w) * 7919
			for ctx.Err() == nil {
				q := queries[(n+next.Add(1))%int64(len(queries))]
				body, _ := json.Marshal(map[string]any{"text": q, "k": k})
				t := time.Now()
				err := search(c, url, body, k)
				if ctx.Err() != nil && err != nil {
					break // the load ended during this request
				}
				lat = append(lat, time.Since(t))
				requests++
				if err != nil {
					errs++
					if first == "" {
						first = err.Error()
					}
				}
			}
			mu.Lock()
			st.requests += requests
			st.errors += errs
			st.latencies = append(st.latencies, lat...)
			if st.firstError == "" {
				st.firstError = first
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	return &st, nil
}

// search sends one query and checks the answer: 200 and k results.
func search(c *http.Client, url string, body []byte, k int) error {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var r struct {
		Results []json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return err
	}
	if len(r.Results) != k {
		return fmt.Errorf("%d results, want %d", len(r.Results), k)
	}
	return nil
}

// memSample is the process's memory at one time.
type memSample struct {
	rss, heap  float64 // MiB: resident set; live heap after a collection
	goroutines int
}

func sample() memSample {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSample{rss: rssMiB(), heap: float64(ms.HeapAlloc) / (1 << 20), goroutines: runtime.NumGoroutine()}
}

// rssMiB reads the resident set size from /proc (0 elsewhere).
func rssMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func maxOf(s []memSample, f func(memSample) float64) float64 {
	m := 0.0
	for _, x := range s {
		m = max(m, f(x))
	}
	return m
}

// Package weaviate is `xmr bench weaviate`: text-to-image MrSw search of a
// synthetic collection held in Weaviate (multi-vector maxSim, with and
// without MUVERA) against xmr's local index, float32 and compressed, in
// one run: build or upload throughput, bytes per image of the local
// indexes, median latency per query and recall@10 against exhaustive
// float32 scoring; and the recall cost of the number of candidates that a
// re-ranked scoring (MwSr) fetches from Weaviate.
package weaviate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/xmr-project/xmr/bench"
	benchsearch "github.com/xmr-project/xmr/bench/search"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/progress"
	"github.com/xmr-project/xmr/weaviate"
)

// Benchmark is `xmr bench weaviate [key=value ...]`.
var Benchmark = bench.Benchmark{
	Name: "weaviate",
	Summary: "text-to-image MrSw in Weaviate (maxSim, with and without MUVERA) vs the local index, float32 and compressed: upload, latency, recall@10; " +
		"candidates' recall cost [images=100000 regions=36 dim=128 queries=50 variants=plain,muvera]",
	Run: run,
}

type params struct {
	images, regions, dim, queries, words int
	efConstruction, maxConnections, ef   int
	efs                                  []int
	batch, parallel                      int
	variants                             []string
	candidates                           []int
	dir, server                          string
	async                                bool
}

func parse(opts bench.Options) (params, error) {
	p := params{images: 100000, regions: 36, dim: 128, queries: 50, words: 12, efConstruction: 64, maxConnections: 16,
		batch: 100, parallel: 2, variants: []string{"plain", "muvera"}, candidates: []int{100, 300, 1000}}
	if opts.Quick {
		p.images, p.dim, p.queries = 2000, 32, 10
	}
	err := bench.ParseArgs("weaviate", opts.Args, map[string]any{"images": &p.images, "regions": &p.regions, "dim": &p.dim,
		"queries": &p.queries, "words": &p.words, "ef-construction": &p.efConstruction, "max-connections": &p.maxConnections,
		"ef": &p.ef, "batch": &p.batch, "parallel": &p.parallel, "candidates": &p.candidates, "dir": &p.dir, "server": &p.server,
		"async": &p.async,
		"variants": func(v string) error {
			p.variants = strings.Split(v, ",")
			for _, x := range p.variants {
				if x != "plain" && x != "muvera" {
					return fmt.Errorf("want plain, muvera or both (comma-separated)")
				}
			}
			return nil
		},
		"efs": func(v string) error {
			p.efs = nil
			for _, x := range strings.Split(v, ",") {
				n, err := strconv.Atoi(x)
				if err != nil || (n <= 0 && n != -1) {
					return fmt.Errorf("want HNSW ef values (positive, or -1 for dynamic), comma-separated")
				}
				p.efs = append(p.efs, n)
			}
			return nil
		}})
	if err != nil {
		return p, err
	}
	if p.dim%16 != 0 || p.images <= 0 || p.regions <= 0 || p.queries <= 0 || p.words <= 0 || p.batch <= 0 || p.parallel <= 0 {
		return p, fmt.Errorf("weaviate: dim must be a multiple of 16; images, regions, queries, words, batch and parallel positive")
	}
	return p, nil
}

func run(ctx context.Context, opts bench.Options) error {
	p, err := parse(opts)
	if err != nil {
		return err
	}
	tmp, cleanup, err := bench.WorkDir(p.dir, "xmr-bench-weaviate-")
	if err != nil {
		return err
	}
	defer cleanup()
	co := weaviate.ClusterOptions{Binary: p.server, Nodes: 1, Dir: filepath.Join(tmp, "weaviate")}
	if p.async {
		co.Env = append(co.Env, "ASYNC_INDEXING=true")
	}
	cl, err := weaviate.StartCluster(ctx, co)
	if err != nil {
		return err
	}
	defer cl.Stop()
	m, err := benchsearch.StubModel(p.dim)
	if err != nil {
		return err
	}
	info := index.ModelInfo{Name: m.Name(), File: "-", Fingerprint: model.Fingerprint(m), Dim: p.dim, Scoring: model.MrSw}
	note := fmt.Sprintf("%d images x %d regions, d=%d, generated; HNSW efConstruction=%d maxConnections=%d; %d cores, 1 Weaviate node",
		p.images, p.regions, p.dim, p.efConstruction, p.maxConnections, runtime.NumCPU())
	w := benchsearch.NewWorld(p.dim, 7)
	const chunk = 8192
	rows := func(lo, hi int) []index.ImageRow {
		r := make([]index.ImageRow, hi-lo)
		for i := range r {
			r[i] = index.ImageRow{ID: fmt.Sprintf("img%08d", lo+i)}
		}
		return r
	}

	// The local indexes: float32 (the truth's, and xmr's exact path) and
	// compressed (cells and residual codes, xmr's layout at scale).
	locals := []struct {
		name, dir string
		layout    index.Layout
		wr        *index.Writer
		took      time.Duration
		ix        *index.Index
	}{{name: "float32", layout: index.LayoutFloat32}, {name: "compressed", layout: index.LayoutCompressed}}
	for i := range locals {
		l := &locals[i]
		l.dir = filepath.Join(tmp, "local-"+l.name+".idx")
		wr, err := index.NewWriter(l.dir, m, index.Overwrite)
		if err != nil {
			return err
		}
		defer wr.Abort()
		if err := wr.SetLayout(index.LayoutOptions{Layout: l.layout, Images: p.images}); err != nil {
			return err
		}
		l.wr = wr
	}
	for lo := 0; lo < p.images; lo += chunk {
		hi := min(lo+chunk, p.images)
		e := w.Images(lo, hi, p.regions)
		for i := range locals {
			st := time.Now()
			if err := locals[i].wr.AddImages(ctx, e, rows(lo, hi)); err != nil {
				return err
			}
			locals[i].took += time.Since(st)
		}
	}
	for i := range locals {
		l := &locals[i]
		st := time.Now()
		if err := l.wr.Commit(ctx); err != nil {
			return err
		}
		l.took += time.Since(st)
		if l.ix, err = index.Open(ctx, l.dir, &index.OpenOptions{SkipChecksums: true}); err != nil {
			return err
		}
		defer l.ix.Close()
		opts.Emit(bench.Result{Name: "weaviate/local index build, " + l.name, Metric: "throughput", Value: float64(p.images) / l.took.Seconds(), Unit: "images/s", Note: note + "; generating the vectors excluded"})
		opts.Emit(bench.Result{Name: "weaviate/local index build, " + l.name, Metric: "bytes per image", Value: float64(benchsearch.DirSize(l.dir)) / float64(p.images), Unit: "B", Note: note + "; the whole index directory"})
	}
	local, compressed := locals[0].ix, locals[1].ix

	// The Weaviate collections.
	indexes := map[string]*weaviate.Index{}
	for _, v := range p.variants {
		cfg := weaviate.Config{URL: cl.Nodes[0].URL, Collection: "Bench" + strings.ToUpper(v[:1]) + v[1:], Muvera: v == "muvera",
			EfConstruction: p.efConstruction, MaxConnections: p.maxConnections, Ef: p.ef, BatchSize: p.batch, Parallel: p.parallel}
		u, err := weaviate.NewUploader(ctx, cfg)
		if err != nil {
			return err
		}
		if err := u.Reset(ctx); err != nil {
			return err
		}
		if err := u.EnsureCollections(ctx); err != nil {
			return err
		}
		bar := progress.New("upload to weaviate ("+v+")", int64(p.images), "images")
		var up time.Duration
		for lo := 0; lo < p.images; lo += chunk {
			hi := min(lo+chunk, p.images)
			e := w.Images(lo, hi, p.regions)
			st := time.Now()
			if err := u.AddImages(ctx, lo, e, rows(lo, hi), bar); err != nil {
				bar.Finish()
				return err
			}
			up += time.Since(st)
		}
		bar.Finish()
		if p.async {
			st := time.Now()
			if err := waitIndexed(ctx, cl.Nodes[0].URL); err != nil {
				return err
			}
			up += time.Since(st)
		}
		opts.Emit(bench.Result{Name: "weaviate/upload " + v, Metric: "throughput", Value: float64(p.images) / up.Seconds(), Unit: "images/s",
			Note: note + fmt.Sprintf("; batches of %d, %d in flight; HNSW built as it goes (async indexing: %v)", p.batch, p.parallel, p.async)})
		ix, err := weaviate.Attach(ctx, weaviate.Manifest{Format: weaviate.Format, Version: weaviate.Version, Config: cfg, Model: info, Images: p.images, ImagesDone: p.images})
		if err != nil {
			return err
		}
		indexes[v] = ix
	}

	// Queries: the objects of random images, plus function words; the truth
	// is exhaustive float32 scoring.
	rng := rand.New(rand.NewPCG(11, 12))
	var queries []*model.Embeddings
	for range p.queries {
		queries = append(queries, w.Query(rng.IntN(p.images), p.words, rng))
	}
	truth := func(s model.Scoring) ([][]int, []float64, error) {
		out := make([][]int, len(queries))
		var ms []float64
		for i, q := range queries {
			st := time.Now()
			res, err := local.Search(ctx, q, true, &index.SearchOptions{K: 10, Exact: true, Candidates: -1, Scoring: s})
			if err != nil {
				return nil, nil, err
			}
			ms = append(ms, millis(st))
			for _, r := range res {
				out[i] = append(out[i], r.Item)
			}
		}
		return out, ms, nil
	}
	mrsw, exactMS, err := truth(model.MrSw)
	if err != nil {
		return err
	}
	qnote := fmt.Sprintf("; median of %d text queries of %d words, k=10", len(queries), p.words)
	opts.Emit(bench.Result{Name: "weaviate/local exhaustive float32 MrSw", Metric: "latency", Value: bench.Median(exactMS), Unit: "ms/query", Note: note + qnote})
	measure := func(name string, search func(q *model.Embeddings) ([]index.Result, error), want [][]int, recallNote string) error {
		ms, recall, err := benchsearch.Measure(queries, want, search)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		opts.Emit(bench.Result{Name: name, Metric: "latency", Value: bench.Median(ms), Unit: "ms/query", Note: note + qnote})
		opts.Emit(bench.Result{Name: name, Metric: "recall@10", Value: recall, Note: recallNote})
		return nil
	}
	err = measure("weaviate/local index MrSw (default: 4-bit PQ codes + float32 re-ranking)", func(q *model.Embeddings) ([]index.Result, error) {
		return local.Search(ctx, q, true, &index.SearchOptions{K: 10})
	}, mrsw, "against exhaustive float32 MrSw")
	if err != nil {
		return err
	}
	err = measure(fmt.Sprintf("weaviate/local index MrSw (pruned: inverted file, %d candidates)", index.AutoCandidates), func(q *model.Embeddings) ([]index.Result, error) {
		return local.Search(ctx, q, true, &index.SearchOptions{K: 10, Candidates: index.AutoCandidates})
	}, mrsw, "against exhaustive float32 MrSw")
	if err != nil {
		return err
	}
	err = measure(fmt.Sprintf("weaviate/local compressed index MrSw (%d candidates, re-ranked from the codes)", index.AutoCandidates), func(q *model.Embeddings) ([]index.Result, error) {
		return compressed.Search(ctx, q, true, &index.SearchOptions{K: 10})
	}, mrsw, "against exhaustive float32 MrSw")
	if err != nil {
		return err
	}
	c, err := weaviate.NewClient(cl.Nodes[0].URL)
	if err != nil {
		return err
	}
	for _, v := range p.variants {
		ix := indexes[v]
		err := measure("weaviate/weaviate "+v+" MrSw (maxSim)", func(q *model.Embeddings) ([]index.Result, error) {
			return ix.Search(ctx, q, true, &index.SearchOptions{K: 10})
		}, mrsw, "against exhaustive float32 MrSw")
		if err != nil {
			return err
		}
		// The query-time HNSW ef, changed in place.
		wcfg := ix.Manifest().Config
		class := wcfg.ImagesCollection()
		for _, ef := range p.efs {
			if err := c.SetEf(ctx, class, ef); err != nil {
				return err
			}
			err := measure(fmt.Sprintf("weaviate/weaviate %s MrSw (maxSim), ef=%d", v, ef), func(q *model.Embeddings) ([]index.Result, error) {
				return ix.Search(ctx, q, true, &index.SearchOptions{K: 10})
			}, mrsw, "against exhaustive float32 MrSw")
			if err != nil {
				return err
			}
		}
		if len(p.efs) > 0 {
			restore := p.ef
			if restore == 0 {
				restore = -1 // dynamic, Weaviate's default
			}
			if err := c.SetEf(ctx, class, restore); err != nil {
				return err
			}
		}
	}
	// The re-ranked scorings: MwSr candidates fetched by maxSim, re-ranked
	// exactly in xmr.
	mwsr, _, err := truth(model.MwSr)
	if err != nil {
		return err
	}
	for _, v := range p.variants {
		ix := indexes[v]
		for _, c := range p.candidates {
			err := measure(fmt.Sprintf("weaviate/weaviate %s MwSr re-ranked, %d candidates", v, c), func(q *model.Embeddings) ([]index.Result, error) {
				return ix.Search(ctx, q, true, &index.SearchOptions{K: 10, Scoring: model.MwSr, Candidates: c})
			}, mwsr, "against exhaustive float32 MwSr")
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// waitIndexed waits until the vector queues of every shard are empty
// (async indexing).
func waitIndexed(ctx context.Context, url string) error {
	c, err := weaviate.NewClient(url)
	if err != nil {
		return err
	}
	for {
		n, err := c.QueuedVectors(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func millis(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

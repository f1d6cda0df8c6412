// Package search is `xmr bench search`: the speed of the index's scoring
// (exhaustive float32, int8 with and without float32 re-ranking, 4-bit
// product-quantised codes with and without it, in both directions, and at
// the TERAN paper's sizes) against the memory bandwidth and against the
// same scoring in PyTorch, measured in one run; and on request the
// compressed paths' recall cost on a trained model's index and the pruned
// search of a million-image index.
package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/internal/infile"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/progress"
	"github.com/xmr-project/xmr/text"
)

// Benchmark is `xmr bench search [key=value ...]`.
var Benchmark = bench.Benchmark{
	Name: "search",
	Summary: "index scoring: exhaustive float32, int8 and 4-bit PQ (+ re-ranking) both ways vs memory bandwidth and PyTorch " +
		"[images=5000 captions=25000 dim=1024 | world=DIR checkpoint=CKPT [split=test dsub=2 coder=auto|pq|directions]: the compressed paths' recall | scale=1000000 [scale-dim=256 scale-captions=5 layout=auto|compressed|float32 dsub=2 coder=auto candidates=1000,3000 probes=2,4 rerank=R passes=3 fresh=200 reuse=1]: the index at scale]",
	Run: run,
}

// params are the benchmark's arguments.
type params struct {
	images, captions, regions, words, dim, reps int
	world, checkpoint                           string
	scale, scaleDim, queries, objects           int
	dir                                         string
	candidates, probes                          []int // of the scale run (none: the index's defaults)
	reuse                                       bool  // the scale run: search dir's index and truth again
	rerank                                      int   // the scale run's SearchOptions.Rerank
	layout                                      index.Layout
	coder                                       index.ResidualCoder // the compressed layout's residual coder
	split                                       string              // of world=
	dsub, scaleCaptions, passes                 int                 // the scale run's residual subspace width, captions per image, timed passes
	fresh                                       int                 // the scale run: text queries timed once each per configuration, no two alike
}

func parse(opts bench.Options) (params, error) {
	p := params{images: 5000, captions: 25000, regions: 36, words: 12, dim: 1024, reps: 10, scaleDim: 256, queries: 20, objects: worldObjects, passes: 3, split: "test"}
	if opts.Quick {
		p.images, p.captions, p.dim, p.reps = 200, 1000, 64, 2
	}
	err := bench.ParseArgs("search", opts.Args, map[string]any{"images": &p.images, "captions": &p.captions, "regions": &p.regions,
		"words": &p.words, "dim": &p.dim, "reps": &p.reps, "scale": &p.scale, "scale-dim": &p.scaleDim, "queries": &p.queries,
		"objects": &p.objects, "reuse": &p.reuse, "dsub": &p.dsub, "scale-captions": &p.scaleCaptions, "passes": &p.passes, "fresh": &p.fresh,
		"layout": bench.Choice(&p.layout, map[string]index.Layout{"auto": index.LayoutAuto, "compressed": index.LayoutCompressed, "float32": index.LayoutFloat32}),
		"coder":  bench.Choice(&p.coder, map[string]index.ResidualCoder{"auto": index.CoderAuto, "pq": index.CoderPQ, "directions": index.CoderDirections}),
		"rerank": func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < -1 {
				return errors.New("want a whole number, or -1 for no re-ranking")
			}
			p.rerank = n
			return nil
		}, "world": &p.world, "checkpoint": &p.checkpoint, "dir": &p.dir, "split": &p.split,
		"candidates": &p.candidates, "probes": &p.probes})
	if err != nil {
		return p, err
	}
	if (p.world == "") != (p.checkpoint == "") {
		return p, fmt.Errorf("search: world= and checkpoint= go together")
	}
	if p.dim%16 != 0 || p.scaleDim%16 != 0 || p.regions <= 0 || p.words <= 0 || p.reps <= 0 || p.objects <= 0 || p.passes <= 0 {
		return p, fmt.Errorf("search: dim and scale-dim must be multiples of 16, regions, words, reps, objects and passes positive")
	}
	if p.dsub < 0 || p.scaleCaptions < 0 || p.fresh < 0 {
		return p, fmt.Errorf("search: dsub, scale-captions and fresh must not be negative")
	}
	return p, nil
}

func run(ctx context.Context, opts bench.Options) error {
	p, err := parse(opts)
	if err != nil {
		return err
	}
	tmp, cleanup, err := bench.WorkDir(p.dir, "xmr-bench-search-")
	if err != nil {
		return err
	}
	defer cleanup()
	if p.scale > 0 {
		return scaleRun(ctx, opts, p, tmp)
	}
	bw := bandwidth(opts.Quick)
	opts.Emit(bench.Result{Name: "search/memory", Metric: "read bandwidth", Value: bw, Unit: "GB/s",
		Note: fmt.Sprintf("sum of a 1 GiB buffer on %d goroutines", runtime.GOMAXPROCS(0))})
	if err := exhaustive(ctx, opts, p, tmp, bw); err != nil {
		return err
	}
	if p.world != "" {
		if err := recallCost(ctx, opts, p, tmp); err != nil {
			return err
		}
	}
	return nil
}

// bandwidth measures the memory read bandwidth: the best of a few passes
// summing a 1 GiB buffer on every core.
func bandwidth(quick bool) float64 {
	n := 1 << 27 // 1 GiB of uint64
	if quick {
		n = 1 << 22
	}
	buf := make([]uint64, n)
	for i := range buf {
		buf[i] = uint64(i)
	}
	workers := runtime.GOMAXPROCS(0)
	best := 0.0
	var sink uint64
	for range 5 {
		start := time.Now()
		var wg sync.WaitGroup
		sums := make([]uint64, workers)
		per := n / workers
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var a, b, c, d uint64
				part := buf[w*per : (w+1)*per]
				for i := 0; i+4 <= len(part); i += 4 {
					a += part[i]
					b += part[i+1]
					c += part[i+2]
					d += part[i+3]
				}
				sums[w] = a + b + c + d
			}()
		}
		wg.Wait()
		for _, s := range sums {
			sink += s
		}
		best = max(best, float64(8*n)/time.Since(start).Seconds()/1e9)
	}
	runtime.KeepAlive(sink)
	return best
}

// unitVectors returns n random unit vectors of d.
func unitVectors(rng *rand.Rand, n, d int) []float32 {
	v := make([]float32, n*d)
	for i := 0; i < n; i++ {
		row := v[i*d : (i+1)*d]
		var s float64
		for k := range row {
			row[k] = float32(rng.NormFloat64())
			s += float64(row[k]) * float64(row[k])
		}
		inv := float32(1 / math.Sqrt(s))
		for k := range row {
			row[k] *= inv
		}
	}
	return v
}

// fixed returns embeddings of n items of k vectors each.
func fixed(vecs []float32, n, k, d int) *model.Embeddings {
	e := &model.Embeddings{Dim: d, Offsets: make([]int, n+1), Vecs: vecs, Pos: make([]int32, n*k), Global: make([]float32, n*d)}
	for i := 0; i <= n; i++ {
		e.Offsets[i] = i * k
	}
	for i := 0; i < n; i++ {
		g := e.Global[i*d : (i+1)*d]
		for j := 0; j < k; j++ {
			e.Pos[i*k+j] = int32(j)
			for x, v := range vecs[(i*k+j)*d : (i*k+j+1)*d] {
				g[x] += v
			}
		}
		normalize(g)
	}
	return e
}

func normalize(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(s))
	for i := range v {
		v[i] *= inv
	}
}

// stubModel is a small TERAN whose vectors are d wide: an index needs the
// model that made its vectors; these benchmarks make vectors directly.
func stubModel(d int) (model.Model, error) {
	cfg := model.Default()
	cfg.ImageModel = model.ImageConfig{Name: "bottomup", FeatDim: 16, TransformerLayers: 1, Heads: 1, FF: 16, Hidden: 16, PosEncoding: "concat-and-process"}
	cfg.TextModel = model.TextConfig{Name: "bert", WordDim: 16, ExtractionHiddenLayer: 1, FineTune: true, Heads: 1, FF: 16, MaxPositions: 64}
	cfg.Model = model.JointConfig{Name: "teran", EmbedSize: d, Layers: 1, Heads: 1, FF: 16}
	tok, err := text.NewWordPiece(text.NewVocab([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"}))
	if err != nil {
		return nil, err
	}
	return model.New(cfg, tok, 1)
}

// buildIndex writes images and captions (random ids) into a new index.
func buildIndex(dir string, m model.Model, imgs, caps *model.Embeddings) (*index.Index, error) {
	w, err := index.NewWriter(dir, m, index.Overwrite)
	if err != nil {
		return nil, err
	}
	defer w.Abort()
	const seg = 65536
	var imgRows []index.ImageRow
	for lo := 0; lo < imgs.Len(); lo += seg {
		hi := min(lo+seg, imgs.Len())
		rows := make([]index.ImageRow, hi-lo)
		for i := range rows {
			rows[i] = index.ImageRow{ID: fmt.Sprintf("img%07d", lo+i)}
		}
		imgRows = append(imgRows, rows...)
		if err := w.AddImages(context.Background(), imgs.Slice(lo, hi), rows); err != nil {
			return nil, err
		}
	}
	if caps != nil {
		for lo := 0; lo < caps.Len(); lo += seg {
			hi := min(lo+seg, caps.Len())
			rows := make([]index.CaptionRow, hi-lo)
			for i := range rows {
				rows[i] = index.CaptionRow{Text: "a", ImageID: imgRows[(lo+i)%len(imgRows)].ID}
			}
			if err := w.AddCaptions(context.Background(), caps.Slice(lo, hi), rows); err != nil {
				return nil, err
			}
		}
	}
	if err := w.Commit(context.Background()); err != nil {
		return nil, err
	}
	return index.Open(context.Background(), dir, &index.OpenOptions{SkipChecksums: true})
}

// timeSearch returns the median time of reps searches of q.
func timeSearch(ctx context.Context, ix *index.Index, q *model.Embeddings, text bool, o *index.SearchOptions, reps int) (float64, error) {
	if _, err := ix.Search(ctx, q, text, o); err != nil { // warm-up: pages in
		return 0, err
	}
	ts := make([]float64, reps)
	for i := range ts {
		start := time.Now()
		if _, err := ix.Search(ctx, q, text, o); err != nil {
			return 0, err
		}
		ts[i] = float64(time.Since(start).Microseconds()) / 1000
	}
	slices.Sort(ts)
	return ts[len(ts)/2], nil
}

// peerResult is what tools/peer_search.py prints.
type peerResult struct {
	Version string  `json:"version"`
	T2IMS   float64 `json:"t2i_ms"`
	I2TMS   float64 `json:"i2t_ms"`
}

// exhaustive times every scoring path on random vectors of the paper's
// sizes, and the PyTorch peer on the same shapes.
func exhaustive(ctx context.Context, opts bench.Options, p params, tmp string, bw float64) error {
	rng := rand.New(rand.NewPCG(1, 2))
	d := p.dim
	imgs := fixed(unitVectors(rng, p.images*p.regions, d), p.images, p.regions, d)
	caps := fixed(unitVectors(rng, p.captions*p.words, d), p.captions, p.words, d)
	m, err := stubModel(d)
	if err != nil {
		return err
	}
	ix, err := buildIndex(filepath.Join(tmp, "exhaustive"), m, imgs, caps)
	if err != nil {
		return err
	}
	defer ix.Close()
	textQ := fixed(unitVectors(rng, p.words, d), 1, p.words, d)
	imageQ := imgs.Slice(0, 1)

	var peer *peerResult
	peerNote := ""
	if opts.NoPeer {
		peerNote = "peer skipped (--no-peer)"
	} else {
		out, err := bench.RunPeer(ctx, opts, "peer_search.py", []string{"torch"},
			"--images", fmt.Sprint(p.images), "--captions", fmt.Sprint(p.captions), "--regions", fmt.Sprint(p.regions),
			"--words", fmt.Sprint(p.words), "--dim", fmt.Sprint(d), "--threads", fmt.Sprint(runtime.GOMAXPROCS(0)), "--reps", fmt.Sprint(p.reps))
		if err != nil {
			peerNote = "PyTorch peer skipped: " + err.Error()
		} else {
			var pr peerResult
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &pr); err != nil {
				return fmt.Errorf("search: peer printed %q: %w", out, err)
			}
			peer = &pr
		}
	}
	f32Img, f32Cap := float64(p.images*p.regions*d*4), float64(p.captions*p.words*d*4)
	i8Img, i8Cap := float64(p.images*p.regions*(d+4)), float64(p.captions*p.words*(d+4))
	pqVec, pqBook := index.PQBytes(d)
	pqImg, pqCap := float64(p.images*p.regions*pqVec), float64(p.captions*p.words*pqVec)
	shape := fmt.Sprintf("%d-word query vs %d images x %d regions, d=%d", p.words, p.images, p.regions, d)
	shapeI := fmt.Sprintf("%d-region image vs %d captions x %d words, d=%d", p.regions, p.captions, p.words, d)
	cases := []struct {
		name     string
		text     bool
		o        *index.SearchOptions
		bytes    float64
		shape    string
		peerMS   func(*peerResult) float64
		withRate bool
	}{
		{"search/t2i float32", true, &index.SearchOptions{Exact: true, Candidates: -1}, f32Img, shape, func(r *peerResult) float64 { return r.T2IMS }, true},
		{"search/i2t float32", false, &index.SearchOptions{Exact: true, Candidates: -1}, f32Cap, shapeI, func(r *peerResult) float64 { return r.I2TMS }, true},
		{"search/t2i int8", true, &index.SearchOptions{Int8: true, Rerank: -1, Candidates: -1}, i8Img, shape, func(r *peerResult) float64 { return r.T2IMS }, true},
		{"search/i2t int8", false, &index.SearchOptions{Int8: true, Rerank: -1, Candidates: -1}, i8Cap, shapeI, func(r *peerResult) float64 { return r.I2TMS }, true},
		{"search/t2i int8+rerank100", true, &index.SearchOptions{Int8: true, Candidates: -1}, i8Img, shape, func(r *peerResult) float64 { return r.T2IMS }, false},
		{"search/i2t int8+rerank100", false, &index.SearchOptions{Int8: true, Candidates: -1}, i8Cap, shapeI, func(r *peerResult) float64 { return r.I2TMS }, false},
		{"search/t2i pq4", true, &index.SearchOptions{Rerank: -1, Candidates: -1}, pqImg, shape, func(r *peerResult) float64 { return r.T2IMS }, false},
		{"search/i2t pq4", false, &index.SearchOptions{Rerank: -1, Candidates: -1}, pqCap, shapeI, func(r *peerResult) float64 { return r.I2TMS }, false},
		{"search/t2i pq4+rerank", true, &index.SearchOptions{Candidates: -1}, pqImg, shape, func(r *peerResult) float64 { return r.T2IMS }, false},
		{"search/i2t pq4+rerank", false, &index.SearchOptions{Candidates: -1}, pqCap, shapeI, func(r *peerResult) float64 { return r.I2TMS }, false},
	}
	f32MS := map[bool]float64{} // float32's latency by direction (text query or not)
	for _, c := range cases {
		q := imageQ
		if c.text {
			q = textQ
		}
		ms, err := timeSearch(ctx, ix, q, c.text, c.o, p.reps)
		if err != nil {
			return err
		}
		r := bench.Result{Name: c.name, Metric: "latency", Value: ms, Unit: "ms/query", Note: c.shape + ", top 10, median of " + fmt.Sprint(p.reps)}
		switch {
		case c.o.Exact:
			r.Note += ", " + index.FloatKernel() + " kernel"
			f32MS[c.text] = ms
		case c.o.Int8:
			r.Note += ", " + index.Int8Kernel() + " int8 kernel"
		}
		if peer != nil {
			r = r.WithPeer("pytorch-"+peer.Version+" float32", c.peerMS(peer), false)
		} else {
			r.Note += "; " + peerNote
		}
		opts.Emit(r)
		if c.o.Int8 && c.o.Rerank < 0 && f32MS[c.text] > 0 {
			// int8 codes alone against exhaustive float32, both timed above.
			opts.Emit(bench.Result{Name: c.name, Metric: "speed vs float32", Value: f32MS[c.text] / ms, Unit: "x",
				Note: fmt.Sprintf("float32 %.1f ms (%s kernel) / int8 %.1f ms (%s kernel)", f32MS[c.text], index.FloatKernel(), ms, index.Int8Kernel())})
		}
		if c.withRate {
			gbs := c.bytes / (ms / 1000) / 1e9
			opts.Emit(bench.Result{Name: c.name, Metric: "effective read rate", Value: gbs, Unit: "GB/s",
				Note: fmt.Sprintf("%.0f MB of vectors per query; %.0f%% of the measured %.1f GB/s", c.bytes/1e6, 100*gbs/bw, bw)})
		}
	}
	opts.Emit(bench.Result{Name: "search/int8", Metric: "bytes per image", Value: float64(p.regions * (d + 4)), Unit: "B",
		Note: fmt.Sprintf("%d regions x (%d codes + a float32 scale); float32: %d B (%.3f of it)", p.regions, d, p.regions*d*4, float64(d+4)/float64(4*d))})
	pqPer := float64(p.regions*pqVec) + float64(pqBook)/float64(p.images)
	opts.Emit(bench.Result{Name: "search/pq4", Metric: "bytes per image", Value: pqPer, Unit: "B",
		Note: fmt.Sprintf("%d regions x %d B of 4-bit codes + the segment's %d-B codebook shared by %d images; float32: %d B (%.3f of it)",
			p.regions, pqVec, pqBook, p.images, p.regions*d*4, pqPer/float64(p.regions*d*4))})
	// The paper's GPU figures: 1K images per text query, 5K captions per
	// image query.
	small := min(1000, p.images)
	smallCap := min(5000, p.captions)
	ix2, err := buildIndex(filepath.Join(tmp, "paper"), m, imgs.Slice(0, small), caps.Slice(0, smallCap))
	if err != nil {
		return err
	}
	defer ix2.Close()
	for _, c := range []struct {
		name  string
		text  bool
		q     *model.Embeddings
		paper float64
	}{{fmt.Sprintf("search/t2i %d images", small), true, textQ, 20}, {fmt.Sprintf("search/i2t %d captions", smallCap), false, imageQ, 120}} {
		for _, o := range []struct {
			label string
			o     *index.SearchOptions
		}{{"float32", &index.SearchOptions{Exact: true}}, {"int8+rerank100", &index.SearchOptions{Int8: true}}, {"pq4+rerank", &index.SearchOptions{}}} {
			ms, err := timeSearch(ctx, ix2, c.q, c.text, o.o, p.reps)
			if err != nil {
				return err
			}
			opts.Emit(bench.Result{Name: c.name + " " + o.label, Metric: "latency", Value: ms, Unit: "ms/query",
				Note: fmt.Sprintf("TERAN paper: %.0f ms on a GTX 1080 Ti", c.paper)}.WithPeer("TERAN paper (GPU)", c.paper, false))
		}
	}
	return nil
}

// recallCost indexes a world's test split with a trained model and
// evaluates text-to-image and image-to-text R@1/5/10 through the index:
// exhaustive float32, int8 and 4-bit PQ codes, each alone and with
// float32 re-ranking.
func recallCost(ctx context.Context, opts bench.Options, p params, tmp string) error {
	m, f, err := model.Load(p.checkpoint)
	if err != nil {
		return err
	}
	f.Close()
	s, err := data.LoadPrecomp(ctx, p.world, p.split, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	c := index.Collection{Images: s.Images}
	for i := 0; i < s.NumImages(); i++ {
		c.ImageRows = append(c.ImageRows, index.ImageRow{ID: s.ID(i)})
		for _, cp := range s.CaptionsOf(i) {
			c.Captions = append(c.Captions, index.CaptionRow{Text: cp, ImageID: s.ID(i)})
		}
	}
	// The same collection twice: with float32 vectors, and compressed.
	var ixs [2]*index.Index
	for k, l := range []index.Layout{index.LayoutFloat32, index.LayoutCompressed} {
		dir := filepath.Join(tmp, fmt.Sprintf("world-%d", k))
		if _, err := index.Build(ctx, dir, m, c, &index.BuildOptions{Mode: index.Overwrite, Layout: l, Dsub: p.dsub, Coder: p.coder}); err != nil {
			return err
		}
		if ixs[k], err = index.Open(ctx, dir, nil); err != nil {
			return err
		}
		defer ixs[k].Close()
	}
	imgEmb, err := model.EncodeImages(ctx, m, s.Images, nil)
	if err != nil {
		return err
	}
	// The exhaustive float32 top 10 of every query, which the compressed
	// searches are held to.
	var exactT2I, exactI2T [][]int
	for _, v := range []struct {
		label      string
		compressed bool
		o          index.SearchOptions
		pruned     bool // searched through candidates, 10% of the items (stages 1-3 of the compressed search choose them)
	}{{"float32", false, index.SearchOptions{Exact: true}, false}, {"int8", false, index.SearchOptions{Int8: true, Rerank: -1}, false}, {"int8+rerank100", false, index.SearchOptions{Int8: true}, false},
		{"pq4", false, index.SearchOptions{Rerank: -1}, false}, {"pq4+rerank", false, index.SearchOptions{}, false},
		{"compressed", true, index.SearchOptions{}, false}, {"compressed, no re-ranking", true, index.SearchOptions{Rerank: -1}, false},
		{"compressed, pruned to 10%", true, index.SearchOptions{}, true}} {
		ix := ixs[0]
		if v.compressed {
			ix = ixs[1]
		}
		o := v.o
		o.K, o.Candidates = 10, -1
		var t2i, i2t [3]float64
		var agree, total float64
		overlap := func(res []index.Result, want []int) {
			for _, r := range res {
				if slices.Contains(want, r.Item) {
					agree++
				}
			}
			total += float64(len(want))
		}
		if v.pruned {
			o.Candidates = max(10, s.NumImages()/10)
		}
		for cIdx, cp := range s.Captions {
			res, err := ix.SearchText(ctx, cp, &o)
			if err != nil {
				return err
			}
			addRecall(&t2i, res, func(r index.Result) bool { return r.Item == s.ImageOf(cIdx) })
			if v.label == "float32" {
				exactT2I = append(exactT2I, items(res))
			} else {
				overlap(res, exactT2I[cIdx])
			}
		}
		if v.pruned {
			o.Candidates = max(10, s.NumCaptions()/10)
		}
		for i := 0; i < s.NumImages(); i++ {
			res, err := ix.Search(ctx, imgEmb.Slice(i, i+1), false, &o)
			if err != nil {
				return err
			}
			addRecall(&i2t, res, func(r index.Result) bool { return s.ImageOf(r.Item) == i })
			if v.label == "float32" {
				exactI2T = append(exactI2T, items(res))
			} else {
				overlap(res, exactI2T[i])
			}
		}
		nc, ni := float64(s.NumCaptions()), float64(s.NumImages())
		note := fmt.Sprintf("%s %s split, %d images, model %s", p.world, p.split, s.NumImages(), m.Name())
		for k, at := range []int{1, 5, 10} {
			opts.Emit(bench.Result{Name: "search/recall " + v.label, Metric: fmt.Sprintf("t2i R@%d", at), Value: 100 * t2i[k] / nc, Unit: "%", Note: note})
		}
		for k, at := range []int{1, 5, 10} {
			opts.Emit(bench.Result{Name: "search/recall " + v.label, Metric: fmt.Sprintf("i2t R@%d", at), Value: 100 * i2t[k] / ni, Unit: "%", Note: note})
		}
		if total > 0 {
			opts.Emit(bench.Result{Name: "search/recall " + v.label, Metric: "recall@10", Value: agree / total, Unit: "",
				Note: note + "; of every query's (captions' and images') exhaustive float32 top 10"})
		}
	}
	if ci, cc := ixs[1].Compressed(); ci && cc {
		fb, cb := DirSize(filepath.Join(tmp, "world-0")), DirSize(filepath.Join(tmp, "world-1"))
		opts.Emit(bench.Result{Name: "search/recall compressed", Metric: "index size", Value: float64(cb) / float64(fb), Unit: "x float32 layout",
			Note: fmt.Sprintf("%d against %d bytes, the whole index directories", cb, fb)})
	}
	return nil
}

// items returns the item numbers of results.
func items(res []index.Result) []int {
	out := make([]int, len(res))
	for i, r := range res {
		out[i] = r.Item
	}
	return out
}

// addRecall adds the hits at 1, 5 and 10 of one query.
func addRecall(acc *[3]float64, res []index.Result, relevant func(index.Result) bool) {
	for k, r := range res {
		if relevant(r) {
			for j, at := range []int{1, 5, 10} {
				if k < at {
					acc[j]++
				}
			}
			return
		}
	}
}

// scaleRun builds an index of p.scale generated images (clustered the way
// real encodings are: each image shows a few objects, each object's
// regions lie near the object's direction), and with captions= that many
// captions of each, and measures the build, the memory a search keeps,
// and each search configuration's latency (median and 99th percentile)
// and recall@10 against exhaustive float32 scoring, for text queries and,
// with captions, image queries. The exhaustive top 10 of every query is
// computed while the index is built, batch by batch in memory
// (model.ScoreMatrix), since at a million images the float32 vectors
// outgrow the page cache.
func scaleRun(ctx context.Context, opts bench.Options, p params, tmp string) error {
	d, n := p.scaleDim, p.scale
	m, err := stubModel(d)
	if err != nil {
		return err
	}
	w := newWorldGenObjects(d, 7, p.objects)
	// Text queries: the objects of random images, plus function words;
	// image queries: other images of the world.
	rng := rand.New(rand.NewPCG(11, 12))
	var queries, imageQueries []*model.Embeddings
	var sources []int // the image each text query describes
	for range p.queries {
		t := rng.IntN(n)
		sources = append(sources, t)
		queries = append(queries, w.query(t, p.words, rng))
	}
	if p.scaleCaptions > 0 {
		for range p.queries {
			t := n + rng.IntN(n) // an image beyond the collection
			imageQueries = append(imageQueries, w.images(t, t+1, p.regions))
		}
	}
	dir := filepath.Join(tmp, "scale")
	truthFile := filepath.Join(dir, "truth.json")
	note := fmt.Sprintf("%d images x %d regions, d=%d, generated", n, p.regions, d)
	if p.scaleCaptions > 0 {
		note += fmt.Sprintf(", %d captions of %d words an image", p.scaleCaptions, p.words)
	}
	// What the truth was computed for: reuse=1 needs the same.
	type truthKey struct{ Images, Dim, Regions, Words, Queries, Objects, Captions int }
	type truthRecord struct {
		Key        truthKey
		Top10      [][]int
		ImageTop10 [][]int `json:",omitempty"`
	}
	key := truthKey{Images: n, Dim: d, Regions: p.regions, Words: p.words, Queries: len(queries), Objects: p.objects, Captions: p.scaleCaptions}
	var truth, imageTruth [][]int
	if p.reuse {
		var rec truthRecord
		b, err := infile.ReadFile(truthFile)
		if err == nil {
			err = json.Unmarshal(b, &rec)
		}
		if err != nil {
			return fmt.Errorf("search: reuse=1: %w (build it first with the same scale and dir)", err)
		}
		if rec.Key != key {
			return fmt.Errorf("search: reuse=1: %s was built for %+v, not %+v", truthFile, rec.Key, key)
		}
		truth, imageTruth = rec.Top10, rec.ImageTop10
	} else {
		var err error
		if truth, imageTruth, err = buildScale(ctx, opts, p, w, m, queries, imageQueries, dir, note); err != nil {
			return err
		}
		b, err := json.Marshal(truthRecord{Key: key, Top10: truth, ImageTop10: imageTruth})
		if err != nil {
			return err
		}
		if err := atomicfile.WriteBytes(truthFile, b); err != nil {
			return err
		}
	}
	st := time.Now()
	ix, err := index.Open(ctx, dir, &index.OpenOptions{SkipChecksums: true, Preload: true})
	if err != nil {
		return err
	}
	defer ix.Close()
	opts.Emit(bench.Result{Name: "search/scale open", Metric: "time", Value: time.Since(st).Seconds(), Unit: "s", Note: note + "; checksums skipped, what searches keep in memory read into the page cache"})
	resImg, resCap := ix.Resident()
	ci, cc := ix.Compressed()
	layout := map[bool]string{true: "compressed", false: "float32 vectors kept"}
	opts.Emit(bench.Result{Name: "search/scale images", Metric: "memory per image", Value: float64(resImg) / float64(n), Unit: "B",
		Note: note + "; " + layout[ci] + "; the images' segments' parts a search keeps in memory (index.Index.Resident)"})
	if p.scaleCaptions > 0 {
		opts.Emit(bench.Result{Name: "search/scale captions", Metric: "memory per image", Value: float64(resCap) / float64(n), Unit: "B",
			Note: note + "; " + layout[cc] + "; the captions' segments' parts a search keeps in memory, per image"})
	}
	// The index's own exhaustive float32 search must agree with the truth
	// computed in memory (the same scores, read from the segments); timed
	// on a few queries, since each reads every float32 vector. A
	// compressed index has no float32 vectors.
	exactQueries := queries[:min(3, len(queries))]
	if p.reuse || ci {
		exactQueries = nil // measured when it was built; reading every float32 vector would empty the page cache
	}
	exactMS, agree, err := Measure(exactQueries, truth, func(q *model.Embeddings) ([]index.Result, error) {
		return ix.Search(ctx, q, true, &index.SearchOptions{K: 10, Exact: true, Candidates: -1})
	})
	if err != nil {
		return err
	}
	if len(exactMS) > 0 {
		opts.Emit(bench.Result{Name: "search/scale exhaustive float32", Metric: "latency", Value: bench.Median(exactMS), Unit: "ms/query", Note: note + fmt.Sprintf("; median of %d queries, reading every float32 vector", len(exactMS))})
		opts.Emit(bench.Result{Name: "search/scale exhaustive float32", Metric: "agreement", Value: agree, Unit: "", Note: "top 10 of the index's exhaustive search against the in-memory truth"})
	}
	type config struct {
		name string
		o    index.SearchOptions
	}
	var configs []config
	if len(p.candidates) == 0 {
		configs = append(configs, config{"default", index.SearchOptions{K: 10, Rerank: p.rerank}})
	}
	for _, c := range p.candidates {
		probes := p.probes
		if len(probes) == 0 {
			probes = []int{0}
		}
		for _, pr := range probes {
			name := fmt.Sprintf("pruned %d candidates %d probes", c, max(pr, index.AutoProbes))
			configs = append(configs, config{name, index.SearchOptions{K: 10, Candidates: c, Probes: pr, Rerank: p.rerank}})
		}
	}
	// Warm the pages every search reads (centroids, lists, codes) with
	// other queries than the timed ones.
	for range p.queries {
		q := w.query(rng.IntN(n), p.words, rng)
		if _, err := ix.Search(ctx, q, true, &configs[len(configs)-1].o); err != nil {
			return err
		}
	}
	sides := []struct {
		what    string
		text    bool
		queries []*model.Embeddings
		truth   [][]int
	}{{"text", true, queries, truth}}
	if len(imageQueries) > 0 {
		sides = append(sides, struct {
			what    string
			text    bool
			queries []*model.Embeddings
			truth   [][]int
		}{"image", false, imageQueries, imageTruth})
	}
	// The generator's ground truth: how often a text query's top 10 holds
	// the image it was made from, exhaustive float32 and each search.
	sourceRecall := func(res func(i int) []int) float64 {
		var hit float64
		for i, t := range sources {
			if slices.Contains(res(i), t) {
				hit++
			}
		}
		return hit / float64(max(len(sources), 1))
	}
	opts.Emit(bench.Result{Name: "search/scale exhaustive float32", Metric: "source recall@10", Value: sourceRecall(func(i int) []int { return truth[i] }), Unit: "",
		Note: "share of text queries whose exhaustive top 10 holds the image the query was generated from"})
	for _, side := range sides {
		for _, c := range configs {
			var ms []float64
			var recall float64
			got := make([][]int, len(side.queries))
			for range p.passes {
				k := 0
				t, r, err := Measure(side.queries, side.truth, func(q *model.Embeddings) ([]index.Result, error) {
					res, err := ix.Search(ctx, q, side.text, &c.o)
					got[k] = items(res)
					k++
					return res, err
				})
				if err != nil {
					return err
				}
				ms, recall = append(ms, t...), r
			}
			name := fmt.Sprintf("search/scale %s %s", c.name, side.what)
			qn := fmt.Sprintf("%d text queries of %d words", len(side.queries), p.words)
			if !side.text {
				qn = fmt.Sprintf("%d image queries of %d regions", len(side.queries), p.regions)
			}
			qn += fmt.Sprintf(", %d passes", p.passes)
			opts.Emit(bench.Result{Name: name, Metric: "latency", Value: bench.Median(ms), Unit: "ms/query", Note: note + "; median of " + qn})
			opts.Emit(bench.Result{Name: name, Metric: "latency p99", Value: bench.Percentile(ms, 0.99), Unit: "ms/query", Note: note + "; " + qn})
			if first := len(side.queries); p.passes > 1 && first > 0 {
				// On an index larger than the page cache the first pass
				// reads the queries' codes from disk (unless an earlier
				// configuration did), the later ones from memory.
				opts.Emit(bench.Result{Name: name, Metric: "latency first pass", Value: bench.Median(ms[:first]), Unit: "ms/query",
					Note: note + fmt.Sprintf("; median of the first pass's %d queries", first)})
				opts.Emit(bench.Result{Name: name, Metric: "latency later passes", Value: bench.Median(ms[first:]), Unit: "ms/query",
					Note: note + fmt.Sprintf("; median of passes 2-%d", p.passes)})
			}
			opts.Emit(bench.Result{Name: name, Metric: "recall@10", Value: recall, Unit: "", Note: "against exhaustive float32 scoring"})
			if side.text {
				opts.Emit(bench.Result{Name: name, Metric: "source recall@10", Value: sourceRecall(func(i int) []int { return got[i] }), Unit: "",
					Note: "share of text queries whose top 10 holds the image the query was generated from"})
			}
		}
	}
	// Latency over many queries, each searched once: on an index larger
	// than the page cache, what a query's candidates read is mostly not
	// cached, as for a service's queries; a percentile of the timed
	// queries above, repeated passes of 20, says little.
	for _, c := range configs {
		if p.fresh == 0 {
			break
		}
		var ms []float64
		for range p.fresh {
			q := w.query(rng.IntN(n), p.words, rng)
			st := time.Now()
			if _, err := ix.Search(ctx, q, true, &c.o); err != nil {
				return err
			}
			ms = append(ms, float64(time.Since(st).Microseconds())/1000)
		}
		name, qn := fmt.Sprintf("search/scale %s text", c.name), fmt.Sprintf("%d other text queries of %d words, each searched once", p.fresh, p.words)
		opts.Emit(bench.Result{Name: name, Metric: "latency fresh queries", Value: bench.Median(ms), Unit: "ms/query", Note: note + "; median of " + qn})
		opts.Emit(bench.Result{Name: name, Metric: "latency fresh queries p99", Value: bench.Percentile(ms, 0.99), Unit: "ms/query", Note: note + "; " + qn})
	}
	return nil
}

// Measure runs search on each query in turn and returns the times it took
// (ms) and its recall: the share of each query's want (its true top items)
// found among its results, over all queries (0 for none).
func Measure(queries []*model.Embeddings, want [][]int, search func(q *model.Embeddings) ([]index.Result, error)) (ms []float64, recall float64, err error) {
	var hit, tot float64
	for i, q := range queries {
		st := time.Now()
		res, err := search(q)
		if err != nil {
			return nil, 0, err
		}
		ms = append(ms, float64(time.Since(st).Microseconds())/1000)
		for _, r := range res {
			if slices.Contains(want[i], r.Item) {
				hit++
			}
		}
		tot += float64(len(want[i]))
	}
	if tot > 0 {
		recall = hit / tot
	}
	return ms, recall, nil
}

// buildScale writes the scale run's index in dir (with m; nil m: no index,
// the truth alone) and returns each text query's exhaustive top 10
// images and each image query's top 10 captions, computed batch by batch
// in memory.
func buildScale(ctx context.Context, opts bench.Options, p params, w *worldGen, m model.Model, queries, imageQueries []*model.Embeddings, dir, note string) ([][]int, [][]int, error) {
	n := p.scale
	qs := &model.Embeddings{}
	for _, q := range queries {
		if err := qs.Append(q); err != nil {
			return nil, nil, err
		}
	}
	iqs := &model.Embeddings{}
	for _, q := range imageQueries {
		if err := iqs.Append(q); err != nil {
			return nil, nil, err
		}
	}
	best := make([][]model.Hit, len(queries))         // each text query's exhaustive top 10 so far
	capBest := make([][]model.Hit, len(imageQueries)) // each image query's
	start := time.Now()
	var excluded time.Duration // generating vectors and the truth: not the build
	var wr *index.Writer
	if m != nil {
		var err error
		if wr, err = index.NewWriter(dir, m, index.Overwrite); err != nil {
			return nil, nil, err
		}
		defer wr.Abort()
		if err := wr.SetLayout(index.LayoutOptions{Layout: p.layout, Images: n, Captions: n * p.scaleCaptions, Dsub: p.dsub, Coder: p.coder}); err != nil {
			return nil, nil, err
		}
	}
	// Batches (and segments) of 2.4 GB of generated float32 vectors at 36
	// regions: 65,536 images at d = 256, 16,384 at d = 1024.
	seg := max(1024, 65536*256*36/(max(w.d, 256)*p.regions))
	bar := progress.New("build", int64(n), "images")
	addCaptions := func(lo, hi int) error {
		st := time.Now()
		e, rows := w.captions(lo, hi, p.scaleCaptions, p.words)
		excluded += time.Since(st)
		if wr != nil {
			if err := wr.AddCaptions(ctx, e, rows); err != nil {
				return err
			}
		}
		st = time.Now()
		if err := keepTop(ctx, capBest, iqs, e, lo*p.scaleCaptions, false); err != nil {
			return err
		}
		excluded += time.Since(st)
		return nil
	}
	for lo := 0; lo < n; lo += seg {
		hi := min(lo+seg, n)
		st := time.Now()
		e := w.images(lo, hi, p.regions)
		rows := make([]index.ImageRow, hi-lo)
		for i := range rows {
			rows[i] = index.ImageRow{ID: fmt.Sprintf("img%08d", lo+i)}
		}
		excluded += time.Since(st)
		if wr != nil {
			if err := wr.AddImages(ctx, e, rows); err != nil {
				return nil, nil, err
			}
		}
		st = time.Now()
		if err := keepTop(ctx, best, qs, e, lo, true); err != nil {
			return nil, nil, err
		}
		excluded += time.Since(st)
		bar.Add(int64(hi - lo))
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
	}
	// Captions after the images (a caption's image must be indexed
	// first), in runs of about one segment.
	if p.scaleCaptions > 0 {
		step := max(1, seg/p.scaleCaptions)
		for lo := 0; lo < n; lo += step {
			if err := addCaptions(lo, min(lo+step, n)); err != nil {
				return nil, nil, err
			}
		}
	}
	bar.Finish()
	if wr == nil {
		return truthOf(best), truthOf(capBest), nil
	}
	if err := wr.Commit(ctx); err != nil {
		return nil, nil, err
	}
	build := time.Since(start) - excluded
	size := DirSize(dir)
	what := "images"
	if p.scaleCaptions > 0 {
		what = "images and their captions"
	}
	opts.Emit(bench.Result{Name: "search/scale build", Metric: "throughput", Value: float64(n) / build.Seconds(), Unit: "images/s",
		Note: note + "; " + what + ": inverted file, codes, write, catalogue (generating the vectors, which stands for encoding, and the truth excluded)"})
	opts.Emit(bench.Result{Name: "search/scale build", Metric: "index size", Value: float64(size) / 1e9, Unit: "GB", Note: note})
	opts.Emit(bench.Result{Name: "search/scale build", Metric: "bytes per image", Value: float64(size) / float64(n), Unit: "B", Note: note + "; the whole index directory"})
	return truthOf(best), truthOf(capBest), nil
}

// keepTop merges into best (one list per query of qs) the top 10 of the
// items of e, numbered from first: e's items are images and the queries
// captions when itemsAreImages, the other way round otherwise.
func keepTop(ctx context.Context, best [][]model.Hit, qs, e *model.Embeddings, first int, itemsAreImages bool) error {
	if len(best) == 0 {
		return nil
	}
	var sc []float32
	var err error
	nq := qs.Len()
	if itemsAreImages {
		sc, err = model.ScoreMatrix(ctx, e, qs, model.MrSw) // items x queries
	} else {
		var t []float32
		t, err = model.ScoreMatrix(ctx, qs, e, model.MrSw) // queries x items
		sc = make([]float32, len(t))
		for q := 0; q < nq; q++ {
			for i := 0; i < e.Len(); i++ {
				sc[i*nq+q] = t[q*e.Len()+i]
			}
		}
	}
	if err != nil {
		return err
	}
	for qi := range best {
		col := make([]float32, e.Len())
		for i := range col {
			col[i] = sc[i*nq+qi]
		}
		for _, h := range model.TopK(col, 10) {
			best[qi] = append(best[qi], model.Hit{Index: first + h.Index, Score: h.Score})
		}
		all := make([]float32, len(best[qi]))
		for i, h := range best[qi] {
			all[i] = h.Score
		}
		var keep []model.Hit
		for _, h := range model.TopK(all, 10) {
			keep = append(keep, best[qi][h.Index])
		}
		best[qi] = keep
	}
	return nil
}

// truthOf returns the item numbers of each query's hits.
func truthOf(best [][]model.Hit) [][]int {
	truth := make([][]int, len(best))
	for i, b := range best {
		for _, h := range b {
			truth[i] = append(truth[i], h.Index)
		}
	}
	return truth
}

// DirSize returns the bytes of the files directly in dir (0 for none):
// an index directory's size on disk.
func DirSize(dir string) int64 {
	var n int64
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if info, err := e.Info(); err == nil {
			n += info.Size()
		}
	}
	return n
}

// worldGen generates region and word vectors clustered as real encodings
// are: a vocabulary of object directions; an image shows 2-5 objects, each
// seen by several regions near its direction, the other regions
// background; a caption names the objects of its image (near their
// directions), and its other words, contextualised as a transformer's
// outputs are, lean towards the objects of their caption.
type worldGen struct {
	d       int
	seed    uint64
	objects [][]float32
}

// worldObjects is the generator's default number of object directions.
const worldObjects = 4096

func newWorldGen(d int, seed uint64) *worldGen { return newWorldGenObjects(d, seed, worldObjects) }

// newWorldGenObjects is newWorldGen with k object directions: fewer make
// more images share each object, as a small collection of one domain
// does.
func newWorldGenObjects(d int, seed uint64, k int) *worldGen {
	rng := rand.New(rand.NewPCG(seed, 1))
	w := &worldGen{d: d, seed: seed}
	for range k {
		w.objects = append(w.objects, unitVectors(rng, 1, d))
	}
	return w
}

// objectsOf returns the objects image i shows (deterministic).
func (w *worldGen) objectsOf(i int) []int {
	rng := rand.New(rand.NewPCG(w.seed, uint64(i)+100))
	k := 2 + rng.IntN(4)
	out := make([]int, k)
	for j := range out {
		out[j] = rng.IntN(len(w.objects))
	}
	return out
}

// near returns a unit vector at about cosine c from dir.
func near(rng *rand.Rand, dir []float32, c float64) []float32 {
	d := len(dir)
	v := make([]float32, d)
	noise := math.Sqrt(1-c*c) / math.Sqrt(float64(d))
	for k := range v {
		v[k] = float32(c)*dir[k] + float32(noise*rng.NormFloat64())
	}
	normalize(v)
	return v
}

// images generates images lo..hi-1 of r regions each, in parallel.
func (w *worldGen) images(lo, hi, r int) *model.Embeddings {
	n, d := hi-lo, w.d
	vecs := make([]float32, n*r*d)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for t := 0; t < workers; t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := t; i < n; i += workers {
				rng := rand.New(rand.NewPCG(w.seed, uint64(lo+i)+1<<40))
				objs := w.objectsOf(lo + i)
				for j := 0; j < r; j++ {
					var v []float32
					if j < 6*len(objs) {
						v = near(rng, w.objects[objs[j%len(objs)]], 0.6+0.3*rng.Float64())
					} else {
						v = unitVectors(rng, 1, d)
					}
					copy(vecs[(i*r+j)*d:], v)
				}
			}
		}()
	}
	wg.Wait()
	return fixed(vecs, n, r, d)
}

// query generates a caption of image t: its objects' words, then other
// words (articles, verbs, relations), each near one of the caption's
// objects at a low cosine, words in all. (An earlier version put every
// function word near one shared direction; the MrSw score of a 12-word
// query was then decided by which image happened to hold the background
// region closest to that direction, not by its objects: the exhaustive
// top 10 held mostly images that shared no object with the query, which
// no trained model does.)
func (w *worldGen) query(t, words int, rng *rand.Rand) *model.Embeddings {
	objs := w.objectsOf(t)
	var vecs []float32
	for k := 0; k < words; k++ {
		if k < len(objs) {
			vecs = append(vecs, near(rng, w.objects[objs[k]], 0.7)...)
		} else {
			vecs = append(vecs, near(rng, w.objects[objs[rng.IntN(len(objs))]], 0.35)...)
		}
	}
	return fixed(vecs, 1, words, w.d)
}

// captions generates k captions of words words for each of images lo..hi-1
// (deterministic by image), with their catalogue rows.
func (w *worldGen) captions(lo, hi, k, words int) (*model.Embeddings, []index.CaptionRow) {
	n := (hi - lo) * k
	vecs := make([]float32, 0, n*words*w.d)
	rows := make([]index.CaptionRow, 0, n)
	for t := lo; t < hi; t++ {
		rng := rand.New(rand.NewPCG(w.seed, uint64(t)+1<<41))
		for j := range k {
			vecs = append(vecs, w.query(t, words, rng).Vecs...)
			rows = append(rows, index.CaptionRow{Text: fmt.Sprintf("caption %d of image %d", j, t), ImageID: fmt.Sprintf("img%08d", t)})
		}
	}
	return fixed(vecs, n, words, w.d), rows
}

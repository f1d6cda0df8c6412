package index

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/model"
)

// clusteredItems returns n items of k vectors each, at dimension d: each item
// shows 2 of the objects (random unit directions), each seen by k/4
// vectors near it; the other vectors are random. It also returns the
// objects of each item.
func clusteredItems(rng *rand.Rand, n, k, d int, objects [][]float32) (*model.Embeddings, [][]int) {
	e := &model.Embeddings{Dim: d, Offsets: []int{0}}
	var objs [][]int
	for i := 0; i < n; i++ {
		o := []int{rng.IntN(len(objects)), rng.IntN(len(objects))}
		objs = append(objs, o)
		for j := 0; j < k; j++ {
			var v []float32
			if j < k/2 {
				v = nearUnit(rng, objects[o[j%2]], 0.6+0.3*rng.Float64())
			} else {
				v = nearUnit(rng, randomUnit(rng, d), 1)
			}
			e.Vecs = append(e.Vecs, v...)
			e.Pos = append(e.Pos, int32(j))
		}
		e.Offsets = append(e.Offsets, len(e.Pos))
	}
	e.Global = make([]float32, n*d)
	for i := 0; i < n; i++ {
		g := e.Global[i*d : (i+1)*d]
		for r := e.Offsets[i]; r < e.Offsets[i+1]; r++ {
			for x := 0; x < d; x++ {
				g[x] += e.Vecs[r*d+x]
			}
		}
		normalizeUnit(g)
	}
	return e, objs
}

// randomObjects returns k random unit directions of d: the objects
// clusteredItems draws vectors near.
func randomObjects(rng *rand.Rand, k, d int) [][]float32 {
	out := make([][]float32, k)
	for i := range out {
		out[i] = randomUnit(rng, d)
	}
	return out
}

// randomUnit returns a random unit vector of d.
func randomUnit(rng *rand.Rand, d int) []float32 {
	v := make([]float32, d)
	for k := range v {
		v[k] = float32(rng.NormFloat64())
	}
	normalizeUnit(v)
	return v
}

// nearUnit returns a unit vector at about cosine c from dir.
func nearUnit(rng *rand.Rand, dir []float32, c float64) []float32 {
	n := randomUnit(rng, len(dir))
	v := make([]float32, len(dir))
	for k := range v {
		v[k] = float32(c)*dir[k] + float32(math.Sqrt(1-c*c))*n[k]
	}
	normalizeUnit(v)
	return v
}

// queryNear returns n query vectors (n x d, concatenated), each at cosine
// 0.7 from a random one of objects.
func queryNear(rng *rand.Rand, objects [][]float32, n int) []float32 {
	var q []float32
	for range n {
		q = append(q, nearUnit(rng, objects[rng.IntN(len(objects))], 0.7)...)
	}
	return q
}

func normalizeUnit(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return
	}
	for k := range v {
		v[k] /= float32(math.Sqrt(s))
	}
}

func TestIVFCells(t *testing.T) {
	for _, c := range []struct{ n, want int }{{0, 1}, {1, 1}, {2, 2}, {100, 32}, {10_000, 256}, {180_000, 1024}, {2_359_296, 4096}, {1 << 30, 8192}} {
		if got := ivfCells(c.n); got != c.want {
			t.Errorf("ivfCells(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

func TestTopIndices(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for range 100 {
		x := make([]float32, 1+rng.IntN(80))
		for i := range x {
			x[i] = float32(rng.IntN(1000))
		}
		m := 1 + rng.IntN(len(x))
		got := topIndices(x, make([]int, m))
		var vals, want []float32
		for _, i := range got {
			vals = append(vals, x[i])
		}
		for _, h := range model.TopK(x, m) {
			want = append(want, h.Score)
		}
		slices.Sort(vals)
		slices.Sort(want)
		if !slices.Equal(vals, want) {
			t.Fatalf("top %d of %v: %v, want the values %v", m, x, vals, want)
		}
	}
}

// TestQuantizerAssign checks the grouped assignment against the exact best
// cell: with few groups it is exact; with many it finds the best cell of
// nearly every vector that lies near an object.
func TestQuantizerAssign(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	const d = 32
	objects := randomObjects(rng, 64, d)
	for _, n := range []int{40, 3000} {
		e, _ := clusteredItems(rng, n, 8, d, objects)
		qz := trainQuantizer(e.Vecs, d)
		got := qz.assign(e.Vecs)
		want := assign(e.Vecs, d, qz.centroids)
		same, objSame, objAll := 0, 0, 0
		for i := range got {
			near := i%8 < 4 // the vectors near an object
			if near {
				objAll++
			}
			if int32(got[i]) == want[i] {
				same++
				if near {
					objSame++
				}
			}
		}
		frac := float64(objSame) / float64(objAll)
		t.Logf("%d vectors, %d cells, %d groups: %.3f of those near an object and %.3f of all in their best cell",
			len(got), qz.cells, qz.groups, frac, float64(same)/float64(len(got)))
		if qz.groups <= ivfGroupProbes && same != len(got) {
			t.Fatalf("%d groups, probed all: %d of %d vectors in their best cell", qz.groups, same, len(got))
		}
		if frac < 0.97 {
			t.Fatalf("only %.3f of the vectors near an object in their best cell", frac)
		}
		// Centroids are unit vectors.
		for c := 0; c < qz.cells; c++ {
			var s float64
			for _, x := range qz.centroids[c*d : (c+1)*d] {
				s += float64(x) * float64(x)
			}
			if math.Abs(s-1) > 1e-4 {
				t.Fatalf("centroid %d has squared norm %v", c, s)
			}
		}
	}
}

// TestIVFLists checks the lists of a written segment: every vector once,
// ascending within its cell, with its own item, in the cell it is
// assigned.
func TestIVFLists(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	const d = 32
	e := randomEmbeddings(rng, 300, 6, d)
	path := filepath.Join(t.TempDir(), "x.seg")
	if err := writeSegment(path, "images", "fp", e, quantizerFor(e)); err != nil {
		t.Fatal(err)
	}
	s, err := openSegment(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	v := s.ivf
	if v == nil || v.cells != ivfCells(len(e.Pos)) {
		t.Fatalf("inverted file %+v, want %d cells", v, ivfCells(len(e.Pos)))
	}
	seen := make([]bool, len(e.Pos))
	for c := 0; c < v.cells; c++ {
		for k := v.off[c]; k < v.off[c+1]; k++ {
			x, it := int(v.vecs[k]), int(v.items[k])
			if seen[x] {
				t.Fatalf("vector %d listed twice", x)
			}
			seen[x] = true
			if x < e.Offsets[it] || x >= e.Offsets[it+1] {
				t.Fatalf("vector %d listed with item %d", x, it)
			}
			if k > v.off[c] && v.vecs[k-1] >= v.vecs[k] {
				t.Fatalf("cell %d: vectors out of order", c)
			}
		}
	}
	if !slices.Equal(seen, slices.Repeat([]bool{true}, len(seen))) {
		t.Fatal("a vector is in no list")
	}
	// The cells of the file are the quantizer's assignment.
	cellOf := make([]int, len(e.Pos))
	for c := 0; c < v.cells; c++ {
		for k := v.off[c]; k < v.off[c+1]; k++ {
			cellOf[v.vecs[k]] = c
		}
	}
	for x, c := range assign(e.Vecs, d, v.centroids) {
		if int(c) != cellOf[x] {
			t.Fatalf("vector %d filed in cell %d, its best cell is %d", x, cellOf[x], c)
		}
	}
}

// TestIVFSearchFindsExactTop builds an index of clustered items in three
// segments (one quantizer, trained on the first) and checks that the
// pruned search, through a few hundred candidates, returns the exhaustive
// search's top 10 for queries that name an item's objects.
func TestIVFSearchFindsExactTop(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	const d, n = 64, 6000
	objects := randomObjects(rng, 400, d)
	e, objs := clusteredItems(rng, n, 12, d, objects)
	m := stubModelOf(t, d)
	dir := t.TempDir()
	w, err := NewWriter(dir, m, Create)
	if err != nil {
		t.Fatal(err)
	}
	// The last batch is far smaller than the first, on whose vectors the
	// shared quantizer's cells were trained: fewer vectors than cells.
	lo := 0
	for _, size := range []int{2000, 2000, 1995, 5} {
		rows := make([]ImageRow, size)
		for i := range rows {
			rows[i] = ImageRow{ID: fmt.Sprintf("img%d", lo+i)}
		}
		if err := w.AddImages(context.Background(), e.Slice(lo, lo+size), rows); err != nil {
			t.Fatal(err)
		}
		lo += size
	}
	if err := w.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	ix, err := Open(context.Background(), dir, &OpenOptions{Preload: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if len(ix.images) != 4 || !allIVF(ix.images) || ix.images[0].ivf.id != ix.images[3].ivf.id {
		t.Fatal("want 4 segments with inverted files under one quantizer")
	}
	if last := ix.images[3]; last.header.Cells <= last.header.Vectors {
		t.Fatalf("the last segment has %d cells for %d vectors: the case under test needs more cells", last.header.Cells, last.header.Vectors)
	}
	ctx := context.Background()
	hit, tot := 0, 0
	for qi := 0; qi < 10; qi++ {
		src := rng.IntN(n)
		var qv []float32
		for w := 0; w < 8; w++ {
			o := objects[objs[src][w%2]]
			c := 0.35
			if w < 2 {
				c = 0.7
			}
			qv = append(qv, nearUnit(rng, o, c)...)
		}
		q := &model.Embeddings{Dim: d, Offsets: []int{0, 8}, Vecs: qv, Pos: make([]int32, 8), Global: randomUnit(rng, d)}
		exact, err := ix.Search(ctx, q, true, &SearchOptions{K: 10, Exact: true, Candidates: -1})
		if err != nil {
			t.Fatal(err)
		}
		pruned, err := ix.Search(ctx, q, true, &SearchOptions{K: 10, Candidates: 200, Probes: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range exact {
			tot++
			for _, p := range pruned {
				if p.Item == r.Item {
					hit++
					if math.Abs(float64(p.Score-r.Score)) > 1e-5 {
						t.Fatalf("item %d: pruned score %v, exact %v", r.Item, p.Score, r.Score)
					}
				}
			}
		}
	}
	recall := float64(hit) / float64(tot)
	t.Logf("recall@10 of the pruned search (200 of %d candidates): %.3f", n, recall)
	if recall < 0.97 {
		t.Fatalf("recall@10 %.3f through the inverted file, want at least 0.97", recall)
	}
}

// TestIVFCorrupt damages the inverted file's lists: the checksum catches
// it, and with checksums skipped the structural check does.
func TestIVFCorrupt(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	e := randomEmbeddings(rng, 50, 4, 16)
	path := filepath.Join(t.TempDir(), "x.seg")
	if err := writeSegment(path, "images", "fp", e, quantizerFor(e)); err != nil {
		t.Fatal(err)
	}
	h := headerOf(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(b[h.Sections[secIVFItems].Offset:], 1<<30)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, skip := range []bool{false, true} {
		s, err := openSegment(path, skip)
		if err == nil {
			s.close()
			t.Fatalf("skip checksums %v: a damaged inverted file opened", skip)
		}
		if !strings.Contains(err.Error(), secIVFItems) {
			t.Fatalf("skip checksums %v: error %q does not name %q", skip, err, secIVFItems)
		}
	}
}

// stubModelOf returns a tiny TERAN whose joint space has d dimensions: an
// index needs a model, though these tests write vectors of their own.
func stubModelOf(t *testing.T, d int) model.Model {
	t.Helper()
	cfg := model.Default()
	cfg.ImageModel = model.ImageConfig{Name: "bottomup", FeatDim: 8, TransformerLayers: 1, Heads: 1, FF: 8, Hidden: 8, PosEncoding: "concat-and-process"}
	cfg.TextModel = model.TextConfig{Name: "bert", WordDim: 8, ExtractionHiddenLayer: 1, FineTune: true, Heads: 1, FF: 8, MaxPositions: 64}
	cfg.Model = model.JointConfig{Name: "teran", EmbedSize: d, Layers: 1, Heads: 1, FF: 8}
	tok, err := model.BuildTokenizer(cfg, []string{"a red circle"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, tok, 1)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFlatten holds flatten's candidates to the segments' rated items:
// places run on across segments, segments that rated nothing (first,
// between, last) are skipped, and item numbers run on from each
// segment's first item.
func TestFlatten(t *testing.T) {
	segs := make([]*segment, 5)
	for i, n := range []int{4, 3, 6, 2, 5} {
		segs[i] = &segment{header: segmentHeader{Items: n}}
	}
	res := []rated{
		{},
		{items: []int32{0, 2}, scores: []float32{1, 2}},
		{},
		{items: []int32{1}, scores: []float32{3}},
		{},
	}
	all, who := flatten(segs, res)
	if want := []float32{1, 2, 3}; !slices.Equal(all, want) {
		t.Fatalf("ratings %v, want %v", all, want)
	}
	for h, want := range []candidate{{item: 4, row: 0, seg: segs[1]}, {item: 6, row: 2, seg: segs[1]}, {item: 14, row: 1, seg: segs[3]}} {
		if got := who(h); got != want {
			t.Errorf("place %d: candidate %+v, want %+v", h, got, want)
		}
	}
}

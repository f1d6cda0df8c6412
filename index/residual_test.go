package index

import (
	"context"
	"encoding/binary"
	"errors"
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

func TestCellLists(t *testing.T) {
	// Items: 0 has vectors in cells 2, 0, 2; 1 in 1; 2 in 2, 2.
	cellOf := []uint16{2, 0, 2, 1, 2, 2}
	off, items := cellLists(cellOf, []int{10, 13, 14, 16}, 3)
	if want := []int64{0, 1, 2, 4}; !slices.Equal(off, want) {
		t.Fatalf("offsets %v, want %v", off, want)
	}
	if want := []int32{0, 1, 0, 2}; !slices.Equal(items, want) {
		t.Fatalf("items %v, want %v", items, want)
	}
}

// filed returns e's quantizer (trained on it), its vectors and their
// cells.
func filed(e *model.Embeddings) (*quantizer, []float32, []uint16) {
	qz := quantizerFor(e)
	vecs := e.Vecs[:e.Offsets[e.Len()]*e.Dim]
	return qz, vecs, qz.assign(vecs)
}

// compressedSegment writes e as a compressed segment with the residual
// coder c, and coarse codes, and opens it.
func compressedSegment(t *testing.T, e *model.Embeddings, dsub int, c ResidualCoder) *segment {
	t.Helper()
	qz, vecs, cellOf := filed(e)
	path := filepath.Join(t.TempDir(), "c.seg")
	rcb := trainResidual("images", vecs, e.Dim, cellOf, qz, dsub, c)
	cc := trainCoarse("images", vecs, e.Dim, cellOf, qz, dsub, rcb)
	if err := writeCompressedSegment(path, "images", "fp", e, qz, rcb, cc, cellOf); err != nil {
		t.Fatal(err)
	}
	s, err := openSegment(path, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.close() })
	return s
}

// cosineError returns the root mean square difference between the dot
// products of the float32 vectors vecs with the query vectors q and those
// of their decoded forms in v.
func cosineError(v *resView, vecs, q []float32) float64 {
	d := v.cb.dim
	buf := make([]float32, d)
	var sum float64
	n := 0
	for x := 0; x < len(vecs)/d; x++ {
		v.decode(x, buf)
		for w := 0; w < len(q)/d; w++ {
			var a, b float32
			for k := range d {
				a += vecs[x*d+k] * q[w*d+k]
				b += buf[k] * q[w*d+k]
			}
			sum += float64((a - b) * (a - b))
			n++
		}
	}
	return math.Sqrt(sum / float64(max(n, 1)))
}

// TestResidualCodes checks the compressed layout's codes, with each
// residual coder: the decoded vectors are closer to the originals than the
// product quantiser's without a residual; the exact score is the pooled
// dot products of the decoded vectors; the fast-scan estimate stays within
// its quantisation bound of it.
func TestResidualCodes(t *testing.T) {
	for _, c := range []ResidualCoder{CoderPQ, CoderDirections} {
		t.Run(c.String(), func(t *testing.T) { testResidualCodes(t, c) })
	}
}

func testResidualCodes(t *testing.T, coder ResidualCoder) {
	rng := rand.New(rand.NewPCG(3, 3))
	const d = 64
	objects := randomObjects(rng, 40, d)
	e, _ := clusteredItems(rng, 400, 12, d, objects)
	s := compressedSegment(t, e, 1, coder)
	v := s.res
	if s.header.PQ.Dsub != 1 || v.cb.m != 64 || (v.cb.dir != nil) != (coder == CoderDirections) {
		t.Fatalf("residual quantiser %d x %d, directions %v: want 64 subspaces of 1 coded by %s", v.cb.m, v.cb.dsub, v.cb.dir != nil, coder)
	}
	q := queryNear(rng, objects, 6)
	vecs := e.Vecs[:e.Offsets[e.Len()]*d]
	resErr := cosineError(v, vecs, q)
	// The same budget without the residual: product quantisation of the
	// vectors themselves.
	cb := trainPQ(vecs, d, 1)
	codes := cb.encode(vecs)
	plain := &resView{cells: 1, centroids: make([]float32, d), cellOf: make([]uint16, len(vecs)/d), alphas: make([]int8, len(vecs)/d), cb: cb, codes: codes}
	plainErr := cosineError(plain, vecs, q)
	t.Logf("RMS cosine error: residual %.4f, plain PQ %.4f", resErr, plainErr)
	if resErr > 0.03 || resErr > 0.9*plainErr {
		t.Fatalf("RMS cosine error %.4f of the residual codes, want under 0.03 and 0.9 x plain PQ's %.4f", resErr, plainErr)
	}
	segs := []*segment{s}
	rq := newResQuery(segs, q, d)
	fast, err := scoreResidual(context.Background(), v, rq, model.MrSw, true)
	if err != nil {
		t.Fatal(err)
	}
	var sc resScratch
	for _, sx := range []model.Scoring{model.MrSw, model.MwSr, model.Symm, model.MrAvgw} {
		for _, text := range []bool{true, false} {
			for i := 0; i < e.Len(); i += 37 {
				dec := s.decodeItem(i)
				qe := &model.Embeddings{Dim: d, Offsets: []int{0, len(q) / d}, Vecs: q, Pos: make([]int32, len(q)/d), Global: q[:d]}
				var want []float32
				if text {
					want, err = model.ScoreMatrix(context.Background(), dec, qe, sx)
				} else {
					want, err = model.ScoreMatrix(context.Background(), qe, dec, sx)
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := sc.exact(v, rq, sx, text, i); math.Abs(float64(got-want[0])) > 1e-4*(1+math.Abs(float64(want[0]))) {
					t.Fatalf("%s text=%v item %d: exact score %v, decoded vectors score %v", sx, text, i, got, want[0])
				}
			}
		}
	}
	// The fast-scan estimate: each cosine is off by at most half a table
	// step per subspace.
	lut := rq.luts[v.cbID]
	var bound float32
	for qi := range lut.n {
		bound = max(bound, lut.scale[qi]*float32(v.cb.m)/2)
	}
	for i := 0; i < e.Len(); i++ {
		ex := sc.exact(v, rq, model.MrSw, true, i)
		if math.Abs(float64(fast[i]-ex)) > float64(6*bound)+1e-5 {
			t.Fatalf("item %d: fast-scan %v, exact %v: more than 6 words x %v apart", i, fast[i], ex, bound)
		}
	}
}

// buildClustered writes items of e in batches to a new index in dir with
// layout l and returns it open.
func buildClustered(t *testing.T, dir string, m model.Model, e *model.Embeddings, l Layout, mode Mode) *Index {
	t.Helper()
	w, err := NewWriter(dir, m, mode)
	if err != nil {
		t.Fatal(err)
	}
	w.SetLayout(LayoutOptions{Layout: l})
	for lo := 0; lo < e.Len(); lo += 1500 {
		hi := min(lo+1500, e.Len())
		rows := make([]ImageRow, hi-lo)
		for i := range rows {
			rows[i] = ImageRow{ID: fmt.Sprintf("img%d", lo+i)}
		}
		if err := w.AddImages(context.Background(), e.Slice(lo, hi), rows); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	ix, err := Open(context.Background(), dir, &OpenOptions{Preload: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix
}

// TestCompressedSearch builds one collection twice, with float32 vectors
// and compressed, and holds the compressed searches (pruned and not) to
// the float32 exhaustive ranking; --exact and --int8 on the compressed
// index are refused; explanations and image look-ups work from the codes;
// a compressed build that is abandoned leaves the index as it was.
func TestCompressedSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	const d, n = 64, 6000
	objects := randomObjects(rng, 400, d)
	e, objs := clusteredItems(rng, n, 12, d, objects)
	m := stubModelOf(t, d)
	full := buildClustered(t, t.TempDir(), m, e, LayoutFloat32, Create)
	cdir := t.TempDir()
	comp := buildClustered(t, cdir, m, e, LayoutCompressed, Create)
	if !allResidual(comp.images) || anyResidual(full.images) {
		t.Fatal("want every segment of one index compressed and none of the other")
	}
	if comp.images[0].res.id != comp.images[3].res.id || comp.images[0].res.cbID != comp.images[3].res.cbID {
		t.Fatal("the segments of one build must share the quantizer and the residual codebook")
	}
	// Each segment holds the build's quantizer; a search keeps one copy.
	if !comp.images[0].resident(secIVFCentroids) || comp.images[3].resident(secIVFCentroids) {
		t.Fatal("want the first segment's inverted-file centroids kept in memory and not the later ones' (the same quantizer)")
	}
	fb, cbytes := dirSize(t, filepath.Dir(full.images[0].path)), dirSize(t, cdir)
	t.Logf("index bytes: float32 %d, compressed %d (%.3f)", fb, cbytes, float64(cbytes)/float64(fb))
	if cbytes*3 > fb {
		t.Fatalf("compressed index %d bytes, float32 %d: want under a third", cbytes, fb)
	}
	var fr, cr int64
	for i := range full.images {
		fr += full.images[i].residentBytes()
		cr += comp.images[i].residentBytes()
	}
	// 12 vectors an item: a cell (2 bytes), a cosine (1), coarse codes
	// (4), a list entry (4 at most) each, and offsets (8).
	if per := float64(cr) / n; per > 250 {
		t.Fatalf("a compressed search keeps %.0f bytes an item in memory, want at most 250 (float32 layout: %.0f)", per, float64(fr)/n)
	}
	if !allCoarse(comp.images) {
		t.Fatal("a compressed build's segments have no coarse codes")
	}
	// The same index without its coarse codes, as segments written before
	// them: every candidate's residual codes are read.
	plain, err := Open(context.Background(), cdir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for _, s := range plain.images {
		s.res.coarse = nil
	}
	ctx := context.Background()
	type run struct {
		name string
		ix   *Index
		o    SearchOptions
		min  float64
	}
	// The codes keep about 2 bits an element: on these vectors, half of
	// them random, the exhaustive ranking's lower places turn on
	// differences the codes cannot hold (docs/benchmarks.md, "search";
	// measured: 0.63 and 0.78). Chance is 10 / 6000. With 1,500
	// candidates, the coarse codes choose the 300 whose residual codes are
	// read (measured: 0.68, and 0.70 reading all 1,500).
	runs := []run{
		{"pruned, 300 candidates", comp, SearchOptions{K: 10, Candidates: 300, Probes: 2}, 0.55},
		{"every item on the codes", comp, SearchOptions{K: 10, Candidates: -1}, 0.65},
		{"pruned, 1500 candidates, coarse codes", comp, SearchOptions{K: 10, Candidates: 1500, Probes: 2}, 0.6},
		{"pruned, 1500 candidates, no coarse codes", plain, SearchOptions{K: 10, Candidates: 1500, Probes: 2}, 0.6},
	}
	hits := make([]int, len(runs))
	tot := 0
	for qi := 0; qi < 10; qi++ {
		src := rng.IntN(n)
		var qv []float32
		for w := 0; w < 8; w++ {
			c := 0.35
			if w < 2 {
				c = 0.7
			}
			qv = append(qv, nearUnit(rng, objects[objs[src][w%2]], c)...)
		}
		q := &model.Embeddings{Dim: d, Offsets: []int{0, 8}, Vecs: qv, Pos: make([]int32, 8), Global: randomUnit(rng, d)}
		exact, err := full.Search(ctx, q, true, &SearchOptions{K: 10, Exact: true, Candidates: -1})
		if err != nil {
			t.Fatal(err)
		}
		tot += len(exact)
		for ri, r := range runs {
			got, err := r.ix.Search(ctx, q, true, &r.o)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range got {
				for _, x := range exact {
					if g.Item == x.Item {
						hits[ri]++
						if math.Abs(float64(g.Score-x.Score)) > 0.15*float64(x.Score)+0.05 {
							t.Errorf("%s: item %d scores %v from the codes, %v in float32", r.name, g.Item, g.Score, x.Score)
						}
					}
				}
			}
		}
	}
	for ri, r := range runs {
		recall := float64(hits[ri]) / float64(tot)
		t.Logf("%s: recall@10 %.3f against exhaustive float32", r.name, recall)
		if recall < r.min {
			t.Errorf("%s: recall@10 %.3f, want at least %.2f", r.name, recall, r.min)
		}
	}
	if with, without := hits[2], hits[3]; float64(with) < float64(without)-0.05*float64(tot) {
		t.Errorf("1,500 candidates: %d of the exhaustive top 10s found through the coarse codes, %d reading every candidate's residual codes", with, without)
	}
	q := &model.Embeddings{Dim: d, Offsets: []int{0, 1}, Vecs: objects[0], Pos: []int32{0}, Global: objects[0]}
	if _, err := comp.Search(ctx, q, true, &SearchOptions{Exact: true}); !errors.Is(err, ErrNoFloat32) || !strings.Contains(err.Error(), "--keep-float32") {
		t.Fatalf("--exact on a compressed index: error %v, want ErrNoFloat32 naming --keep-float32", err)
	}
	if _, err := comp.Search(ctx, q, true, &SearchOptions{Int8: true}); err == nil || !strings.Contains(err.Error(), "int8") {
		t.Fatalf("--int8 on a compressed index: error %v, want one naming int8", err)
	}
	// An explanation, from decoded codes.
	got, err := comp.Search(ctx, q, true, &SearchOptions{K: 1, Explain: true})
	if err != nil || len(got) != 1 || len(got[0].Explain) != 1 {
		t.Fatalf("explained search: %v, %v", got, err)
	}
	if ex := got[0].Explain[0]; math.Abs(float64(ex.Cosine-got[0].Score)) > 0.05 {
		t.Fatalf("explanation's cosine %v, the result's score %v (one word: they are one cosine)", ex.Cosine, got[0].Score)
	}
	// A compressed overwrite abandoned half way leaves the index as it was.
	w, err := NewWriter(cdir, m, Overwrite)
	if err != nil {
		t.Fatal(err)
	}
	w.SetLayout(LayoutOptions{Layout: LayoutCompressed})
	if err := w.AddImages(ctx, e.Slice(0, 100), make([]ImageRow, 100)); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	again, err := Open(ctx, cdir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if ni, _ := again.Len(); ni != n {
		t.Fatalf("after an abandoned overwrite the index holds %d images, want %d", ni, n)
	}
	// An append trains its own quantizer and codebook; a search probes
	// both builds' cells. An appended image, queried by 8 of its own
	// vectors, comes first.
	extra, _ := clusteredItems(rng, 200, 12, d, objects)
	w, err = NewWriter(cdir, m, Append)
	if err != nil {
		t.Fatal(err)
	}
	w.SetLayout(LayoutOptions{Layout: LayoutCompressed})
	rows := make([]ImageRow, 200)
	for i := range rows {
		rows[i] = ImageRow{ID: fmt.Sprintf("extra%d", i)}
	}
	if err := w.AddImages(ctx, extra, rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	app, err := Open(ctx, cdir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	last := app.images[len(app.images)-1]
	if ni, _ := app.Len(); ni != n+200 || !allResidual(app.images) || last.res.id == app.images[0].res.id {
		t.Fatalf("after the append: %d images (want %d), all compressed %v, own quantizer %v", ni, n+200, allResidual(app.images), last.res.id != app.images[0].res.id)
	}
	for _, it := range []int{0, 77, 199} {
		qv := extra.Vecs[extra.Offsets[it]*d : (extra.Offsets[it]+8)*d]
		q := &model.Embeddings{Dim: d, Offsets: []int{0, 8}, Vecs: qv, Pos: make([]int32, 8), Global: qv[:d]}
		for _, o := range []SearchOptions{{K: 1, Candidates: 300}, {K: 1, Candidates: -1}} {
			got, err := app.Search(ctx, q, true, &o)
			if err != nil || len(got) != 1 || got[0].Item != n+it {
				t.Fatalf("appended image %d by its own vectors (candidates %d): %+v, %v; want item %d first", it, o.Candidates, got, err, n+it)
			}
		}
	}
}

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += info.Size()
	}
	return n
}

// TestCompressedCorrupt damages a compressed segment's cells: the
// checksum catches it, and with checksums skipped the structural check.
func TestCompressedCorrupt(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	e := randomEmbeddings(rng, 60, 4, 16)
	s := compressedSegment(t, e, 1, CoderAuto)
	path := s.path
	h := s.header
	s.close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		section string
		at      int64
		value   uint32
	}{
		{secCells, 0, 0xffff},
		{secIVFItems, 0, 1 << 30},
	} {
		bad := slices.Clone(b)
		binary.LittleEndian.PutUint16(bad[h.Sections[c.section].Offset+c.at:], uint16(c.value))
		if c.section == secIVFItems {
			binary.LittleEndian.PutUint32(bad[h.Sections[c.section].Offset+c.at:], c.value)
		}
		p := filepath.Join(t.TempDir(), "bad.seg")
		if err := os.WriteFile(p, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, skip := range []bool{false, true} {
			s, err := openSegment(p, skip)
			if err == nil {
				s.close()
				t.Fatalf("%s damaged, skip checksums %v: opened", c.section, skip)
			}
			if !strings.Contains(err.Error(), c.section) {
				t.Fatalf("%s damaged, skip checksums %v: error %q does not name it", c.section, skip, err)
			}
		}
	}
}

func TestLayoutAuto(t *testing.T) {
	for _, c := range []struct {
		o              LayoutOptions
		images, captns bool
	}{
		{LayoutOptions{}, false, false},
		{LayoutOptions{Images: AutoCompressItems, Captions: AutoCompressItems + 1}, false, true},
		{LayoutOptions{Images: 5 * AutoCompressItems}, true, false},
		{LayoutOptions{Layout: LayoutCompressed}, true, true},
		{LayoutOptions{Layout: LayoutFloat32, Images: 5 * AutoCompressItems}, false, false},
	} {
		w := &Writer{lay: c.o}
		if got := w.compressed("images"); got != c.images {
			t.Errorf("%+v: images compressed %v, want %v", c.o, got, c.images)
		}
		if got := w.compressed("captions"); got != c.captns {
			t.Errorf("%+v: captions compressed %v, want %v", c.o, got, c.captns)
		}
	}
}

// BenchmarkCompressedWrite writes 8,192 items of 36 vectors (d = 256) as
// compressed segments, with each residual coder: assignment to cells,
// residual codes, lists, the file (the quantizer and coder are trained
// once, outside the loop; "train" times the coder's training alone).
func BenchmarkCompressedWrite(b *testing.B) {
	rng := rand.New(rand.NewPCG(4, 4))
	const d = 256
	objects := randomObjects(rng, 1024, d)
	e, _ := clusteredItems(rng, 8192, 36, d, objects)
	qz, vecs, cellOf := filed(e)
	for _, c := range []ResidualCoder{CoderPQ, CoderDirections} {
		b.Run(c.String()+"/train", func(b *testing.B) {
			for b.Loop() {
				trainResidual("images", vecs, d, cellOf, qz, resDsubFor(d), c)
			}
		})
		rcb := trainResidual("images", vecs, d, cellOf, qz, resDsubFor(d), c)
		cc := trainCoarse("images", vecs, d, cellOf, qz, resDsubFor(d), rcb)
		path := filepath.Join(b.TempDir(), "c.seg")
		b.Run(c.String()+"/write", func(b *testing.B) {
			for b.Loop() {
				cellOf := qz.assign(vecs)
				if err := writeCompressedSegment(path, "images", "fp", e, qz, rcb, cc, cellOf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*e.Len())/b.Elapsed().Seconds(), "items/s")
		})
	}
}

// TestNearestHalf holds the encoder's nearest centroid (largest x.c -
// |c|^2/2, widths 2 and 4 unrolled) to the Euclidean nearest.
func TestNearestHalf(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, w := range []int{1, 2, 3, 4, 8} {
		cent := make([]float32, pqCentroids*w)
		for i := range cent {
			cent[i] = float32(rng.NormFloat64())
		}
		half := make([]float32, pqCentroids)
		for c := range half {
			for _, v := range cent[c*w : (c+1)*w] {
				half[c] += v * v / 2
			}
		}
		for range 1000 {
			x := make([]float32, w)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			if got, want := nearestHalf(x, cent, half), nearest(x, cent, w); got != want {
				t.Fatalf("width %d, x %v: centroid %d, the nearest is %d", w, x, got, want)
			}
		}
	}
}

// BenchmarkScoreResidual scores on compressed codes (centroid score times
// the cosine, plus the residual's fast-scan look-ups) the shapes of
// BenchmarkScoreFloats: a 12-word query against 5,000 images of 36
// regions, a 36-region image against 25,000 captions of 12 words, d =
// 1024, the default residual subspaces (4 elements at d = 1024).
func BenchmarkScoreResidual(b *testing.B) {
	for _, c := range scoreShapes {
		b.Run(c.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(27, 27))
			w, m := pqShape(c.d, resDsubFor(c.d))
			const cells = 4096
			n := c.items * c.nv
			v := &resView{cells: cells, centroids: make([]float32, cells*c.d), cellOf: make([]uint16, n), alphas: make([]int8, n),
				cb:    &pqCodebook{dim: c.d, dsub: w, m: m, centroids: make([]float32, m*pqCentroids*w)},
				codes: make([]byte, pqBlocks(n)*16*m), offsets: make([]int, c.items+1)}
			fillNormal(rng, v.centroids)
			fillNormal(rng, v.cb.centroids)
			for i := range v.codes {
				v.codes[i] = byte(rng.IntN(256))
			}
			for x := range n {
				v.cellOf[x], v.alphas[x] = uint16(rng.IntN(cells)), int8(rng.IntN(255)-127)
			}
			for i := range v.offsets {
				v.offsets[i] = i * c.nv
			}
			q := make([]float32, c.nq*c.d)
			fillNormal(rng, q)
			seg := &segment{res: v}
			b.SetBytes(int64(len(v.codes) + 3*n))
			b.ResetTimer()
			for range b.N {
				rq := newResQuery([]*segment{seg}, q, c.d)
				if _, err := scoreResidual(context.Background(), v, rq, model.MrSw, c.queryIsText); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestScoreResidualPools holds the fast-scan scoring (its MrSw paths for
// text and image queries, and the general one) to the pooled estimates
// computed here from the tables' bytes, entry by entry.
func TestScoreResidualPools(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	e := randomEmbeddings(rng, 70, 9, 32)
	s := compressedSegment(t, e, 2, CoderAuto)
	v := s.res
	for _, nq := range []int{1, 4, 5} {
		q := make([]float32, nq*32)
		fillNormal(rng, q)
		rq := newResQuery([]*segment{s}, q, 32)
		lut, tab := rq.luts[v.cbID], rq.tables[v.id]
		est := func(x, qi int) float32 {
			var sum int
			for sub := 0; sub < v.cb.m; sub++ {
				sum += int(lut.luts[qi/2][(qi%2)*16*v.cb.m+(sub/2)*32+(sub%2)*16+int(codeAt(v.codes, v.cb.m, x, sub))])
			}
			return alphaValue(v.alphas[x])*tab[int(v.cellOf[x])*nq+qi] + lut.scale[qi]*float32(sum) + lut.bias[qi]
		}
		for _, sx := range []model.Scoring{model.MrSw, model.MwSr, model.Symm, model.MrAvgw} {
			for _, text := range []bool{true, false} {
				got, err := scoreResidual(context.Background(), v, rq, sx, text)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < e.Len(); i++ {
					x0, x1 := v.offsets[i], v.offsets[i+1]
					sims := make([]float32, 0, (x1-x0)*nq)
					for x := x0; x < x1; x++ {
						for qi := range nq {
							sims = append(sims, est(x, qi))
						}
					}
					want := pool(sims, x1-x0, nq, sx, text)
					if math.Abs(float64(got[i]-want)) > 1e-4*(1+math.Abs(float64(want))) {
						t.Fatalf("%d query vectors, %s, text=%v: item %d scores %v, pooled estimates %v", nq, sx, text, i, got[i], want)
					}
				}
			}
		}
	}
}

// TestCoarseCodesOptional writes one batch with and without coarse codes
// (as segments written before them are) and with a coarse codebook that
// does not fit the dimension: the first two open, with the same residual
// codes and the coarse ones kept in memory; the third is refused, naming
// the coarse quantiser.
func TestCoarseCodesOptional(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	const d = 32
	e := randomEmbeddings(rng, 200, 6, d)
	qz, vecs, cellOf := filed(e)
	rcb := trainResidual("images", vecs, d, cellOf, qz, 2, CoderPQ)
	misfit := &coarseCoder{cb: &pqCodebook{dim: d, dsub: 3, m: 4, centroids: make([]float32, 4*pqCentroids*3)}}
	for _, c := range []struct {
		name string
		cc   *coarseCoder
		err  string
	}{
		{"without", nil, ""},
		{"with", trainCoarse("images", vecs, d, cellOf, qz, 2, rcb), ""},
		{"misfit", misfit, "coarse product quantiser of 4 subspaces of 3 elements"},
	} {
		path := filepath.Join(t.TempDir(), c.name+".seg")
		if err := writeCompressedSegment(path, "images", "fp", e, qz, rcb, c.cc, cellOf); err != nil {
			t.Fatal(err)
		}
		s, err := openSegment(path, false)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("%s: open error %v, want one naming %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		defer s.close()
		_, hasCodes := s.header.Sections[secCoarseCodes]
		if (s.res.coarse != nil) != (c.cc != nil) || hasCodes != (c.cc != nil) || (s.header.Coarse != nil) != (c.cc != nil) {
			t.Fatalf("%s: coarse view %v, section %v, header %+v", c.name, s.res.coarse != nil, hasCodes, s.header.Coarse)
		}
		if c.cc != nil {
			if !s.resident(secCoarseCodes) || !s.resident(secCoarseCodebook) {
				t.Fatalf("%s: the coarse codes are not kept in memory", c.name)
			}
			if got, want := len(s.res.coarse.codes), pqBlocks(len(cellOf))*16*c.cc.cb.m; got != want {
				t.Fatalf("%s: %d bytes of coarse codes, want %d", c.name, got, want)
			}
			if c.cc.cb.m*2 > rcb.m {
				t.Fatalf("coarse codes of %d subspaces, residual codes of %d: want at most half", c.cc.cb.m, rcb.m)
			}
		}
		want, _ := rcb.encodeResiduals(vecs, cellOf, qz.centroids)
		if !slices.Equal(s.res.codes, want) {
			t.Fatalf("%s: the residual codes differ from the encoder's", c.name)
		}
	}
}

// TestCoarseFromResidualCodes holds the coarse codes made from the
// residual codes (looked up where each coarse subspace is at most 4
// residual ones, summed from dot products where more) to their
// definition, the coarse centroid nearest the residual the codes decode
// to, and to the codes searched for from the residuals themselves (the
// direction coder's path): most agree (measured: 0.72 and 0.92; codes of
// the wrong subspaces would agree on about 1 in 16).
func TestCoarseFromResidualCodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 13))
	const d = 256
	objects := randomObjects(rng, 64, d)
	e, _ := clusteredItems(rng, 300, 12, d, objects)
	qz, vecs, cellOf := filed(e)
	// Residual subspaces of 2 elements: 4 a coarse one, looked up in a
	// table; of 1 (as 4 at d = 1024): 8, summed from dot products.
	for _, c := range []struct{ dsub, k int }{{2, 4}, {1, 8}} {
		rcb := trainResidual("images", vecs, d, cellOf, qz, c.dsub, CoderPQ)
		cc := trainCoarse("images", vecs, d, cellOf, qz, c.dsub, rcb)
		if (cc.table != nil) != (c.k <= 4) || (cc.dots != nil) != (c.k > 4) || cc.k != c.k || cc.cb.m != 32 {
			t.Fatalf("residual subspaces of %d: table %v, dots %v, %d residual subspaces a coarse one, %d subspaces; want %d and 32", c.dsub, cc.table != nil, cc.dots != nil, cc.k, cc.cb.m, c.k)
		}
		codes, _ := rcb.encodeResiduals(vecs, cellOf, qz.centroids)
		looked := cc.encode(vecs, cellOf, qz.centroids, codes, rcb.m)
		searched, _ := cc.cb.encodeResiduals(vecs, cellOf, qz.centroids)
		half := cc.cb.halfNorms()
		n, w := len(cellOf), cc.cb.dsub
		x := make([]float32, w)
		score := func(s, code int) float32 { // x.c - |c|^2/2
			v := -half[s*pqCentroids+code]
			for e, u := range x {
				v += u * cc.cb.centroids[(s*pqCentroids+code)*w+e]
			}
			return v
		}
		agree := 0
		for v := range n {
			for s := range cc.cb.m {
				for j := range c.k {
					code := int(codeAt(codes, rcb.m, v, c.k*s+j))
					copy(x[c.dsub*j:c.dsub*(j+1)], rcb.centroids[((c.k*s+j)*pqCentroids+code)*c.dsub:])
				}
				want := byte(nearestHalf(x, cc.cb.centroids[s*pqCentroids*w:(s+1)*pqCentroids*w], half[s*pqCentroids:(s+1)*pqCentroids]))
				// The sums of dot products may round a near-tie the other way.
				if got := codeAt(looked, cc.cb.m, v, s); got != want && (cc.dots == nil || score(s, int(want))-score(s, int(got)) > 1e-5) {
					t.Fatalf("residual subspaces of %d, vector %d, coarse subspace %d: code %d from the residual codes, %d nearest the decoded residual", c.dsub, v, s, got, want)
				}
				if codeAt(searched, cc.cb.m, v, s) == want {
					agree++
				}
			}
		}
		share := float64(agree) / float64(n*cc.cb.m)
		t.Logf("residual subspaces of %d: coarse codes from the residual codes and searched for agree on %.3f of subspaces", c.dsub, share)
		if share < 0.6 {
			t.Fatalf("residual subspaces of %d: coarse codes from the residual codes and searched for agree on %.3f of subspaces, want at least 0.6", c.dsub, share)
		}
	}
}

// TestCoarseReads checks how many candidates read their residual codes
// after the coarse codes: max(3 rerank, 300), twice that where the coarse
// subspaces are 8 times as wide as the residual codes' (d = 1024), none
// when a segment has no coarse codes.
func TestCoarseReads(t *testing.T) {
	seg := func(fine, coarse int) *segment {
		v := &resView{cb: &pqCodebook{dsub: fine}}
		if coarse > 0 {
			v.coarse = &resView{cb: &pqCodebook{dsub: coarse}}
		}
		return &segment{res: v}
	}
	for _, c := range []struct {
		name   string
		segs   []*segment
		rerank int
		want   int
	}{
		{"d=256", []*segment{seg(2, 8), seg(2, 8)}, 100, 300},
		{"d=256, rerank 200", []*segment{seg(2, 8)}, 200, 600},
		{"d=1024", []*segment{seg(4, 32)}, 100, 600},
		{"one segment coarser", []*segment{seg(2, 8), seg(4, 32)}, 100, 600},
		{"a segment without coarse codes", []*segment{seg(2, 8), seg(2, 0)}, 100, 0},
	} {
		if got := coarseReads(c.rerank, c.segs); got != c.want {
			t.Errorf("%s: %d reads, want %d", c.name, got, c.want)
		}
	}
}

package index

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/xmr-project/xmr/model"
)

// fillNormal sets every element of v to a standard normal draw.
func fillNormal(rng *rand.Rand, v []float32) {
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
}

// randomEmbeddings makes n items of 0..maxVecs random unit vectors of dim.
func randomEmbeddings(rng *rand.Rand, n, maxVecs, dim int) *model.Embeddings {
	e := &model.Embeddings{Dim: dim, Offsets: []int{0}}
	unit := func() []float32 {
		v := make([]float32, dim)
		var s float64
		for k := range v {
			v[k] = float32(rng.NormFloat64())
			s += float64(v[k]) * float64(v[k])
		}
		for k := range v {
			v[k] /= float32(math.Sqrt(s))
		}
		return v
	}
	for i := 0; i < n; i++ {
		k := rng.IntN(maxVecs + 1)
		for j := 0; j < k; j++ {
			e.Vecs = append(e.Vecs, unit()...)
			e.Pos = append(e.Pos, int32(j))
		}
		e.Offsets = append(e.Offsets, len(e.Pos))
		e.Global = append(e.Global, unit()...)
	}
	return e
}

func TestQuantize(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	e := randomEmbeddings(rng, 20, 5, 40)
	codes, scales := quantize(e.Vecs, 40)
	cd := codeDim(40)
	if cd != 48 || len(codes) != len(scales)*cd {
		t.Fatalf("code width %d, %d codes for %d vectors", cd, len(codes), len(scales))
	}
	for i, s := range scales {
		for k := 0; k < 40; k++ {
			x, y := e.Vecs[i*40+k], s*float32(codes[i*cd+k])
			if math.Abs(float64(x-y)) > float64(s)/2+1e-7 {
				t.Fatalf("vector %d element %d: %v quantized to %v (scale %v)", i, k, x, y, s)
			}
		}
		for k := 40; k < cd; k++ {
			if codes[i*cd+k] != 0 {
				t.Fatal("padding codes are not zero")
			}
		}
	}
	z, zs := quantize(make([]float32, 8), 8)
	if zs[0] != 0 || slices.ContainsFunc(z, func(c int8) bool { return c != 0 }) {
		t.Fatal("a zero vector must quantize to zeros")
	}
}

// TestPoolMatchesScoreMatrix feeds pool exact float similarities and holds
// it to model.ScoreMatrix for every alignment scoring and both query
// sides.
func TestPoolMatchesScoreMatrix(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	imgs := randomEmbeddings(rng, 30, 6, 16)
	txts := randomEmbeddings(rng, 25, 9, 16)
	for _, s := range []model.Scoring{model.MrSw, model.MwSr, model.Symm, model.MrAvgw} {
		want, err := model.ScoreMatrix(context.Background(), imgs, txts, s)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < imgs.Len(); i++ {
			for c := 0; c < txts.Len(); c++ {
				a := model.WordAlignments(imgs, i, txts, c) // words x regions
				nw, nr := txts.Count(c), imgs.Count(i)
				// Text query: rows are regions.
				byRegion := make([]float32, nr*nw)
				for w := 0; w < nw; w++ {
					for r := 0; r < nr; r++ {
						byRegion[r*nw+w] = a[w*nr+r]
					}
				}
				got1 := pool(byRegion, nr, nw, s, true)
				got2 := pool(a, nw, nr, s, false)
				w := want[i*txts.Len()+c]
				if math.Abs(float64(got1-w)) > 1e-5 || math.Abs(float64(got2-w)) > 1e-5 {
					t.Fatalf("%s image %d caption %d: pool %v (text query), %v (image query), ScoreMatrix %v", s, i, c, got1, got2, w)
				}
			}
		}
	}
}

// TestScoreCodesNearExact checks that the int8 path ranks close to the
// float32 one on random unit vectors: scores within a small error.
func TestScoreCodesNearExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	const d = 64
	imgs := randomEmbeddings(rng, 300, 8, d)
	q := randomEmbeddings(rng, 1, 13, d)
	for q.Count(0) < 13 {
		q = randomEmbeddings(rng, 1, 13, d)
	}
	codes, scales := quantize(imgs.Vecs, d)
	cv := &codeView{cd: codeDim(d), codes: codes, scales: scales, offsets: imgs.Offsets}
	for _, s := range []model.Scoring{model.MrSw, model.MwSr, model.Symm, model.MrAvgw} {
		got, err := scoreCodes(context.Background(), cv, packQuery(q.Vecs, d), s, true)
		if err != nil {
			t.Fatal(err)
		}
		want, err := model.ScoreMatrix(context.Background(), imgs, q, s)
		if err != nil {
			t.Fatal(err)
		}
		var worst float64
		for i := range want {
			worst = max(worst, math.Abs(float64(got[i]-want[i])))
		}
		// Each cosine is off by at most about d * (1/127)^2 / 2 for unit
		// vectors; 13 words or 8 regions add up.
		if worst > 0.05 {
			t.Fatalf("%s: int8 scores differ from float32 by up to %v", s, worst)
		}
		t.Logf("%s: worst int8 error %.4f", s, worst)
	}
}

// benchCodes and benchFloats hold the item vectors of BenchmarkScoreCodes
// and BenchmarkScoreFloats, made once a process (-count runs each many
// times) by benchData.
var (
	benchOnce   [2]sync.Once
	benchCodes  [2]*codeView
	benchFloats [2]*model.Embeddings
)

// benchShapes are the two searches of the scoring benchmarks, the sizes of
// xmr bench search: one 12-word query against 5,000 images of 36 regions
// (t2i) and one 36-region image against 25,000 captions of 12 words (i2t),
// at d = 1024.
var benchShapes = [2]struct {
	name             string
	items, nv, nq, d int
	queryIsText      bool
}{{"t2i", 5000, 36, 12, 1024, true}, {"i2t", 25000, 12, 36, 1024, false}}

// benchData returns the items of benchShapes[shape] as int8 codes and as float32 vectors
// (random, not the same vectors).
func benchData(shape int) (*codeView, *model.Embeddings) {
	benchOnce[shape].Do(func() {
		c := benchShapes[shape]
		rng := rand.New(rand.NewPCG(5, 5))
		cv := &codeView{cd: c.d, codes: make([]int8, c.items*c.nv*c.d), scales: make([]float32, c.items*c.nv), offsets: make([]int, c.items+1)}
		for i := range cv.codes {
			cv.codes[i] = int8(rng.IntN(255) - 127)
		}
		for i := range cv.scales {
			cv.scales[i] = 0.01
		}
		for i := range cv.offsets {
			cv.offsets[i] = i * c.nv
		}
		e := &model.Embeddings{Dim: c.d, Offsets: cv.offsets, Vecs: make([]float32, c.items*c.nv*c.d)}
		fillNormal(rng, e.Vecs)
		benchCodes[shape], benchFloats[shape] = cv, e
	})
	return benchCodes[shape], benchFloats[shape]
}

// BenchmarkScoreCodes scores on int8 codes with each int8 kernel this
// machine runs (compare BenchmarkScoreFloats: the same shapes; the item
// vectors are made once a process, so -count=N repeats cheaply).
func BenchmarkScoreCodes(b *testing.B) {
	for i, c := range benchShapes {
		for _, k := range int8Kernels {
			b.Run(c.name+"/"+k.name, func(b *testing.B) {
				if !k.has || k == goInt8 {
					b.Skipf("the %s kernel does not run here or is too slow to time", k.name)
				}
				cv, _ := benchData(i)
				rng := rand.New(rand.NewPCG(6, 6))
				q := make([]float32, c.nq*c.d)
				fillNormal(rng, q)
				pq := packQueryFor(q, c.d, k)
				b.SetBytes(int64(len(cv.codes)))
				b.ResetTimer()
				for range b.N {
					if _, err := scoreCodes(context.Background(), cv, pq, model.MrSw, c.queryIsText); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestDots12f holds the float32 kernels (the 4-row tiles and the rows
// left over, 29 rows in all) to the portable loops, over spans that start
// inside a row, one and several groups of queries (more than one call of
// the tiled kernel takes), and checks one dot product by hand.
func TestDots12f(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, c := range []struct{ d, k0, span, ng int }{
		{8, 0, 8, 1}, {24, 0, 24, 1}, {256, 0, 256, 1}, {256, 64, 128, 1}, {1024, 256, 256, 1},
		{1024, 0, 1024, 1}, {776, 8, 760, 1}, {776, 8, 760, 3}, {64, 0, 64, 10}, {520, 0, 520, 2}, {2056, 0, 2056, 2}, {2056, 16, 2032, 1},
	} {
		d, nv, ng := c.d, 29, c.ng
		v := make([]float32, nv*d)
		q := make([]float32, ng*12*d)
		fillNormal(rng, v)
		fillNormal(rng, q)
		got := make([]float32, ng*nv*12)
		fillNormal(rng, got)
		want := slices.Clone(got)
		before := slices.Clone(got)
		dots12f(v[c.k0:], nv, d, q[c.k0*12:], ng, 12*d, c.span, got, nv*12, 12)
		dots12fGroupsGo(v[c.k0:], nv, d, q[c.k0*12:], ng, 12*d, c.span, want, nv*12, 12)
		for i := range got {
			if math.Abs(float64(got[i]-want[i])) > 1e-4*math.Sqrt(float64(d)) {
				t.Fatalf("%+v: element %d: kernel %v, loops %v", c, i, got[i], want[i])
			}
		}
		// The same into rows of all the groups' queries side by side.
		rows := make([]float32, nv*ng*12)
		dots12f(v[c.k0:], nv, d, q[c.k0*12:], ng, 12*d, c.span, rows, 12, ng*12)
		for g := range ng {
			for r := range nv {
				for w := range 12 {
					x, y := rows[r*ng*12+g*12+w], want[g*nv*12+r*12+w]-before[g*nv*12+r*12+w]
					if math.Abs(float64(x-y)) > 1e-4*math.Sqrt(float64(d)) {
						t.Fatalf("%+v: group %d row %d query %d in rows: kernel %v, loops %v", c, g, r, w, x, y)
					}
				}
			}
		}
		g, at := ng-1, (ng-1)*nv*12+3*12+5
		s := float64(before[at])
		for k := c.k0; k < c.k0+c.span; k++ {
			s += float64(v[3*d+k]) * float64(q[g*12*d+(k/8)*96+5*8+k%8])
		}
		if math.Abs(float64(want[at])-s) > 1e-3 {
			t.Fatalf("%+v: dot of row 3 and query 5 of group %d is %v, want %v", c, g, want[at], s)
		}
	}
}

// BenchmarkScoreFloats scores, exactly in float32, with the float32
// kernel in use (FloatKernel; GODEBUG=cpu.avx512f=off picks AVX2), the
// searches of BenchmarkScoreCodes.
func BenchmarkScoreFloats(b *testing.B) {
	for i, c := range benchShapes {
		b.Run(c.name+"/"+FloatKernel(), func(b *testing.B) {
			_, e := benchData(i)
			rng := rand.New(rand.NewPCG(10, 10))
			q := make([]float32, c.nq*c.d)
			fillNormal(rng, q)
			pq := packFloats(q, c.d)
			b.SetBytes(int64(4 * len(e.Vecs)))
			b.ResetTimer()
			for range b.N {
				if _, err := scoreFloats(context.Background(), e, pq, model.MrSw, c.queryIsText); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDots12f streams 5,000 x 36 float32 region vectors at d = 1024
// through the FMA kernel against 12 query vectors, on every core.
func BenchmarkDots12f(b *testing.B) {
	rng := rand.New(rand.NewPCG(8, 8))
	const nv, d = 5000 * 36, 1024
	v := make([]float32, nv*d)
	fillNormal(rng, v)
	q := make([]float32, 12*d)
	fillNormal(rng, q)
	out := make([]float32, nv*12)
	b.SetBytes(int64(4 * len(v)))
	b.ResetTimer()
	for range b.N {
		var wg sync.WaitGroup
		const block = 256
		next := make(chan int, nv/block+1)
		for lo := 0; lo < nv; lo += block {
			next <- lo
		}
		close(next)
		for range runtime.GOMAXPROCS(0) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for lo := range next {
					n := min(block, nv-lo)
					o := out[lo*12 : (lo+n)*12]
					clear(o)
					dots12f(v[lo*d:(lo+n)*d], n, d, q, 1, 0, d, o, n*12, 12)
				}
			}()
		}
		wg.Wait()
	}
}

// TestScoreFloatsMatchesScoreMatrix holds the fused float32 path to
// model.ScoreMatrix for every alignment scoring, both query sides, widths
// that are and are not multiples of 8 and that span several kernel spans,
// and queries of one, two and three groups of 12 vectors.
func TestScoreFloatsMatchesScoreMatrix(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, c := range []struct{ d, nq int }{{16, 5}, {20, 12}, {300, 13}, {600, 30}} {
		items := randomEmbeddings(rng, 150, 9, c.d)
		q := randomEmbeddings(rng, 1, c.nq, c.d)
		for q.Count(0) != c.nq {
			q = randomEmbeddings(rng, 1, c.nq, c.d)
		}
		pq := packFloats(q.Item(0), c.d)
		for _, s := range []model.Scoring{model.MrSw, model.MwSr, model.Symm, model.MrAvgw} {
			for _, queryIsText := range []bool{true, false} {
				var want []float32
				var err error
				if queryIsText {
					want, err = model.ScoreMatrix(context.Background(), items, q, s)
				} else {
					want, err = model.ScoreMatrix(context.Background(), q, items, s)
				}
				if err != nil {
					t.Fatal(err)
				}
				got, err := scoreFloats(context.Background(), items, pq, s, queryIsText)
				if err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if math.Abs(float64(got[i]-want[i])) > 1e-5*float64(c.nq+9) {
						t.Fatalf("d=%d nq=%d %s text query %v: item %d: %v, ScoreMatrix %v", c.d, c.nq, s, queryIsText, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestClaimedRanges: forRanges and forBlocks hand out every index exactly
// once, in ranges of the asked size (blocks of at most maxVectors vectors
// unless one item alone has more), and stop with the context's error.
func TestClaimedRanges(t *testing.T) {
	for _, c := range []struct{ n, step int }{{0, 1}, {1, 1}, {7, 3}, {100, 8}, {4097, 4096}} {
		var mu sync.Mutex
		seen := make([]int, c.n)
		err := forRanges(context.Background(), c.n, c.step, func() func(lo, hi int) {
			return func(lo, hi int) {
				if hi-lo > c.step || hi <= lo {
					t.Errorf("%+v: range [%d, %d)", c, lo, hi)
				}
				mu.Lock()
				for i := lo; i < hi; i++ {
					seen[i]++
				}
				mu.Unlock()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range seen {
			if k != 1 {
				t.Fatalf("%+v: index %d handed out %d times", c, i, k)
			}
		}
	}
	offsets := []int{0, 5, 6, 30, 31, 32, 40}
	var mu sync.Mutex
	seen := make([]int, len(offsets)-1)
	err := forBlocks(context.Background(), offsets, 8, func() func(lo, hi int) {
		return func(lo, hi int) {
			if hi-lo > 1 && offsets[hi]-offsets[lo] > 8 {
				t.Errorf("block [%d, %d) of %d vectors", lo, hi, offsets[hi]-offsets[lo])
			}
			mu.Lock()
			for i := lo; i < hi; i++ {
				seen[i]++
			}
			mu.Unlock()
		}
	})
	if err != nil || !slices.Equal(seen, []int{1, 1, 1, 1, 1, 1}) {
		t.Fatalf("forBlocks: %v, items handed out %v times", err, seen)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := forRanges(ctx, 100, 1, func() func(lo, hi int) { return func(int, int) {} }); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
}

package index

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/xmr-project/xmr/model"
)

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

// TestDots12 holds the kernel (AVX2 where the machine has it) to the
// portable loops on random codes.
func TestDots12(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, d := range []int{16, 48, 256} {
		nv := 37
		v := make([]int8, nv*d)
		for i := range v {
			v[i] = int8(rng.IntN(255) - 127)
		}
		q := make([]int16, 12*d)
		for i := range q {
			q[i] = int16(rng.IntN(255) - 127)
		}
		got := make([]int32, nv*12)
		want := make([]int32, nv*12)
		dots12(v, nv, q, d, got)
		dots12Go(v, nv, q, d, want)
		if !slices.Equal(got, want) {
			t.Fatalf("d=%d: kernel (asm %v) and loops differ", d, hasDotsAsm)
		}
		// The chunk-major layout: query w's element k sits at
		// q[(k/16)*192 + w*16 + k%16].
		var s int32
		for k := 0; k < d; k++ {
			s += int32(v[5*d+k]) * int32(q[(k/16)*192+7*16+k%16])
		}
		if want[5*12+7] != s {
			t.Fatalf("d=%d: dot of row 5 and query 7 is %d, want %d", d, want[5*12+7], s)
		}
	}
	t.Logf("assembly kernel in use: %v", hasDotsAsm)
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

// BenchmarkScoreCodes scores one 12-word query against 5,000 images of 36
// int8 region vectors at d = 1024 (compare model's
// BenchmarkScoreOneQuery, the float32 path).
func BenchmarkScoreCodes(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 5))
	const nImg, l1, d = 5000, 36, 1024
	cv := &codeView{cd: d, codes: make([]int8, nImg*l1*d), scales: make([]float32, nImg*l1), offsets: make([]int, nImg+1)}
	for i := range cv.codes {
		cv.codes[i] = int8(rng.IntN(255) - 127)
	}
	for i := range cv.scales {
		cv.scales[i] = 0.01
	}
	for i := range cv.offsets {
		cv.offsets[i] = i * l1
	}
	q := randomEmbeddings(rng, 1, 12, d)
	for q.Count(0) != 12 {
		q = randomEmbeddings(rng, 1, 12, d)
	}
	pq := packQuery(q.Vecs, d)
	b.SetBytes(int64(len(cv.codes)))
	b.ResetTimer()
	for range b.N {
		if _, err := scoreCodes(context.Background(), cv, pq, model.MrSw, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScoreCodesImageQuery scores one 36-region image against 25,000
// int8 captions of 12 words at d = 1024.
func BenchmarkScoreCodesImageQuery(b *testing.B) {
	rng := rand.New(rand.NewPCG(6, 6))
	const nCap, l2, d = 25000, 12, 1024
	cv := &codeView{cd: d, codes: make([]int8, nCap*l2*d), scales: make([]float32, nCap*l2), offsets: make([]int, nCap+1)}
	for i := range cv.codes {
		cv.codes[i] = int8(rng.IntN(255) - 127)
	}
	for i := range cv.scales {
		cv.scales[i] = 0.01
	}
	for i := range cv.offsets {
		cv.offsets[i] = i * l2
	}
	q := randomEmbeddings(rng, 1, 36, d)
	for q.Count(0) != 36 {
		q = randomEmbeddings(rng, 1, 36, d)
	}
	pq := packQuery(q.Vecs, d)
	b.SetBytes(int64(len(cv.codes)))
	b.ResetTimer()
	for range b.N {
		if _, err := scoreCodes(context.Background(), cv, pq, model.MrSw, false); err != nil {
			b.Fatal(err)
		}
	}
}

func TestDots12f(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, d := range []int{8, 24, 256} {
		nv := 29
		v := make([]float32, nv*d)
		q := make([]float32, 12*d)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		for i := range q {
			q[i] = float32(rng.NormFloat64())
		}
		got := make([]float32, nv*12)
		want := make([]float32, nv*12)
		dots12f(v, nv, q, d, got)
		dots12fGo(v, nv, q, d, want)
		for i := range got {
			if math.Abs(float64(got[i]-want[i])) > 1e-4*math.Sqrt(float64(d)) {
				t.Fatalf("d=%d: element %d: kernel %v, loops %v", d, i, got[i], want[i])
			}
		}
		var s float64
		for k := 0; k < d; k++ {
			s += float64(v[3*d+k]) * float64(q[(k/8)*96+5*8+k%8])
		}
		if math.Abs(float64(want[3*12+5])-s) > 1e-3 {
			t.Fatalf("d=%d: dot of row 3 and query 5 is %v, want %v", d, want[3*12+5], s)
		}
	}
}

// BenchmarkDots12f streams 5,000 x 36 float32 region vectors at d = 1024
// through the FMA kernel against 12 query vectors, on every core.
func BenchmarkDots12f(b *testing.B) {
	rng := rand.New(rand.NewPCG(8, 8))
	const nv, d = 5000 * 36, 1024
	v := make([]float32, nv*d)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	q := make([]float32, 12*d)
	for i := range q {
		q[i] = float32(rng.NormFloat64())
	}
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
					dots12f(v[lo*d:(lo+n)*d], n, q, d, out[lo*12:(lo+n)*12])
				}
			}()
		}
		wg.Wait()
	}
}

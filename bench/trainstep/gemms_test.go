package trainstep

import (
	"sync"
	"testing"

	"github.com/xmr-project/xmr/blas"
)

// gemmCall is the shape of one matrix product of a step.
type gemmCall struct {
	transA, transB bool
	m, n, k        int
	lda, ldb, ldc  int
}

// gemmRecorder is a blas.Impl that notes the shape of every product and
// computes it with the implementation it wraps.
type gemmRecorder struct {
	blas.Impl
	mu    sync.Mutex
	calls []gemmCall
}

func (r *gemmRecorder) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	r.mu.Lock()
	r.calls = append(r.calls, gemmCall{transA, transB, m, n, k, lda, ldb, ldc})
	r.mu.Unlock()
	r.Impl.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// BenchmarkGEMMs replays the matrix products of one training step of
// BenchmarkStep, alone and in the same order through blas.Sgemm, on
// buffers of their sizes: the time a step would take if everything but
// its products cost nothing. Against a peer's step time it bounds the
// speed-up that any work outside the products can give:
//
//	go test -run '^$' -bench GEMMs -benchtime 3x ./bench/trainstep/
func BenchmarkGEMMs(b *testing.B) {
	s := benchSetup(b)
	if err := s.step(0); err != nil { // warm-up, unrecorded
		b.Fatal(err)
	}
	rec := &gemmRecorder{Impl: blas.Current()}
	prev := blas.Use(rec)
	err := s.step(1)
	blas.Use(prev)
	if err != nil {
		b.Fatal(err)
	}
	var flops, small float64
	var na, nb, nc int
	size := func(trans bool, rows, cols, ld int) int { // elements spanned by op(X) of rows x cols
		if trans {
			rows, cols = cols, rows
		}
		return (rows-1)*ld + cols
	}
	for _, c := range rec.calls {
		f := 2 * float64(c.m) * float64(c.n) * float64(c.k)
		flops += f
		if f < 1e8 { // the per-image attention products, run side by side in a step, one by one here
			small += f
		}
		na = max(na, size(c.transA, c.m, c.k, c.lda))
		nb = max(nb, size(c.transB, c.k, c.n, c.ldb))
		nc = max(nc, size(false, c.m, c.n, c.ldc))
	}
	a, bb, cc := make([]float32, na), make([]float32, nb), make([]float32, nc)
	for i := range a {
		a[i] = float32(i%7) * 0.01
	}
	for i := range bb {
		bb[i] = float32(i%5) * 0.01
	}
	b.ResetTimer()
	for b.Loop() {
		for _, c := range rec.calls {
			blas.Sgemm(c.transA, c.transB, c.m, c.n, c.k, 1, a, c.lda, bb, c.ldb, 1, cc, c.ldc)
		}
	}
	b.ReportMetric(float64(len(rec.calls)), "products")
	b.ReportMetric(flops/1e12, "TFLOP/step")
	b.ReportMetric(100*small/flops, "%FLOP-in-small")
	b.ReportMetric(flops/1e9/(b.Elapsed().Seconds()/float64(b.N)), "GFLOP/s")
}

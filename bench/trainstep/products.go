package trainstep

import (
	"fmt"
	"sync"
	"time"

	"github.com/xmr-project/xmr/blas"
)

// product is the shape of one matrix product of a step.
type product struct {
	transA, transB bool
	m, n, k        int
	lda, ldb, ldc  int
	alpha, beta    float32
}

// flops is the product's multiply-adds, counted as 2 each.
func (p product) flops() float64 { return 2 * float64(p.m) * float64(p.n) * float64(p.k) }

// recorder is a blas.Impl that notes the shape of every product and
// computes it with the implementation it wraps.
type recorder struct {
	blas.Impl
	mu    sync.Mutex
	calls []product
}

// Sgemm notes the product's shape and computes it.
func (r *recorder) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	r.mu.Lock()
	r.calls = append(r.calls, product{transA, transB, m, n, k, lda, ldb, ldc, alpha, beta})
	r.mu.Unlock()
	r.Impl.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// products is the matrix products of one training step, to be computed
// again alone: the time a step would take if everything but its products
// cost nothing. Against a peer's step it bounds the ratio that any work
// outside the products could give.
type products struct {
	calls   []product
	flops   float64
	a, b, c []float32 // the replay's operands, made by the first replay
}

// record takes training step iter of s and returns its products. While it
// runs, every product goes through blas.Sgemm's path (products that the
// step would compute on one goroutine in turn are split like the others),
// so the step it takes should be a warm-up, not a timed one.
func record(s *setup, iter int) (*products, error) {
	rec := &recorder{Impl: blas.Current()}
	prev := blas.Use(rec)
	err := s.step(iter)
	blas.Use(prev)
	if err != nil {
		return nil, err
	}
	if len(rec.calls) == 0 {
		return nil, fmt.Errorf("step %d of %s computed no matrix product", iter, s.name)
	}
	p := &products{calls: rec.calls}
	for _, c := range p.calls {
		p.flops += c.flops()
	}
	return p, nil
}

// replay computes every product again, in the step's order, through
// blas.Sgemm (large products split over the cores as in a step) with the
// step's alpha and beta, on operands of the products' largest sizes, and
// returns the seconds it took. The first call makes the operands: read
// the process's peak memory before it.
func (p *products) replay() float64 {
	if p.c == nil {
		p.alloc()
	}
	start := time.Now()
	for _, c := range p.calls {
		p.compute(c)
	}
	return time.Since(start).Seconds()
}

// compute computes product c through blas.Sgemm on the replay's operands
// (made by alloc).
func (p *products) compute(c product) {
	blas.Sgemm(c.transA, c.transB, c.m, c.n, c.k, c.alpha, p.a, c.lda, p.b, c.ldb, c.beta, p.c, c.ldc)
}

// alloc makes operands that hold every product's A, B and C, with small
// values that stay finite however many products add into C.
func (p *products) alloc() {
	span := func(trans bool, rows, cols, ld int) int { // elements that op(X) of rows x cols spans
		if trans {
			rows, cols = cols, rows
		}
		return (rows-1)*ld + cols
	}
	var na, nb, nc int
	for _, c := range p.calls {
		na = max(na, span(c.transA, c.m, c.k, c.lda))
		nb = max(nb, span(c.transB, c.k, c.n, c.ldb))
		nc = max(nc, span(false, c.m, c.n, c.ldc))
	}
	p.a, p.b, p.c = make([]float32, na), make([]float32, nb), make([]float32, nc)
	for i := range p.a {
		p.a[i] = float32(i%7) * 0.01
	}
	for i := range p.b {
		p.b[i] = float32(i%5) * 0.01
	}
}

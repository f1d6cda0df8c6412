package trainstep

import (
	"testing"
)

// BenchmarkGEMMs replays the matrix products of one training step of
// BenchmarkStep, alone and in the same order through blas.Sgemm, on
// buffers of their sizes (what `xmr bench train-step` reports as
// "products alone"): the time a step would take if everything but its
// products cost nothing.
//
//	go test -run '^$' -bench GEMMs -benchtime 3x ./bench/trainstep/
func BenchmarkGEMMs(b *testing.B) {
	s := benchSetup(b)
	if err := s.step(0); err != nil { // warm-up, unrecorded
		b.Fatal(err)
	}
	p, err := record(s, 1)
	if err != nil {
		b.Fatal(err)
	}
	var small float64
	for _, c := range p.calls {
		if f := c.flops(); f < 1e8 { // the per-image attention products, run side by side in a step, one by one here
			small += f
		}
	}
	p.alloc()
	b.ResetTimer()
	for b.Loop() {
		p.replay()
	}
	b.ReportMetric(float64(len(p.calls)), "products")
	b.ReportMetric(p.flops/1e12, "TFLOP/step")
	b.ReportMetric(100*small/p.flops, "%FLOP-in-small")
	b.ReportMetric(p.flops/1e9/(b.Elapsed().Seconds()/float64(b.N)), "GFLOP/s")
}

// BenchmarkGEMMShapes replays the products of one step grouped by shape
// (transposes and sizes), one sub-benchmark per shape that holds at least
// 1% of the step's FLOP, largest first: the speed the step gets from
// blas.Sgemm on each kind of product, and each kind's share of the step.
//
//	go test -run '^$' -bench GEMMShapes -benchtime 3x ./bench/trainstep/
func BenchmarkGEMMShapes(b *testing.B) {
	s := benchSetup(b)
	if err := s.step(0); err != nil {
		b.Fatal(err)
	}
	p, err := record(s, 1)
	if err != nil {
		b.Fatal(err)
	}
	p.alloc()
	for _, g := range p.byShape() {
		if g.flops < 0.01*p.flops {
			continue
		}
		b.Run(g.name(), func(b *testing.B) {
			for b.Loop() {
				for range g.count {
					p.compute(g.shape)
				}
			}
			b.ReportMetric(float64(g.count), "products")
			b.ReportMetric(100*g.flops/p.flops, "%step-FLOP")
			b.ReportMetric(g.flops/1e9/(b.Elapsed().Seconds()/float64(b.N)), "GFLOP/s")
		})
	}
}

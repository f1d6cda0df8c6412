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

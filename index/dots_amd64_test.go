//go:build !purego

package index

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkDotsInCache measures the float32 kernels' arithmetic rate on
// rows and queries that stay in the L1 cache (4 rows, 12 queries, 256
// elements), one core: the register-tiled kernel that dots12f uses for
// whole groups of 4 rows, and the one-row kernel it uses for the rest.
// Their GFLOP/s, against the core's peak, say how much of a memory-bound
// scoring's time is arithmetic.
func BenchmarkDotsInCache(b *testing.B) {
	if !hasFMAAsm {
		b.Skip("no AVX2 and FMA")
	}
	rng := rand.New(rand.NewPCG(3, 3))
	const nv, d = 4, 256
	v := make([]float32, nv*d)
	q := make([]float32, 12*d)
	fillNormal(rng, v)
	fillNormal(rng, q)
	out := make([]float32, 48)
	for _, c := range []struct {
		name string
		fn   func()
	}{
		{"tiled", func() { dots4x12fAVX2(&v[0], d, &q[0], d, &out[0], 1, 0, 48, 12) }},
		{"rows", func() { dots12fAVX2(&v[0], nv, d, &q[0], d, &out[0]) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				c.fn()
			}
			b.ReportMetric(float64(2*nv*12*d)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

//go:build !purego

package index

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTiledKernels holds each 4-row float32 kernel that this machine can
// run to the portable loops: spans that start mid-row, several spans of
// TILESPAN, several groups, rows further apart than their length, and both
// output layouts (rows of one group's 12 results, or all groups side by
// side). TestDots12f covers the dispatch around them.
func TestTiledKernels(t *testing.T) {
	kernels := []struct {
		name string
		has  bool
		fn   func(v *float32, stride int, q *float32, dlen int, out *float32, groups, gstride, ostride, rstride int)
	}{
		{"avx2", hasFMAAsm, dots4x12fAVX2},
		{"avx512", hasAVX512Asm, dots4x12fAVX512},
	}
	rng := rand.New(rand.NewPCG(11, 11))
	for _, k := range kernels {
		t.Run(k.name, func(t *testing.T) {
			if !k.has {
				t.Skipf("this CPU cannot run the %s kernel", k.name)
			}
			for _, c := range []struct{ d, stride, k0, span, ng int }{
				{8, 8, 0, 8, 1}, {16, 24, 8, 8, 2}, {256, 256, 64, 128, 1}, {1024, 1024, 0, 1024, 3},
				{1032, 1040, 8, 1024, 1}, {2056, 2056, 0, 2056, 2}, {3000, 3000, 0, 2992, 1}, {64, 64, 0, 64, 10},
			} {
				v := make([]float32, 3*c.stride+c.d)
				q := make([]float32, c.ng*12*c.d)
				fillNormal(rng, v)
				fillNormal(rng, q)
				for _, layout := range []struct{ ostride, rstride int }{{4 * 12, 12}, {12, c.ng * 12}} {
					got := make([]float32, 4*c.ng*12)
					fillNormal(rng, got)
					want := slices.Clone(got)
					k.fn(&v[c.k0], c.stride, &q[c.k0*12], c.span, &got[0], c.ng, 12*c.d, layout.ostride, layout.rstride)
					dots12fGroupsGo(v[c.k0:], 4, c.stride, q[c.k0*12:], c.ng, 12*c.d, c.span, want, layout.ostride, layout.rstride)
					for i := range got {
						if math.Abs(float64(got[i]-want[i])) > 1e-4*math.Sqrt(float64(c.span)) {
							t.Fatalf("%+v, layout %+v: element %d: kernel %v, loops %v", c, layout, i, got[i], want[i])
						}
					}
				}
			}
		})
	}
}

// BenchmarkDotsInCache measures the float32 kernels' arithmetic rate on
// rows and queries that stay in the L1 cache (4 rows, 12 queries, 256
// elements), one core: the register-tiled kernels that dots12f uses for
// whole groups of 4 rows (AVX2, and AVX-512 where the CPU has it), and the
// one-row kernel it uses for the rest.
// Their GFLOP/s, against the core's peak, say how much of a memory-bound
// scoring's time is arithmetic.
func BenchmarkDotsInCache(b *testing.B) {
	if !hasFMAAsm {
		b.Skip("no AVX2 and FMA")
	}
	rng := rand.New(rand.NewPCG(3, 3))
	const nv, d = 4, 256
	// The tiled kernels fetch the 4 rows after theirs ahead, as in a block
	// of items; they must exist here too, for a prefetch of an unmapped
	// page costs a page walk each time (up to 15x slower, at random).
	v := make([]float32, 2*nv*d)
	q := make([]float32, 12*d)
	fillNormal(rng, v)
	fillNormal(rng, q)
	out := make([]float32, 48)
	for _, c := range []struct {
		name string
		fn   func()
	}{
		{"tiled", func() { dots4x12fAVX2(&v[0], d, &q[0], d, &out[0], 1, 0, 48, 12) }},
		{"tiled512", func() { dots4x12fAVX512(&v[0], d, &q[0], d, &out[0], 1, 0, 48, 12) }},
		{"rows", func() { dots12fAVX2(&v[0], nv, d, &q[0], d, &out[0]) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			if c.name == "tiled512" && !hasAVX512Asm {
				b.Skip("no AVX-512")
			}
			for range b.N {
				c.fn()
			}
			b.ReportMetric(float64(2*nv*12*d)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

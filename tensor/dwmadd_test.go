package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDwMaddKernels checks the depthwise convolution's multiply-adds (in
// AVX2 with FMA where the CPU has them) against their Go versions and a
// float64 sum, for lengths on and off the kernels' 8- and 16-float steps.
func TestDwMaddKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	for n := 0; n <= 70; n++ {
		a, b := [4][]float32{}, [4][]float32{}
		for k := range 4 {
			a[k], b[k] = vec(n+3), vec(n+5) // longer than dst, as the kernels allow
		}
		d0 := vec(n)
		for _, c := range []struct {
			name  string
			pairs int
			run   func(dst []float32)
			goRun func(dst []float32)
		}{
			{"dwMadd1", 1, func(d []float32) { dwMadd1(d, a[0], b[0]) }, func(d []float32) { dwMadd1Go(d, a[0], b[0]) }},
			{"dwMadd4", 4, func(d []float32) { dwMadd4(d, a[0], b[0], a[1], b[1], a[2], b[2], a[3], b[3]) },
				func(d []float32) { dwMadd4Go(d, a[0], b[0], a[1], b[1], a[2], b[2], a[3], b[3]) }},
		} {
			got, ref := append([]float32(nil), d0...), append([]float32(nil), d0...)
			c.run(got)
			c.goRun(ref)
			for i := range n {
				want := float64(d0[i])
				for k := range c.pairs {
					want += float64(a[k][i]) * float64(b[k][i])
				}
				if math.Abs(float64(got[i])-want) > 1e-5*(1+math.Abs(want)) || math.Abs(float64(ref[i])-want) > 1e-5*(1+math.Abs(want)) {
					t.Fatalf("%s n=%d [%d]: kernel %v, Go %v, want %v", c.name, n, i, got[i], ref[i], want)
				}
			}
		}
	}
}

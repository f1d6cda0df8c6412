package optim

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAdamKernelMatchesGo checks the update kernel in use (AVX2 where the
// CPU has it) against the portable loop bit for bit: plain Adam, Adam's L2
// term and AdamW's decay, with and without clearing the gradients, with a
// clip scale and without, over lengths with every tail.
func TestAdamKernelMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	updates := map[string]update{
		"plain":     {stepSize: 1e-3, bc2Sqrt: 0.3},
		"l2":        {stepSize: 2e-3, bc2Sqrt: 0.7, l2: 0.01},
		"decoupled": {stepSize: 1e-4, bc2Sqrt: 0.999, decayMul: 0.9999, decoupled: true},
	}
	for name, u := range updates {
		for _, n := range []int{1, 7, 8, 9, 64, 1003} {
			for _, zero := range []bool{false, true} {
				for _, scale := range []float32{1, 0.37} {
					p, g, m, v := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
					for i := range p {
						p[i] = float32(rng.NormFloat64())
						g[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(9)-6)))
						m[i] = float32(rng.NormFloat64() * 0.01)
						v[i] = float32(rng.Float64() * 1e-4)
					}
					g[0], v[0] = 0, 0 // the first step of a parameter: v = 0, denominator eps
					p2, g2, m2, v2 := slices.Clone(p), slices.Clone(g), slices.Clone(m), slices.Clone(v)
					adamKernel(p, g, m, v, &u, 0.9, 0.999, 0.1, 0.001, 1e-8, zero, scale)
					adamKernelGo(p2, g2, m2, v2, &u, 0.9, 0.999, 0.1, 0.001, 1e-8, zero, scale)
					for i := range p {
						if math.Float32bits(p[i]) != math.Float32bits(p2[i]) || math.Float32bits(m[i]) != math.Float32bits(m2[i]) ||
							math.Float32bits(v[i]) != math.Float32bits(v2[i]) || math.Float32bits(g[i]) != math.Float32bits(g2[i]) {
							t.Fatalf("%s n=%d zero=%v scale=%v: element %d: p %v m %v v %v g %v, want p %v m %v v %v g %v",
								name, n, zero, scale, i, p[i], m[i], v[i], g[i], p2[i], m2[i], v2[i], g2[i])
						}
					}
				}
			}
		}
	}
}

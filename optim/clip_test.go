package optim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSumSquares compares the blocked float32 sum of squares with a float64
// sum, for lengths around the block and lane sizes and for values whose
// squares overflow float32.
func TestSumSquares(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 7, 8, 9, 1023, 1024, 1025, 5000, 100003} {
		g := make([]float32, n)
		for i := range g {
			g[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()))
		}
		var want float64
		for _, v := range g {
			want += float64(v) * float64(v)
		}
		if got := sumSquares(g); math.Abs(got-want) > 1e-6*want {
			t.Errorf("n=%d: %g, want %g", n, got, want)
		}
	}
	g := []float32{3e20, 4e20, 1}
	if got, want := sumSquares(g), 25e40+1; math.Abs(got-want) > 1e-6*want {
		t.Errorf("beyond float32: %g, want %g", got, want)
	}
}

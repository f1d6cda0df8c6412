package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestGELUTable checks the tabulated GELU and its derivative against the
// float64 formulas over the whole float32 line that matters, the table's
// edges and beyond: within 3e-7 (times |x| beyond 1) plus float32 rounding of the result.
func TestGELUTable(t *testing.T) {
	exact := func(x float64) (f, d float64) {
		cdf := 0.5 * math.Erfc(-x/math.Sqrt2)
		pdf := math.Exp(-0.5*x*x) / math.Sqrt(2*math.Pi)
		return x * cdf, cdf + x*pdf
	}
	xs := []float32{0, -0, 1, -1, 1e-30, -1e-30, 7.99, 8, 8.01, -7.99, -8, -8.01, 20, -20, 1e6, -1e6}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		xs = append(xs, float32(rng.NormFloat64()*3))
	}
	for i := -8 * geluSteps; i <= 8*geluSteps; i++ {
		xs = append(xs, float32(float64(i)/geluSteps)) // the grid points
	}
	var worstF, worstD float64
	for _, x := range xs {
		f, d := exact(float64(x))
		ef := math.Abs(float64(geluF(x)) - f)
		ed := math.Abs(float64(geluGrad(x)) - d)
		tolF := 3e-7*max(1, math.Abs(float64(x))) + math.Abs(f)*0x1p-24
		tolD := 3e-7*max(1, math.Abs(float64(x))) + math.Abs(d)*0x1p-24
		if ef > tolF || ed > tolD {
			t.Errorf("x=%g: gelu %g (exact %g), gelu' %g (exact %g)", x, geluF(x), f, geluGrad(x), d)
		}
		worstF, worstD = max(worstF, ef), max(worstD, ed)
	}
	t.Logf("largest error: gelu %.2g, gelu' %.2g", worstF, worstD)
	nan := float32(math.NaN())
	if !math.IsNaN(float64(geluF(nan))) || !math.IsNaN(float64(geluGrad(nan))) {
		t.Errorf("NaN in gave gelu %v, gelu' %v", geluF(nan), geluGrad(nan))
	}
	if v := geluF(float32(math.Inf(1))); !math.IsInf(float64(v), 1) {
		t.Errorf("gelu(+Inf) = %v", v)
	}
}

func BenchmarkGELU(b *testing.B) {
	x := RandN(rand.New(rand.NewPCG(1, 1)), 560, 3072)
	x.requiresGrad = true
	tp := NewTape()
	g := make([]float32, len(x.Data))
	for b.Loop() {
		y := tp.GELU(x)
		tp.BackwardWithGrad(y, g)
		tp.Reset()
		x.Grad = nil
	}
}

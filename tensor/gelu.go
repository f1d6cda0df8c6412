package tensor

import "math"

// GELU's normal CDF and density by table: the exact GELU (x * Phi(x), as
// PyTorch's default nn.GELU) through math.Erf and math.Exp cost 30-60 ns
// an element, a tenth of the non-GEMM time of a paper-size BERT training
// step. Phi and phi are tabulated on a grid of step 1/geluSteps over
// [-geluRange, geluRange] with their slopes (phi and -x phi) and read back
// by cubic Hermite interpolation in float32: within 3e-7 of the exact
// values (a few units in float32's last place near 1), at 7-10 ns an
// element. Outside the range x is clamped: Phi(-8) is 6e-16, so GELU there
// is off by less than 5e-15.

const (
	geluRange = 8
	geluSteps = 32                        // grid points per unit
	geluN     = 2*geluRange*geluSteps + 1 // grid points
)

// geluCDF and geluPDF hold Phi and phi at the grid points
// x_i = -geluRange + i/geluSteps; geluDCDF and geluDPDF their slopes there
// (phi and -x phi) per cell, the unit of hermite's t.
var geluCDF, geluPDF, geluDCDF, geluDPDF [geluN]float32

func init() {
	for i := range geluCDF {
		x := -geluRange + float64(i)/geluSteps
		pdf := math.Exp(-0.5*x*x) / math.Sqrt(2*math.Pi)
		geluCDF[i] = float32(0.5 * math.Erfc(-x/math.Sqrt2))
		geluPDF[i] = float32(pdf)
		geluDCDF[i] = float32(pdf / geluSteps)
		geluDPDF[i] = float32(-x * pdf / geluSteps)
	}
}

// geluCell returns x's cell i of the table and the offset within it, t in
// [0, 1], with x clamped to the table's range (NaN counts as below it, so
// that it propagates through the products with x). The arithmetic is
// float32 throughout: Go's scalar float64 conversions chain each element
// to the one before (a false dependency on the destination register),
// which made a float64 version three times slower.
func geluCell(x float32) (i int, t float32) {
	if !(x > -geluRange) {
		x = -geluRange
	}
	if x > geluRange {
		x = geluRange
	}
	u := (x + geluRange) * geluSteps
	i = min(int(u), geluN-2)
	return i, u - float32(i)
}

// hermite returns the cubic through (0, f0) and (1, f1) with slopes d0 and
// d1 at t.
func hermite(f0, f1, d0, d1, t float32) float32 {
	t2 := t * t
	t3 := t2 * t
	return f0 + (f1-f0)*(3*t2-2*t3) + d0*(t3-2*t2+t) + d1*(t3-t2)
}

// geluF is GELU's forward, x * Phi(x), shared with LinearGELU.
func geluF(x float32) float32 {
	i, t := geluCell(x)
	return x * hermite(geluCDF[i], geluCDF[i+1], geluDCDF[i], geluDCDF[i+1], t)
}

// geluGrad is GELU's derivative, Phi(x) + x * phi(x), shared with
// LinearGELU.
func geluGrad(x float32) float32 {
	i, t := geluCell(x)
	cdf := hermite(geluCDF[i], geluCDF[i+1], geluDCDF[i], geluDCDF[i+1], t)
	pdf := hermite(geluPDF[i], geluPDF[i+1], geluDPDF[i], geluDPDF[i+1], t)
	return cdf + x*pdf
}

// GELU returns x * Phi(x) with the exact normal CDF, as PyTorch's default
// nn.GELU.
func (tp *Tape) GELU(a *Tensor) *Tensor {
	out := tp.newTensor(a.Shape)
	ad, od := a.Data, out.Data
	parallelFor(len(od), 8, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			od[i] = geluF(ad[i])
		}
	})
	if tp.needs(a) {
		tp.record(out, func(g []float32) {
			ga := tp.grad(a)
			parallelFor(len(g), 16, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					ga[i] += g[i] * geluGrad(ad[i])
				}
			})
		})
	}
	return out
}

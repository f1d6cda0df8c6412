package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// GradCheckOptions tunes GradCheck. The zero value uses the defaults.
type GradCheckOptions struct {
	Eps  float64 // finite-difference step (default 1e-2)
	ATol float64 // absolute tolerance (default 1e-2)
	RTol float64 // relative tolerance (default 1e-2)
	// MaxPerInput bounds the elements checked per input (default 64,
	// sampled at random beyond that).
	MaxPerInput int
	Seed        uint64
}

// GradCheck compares the gradients that Backward computes for f with central
// finite differences. The scalar checked is L = sum_i w_i * f(x)_i with fixed
// random weights w, accumulated in float64, so every output element and
// every input element that is sampled takes part. Elements where the
// function is not differentiable within Eps (a relu or max switching) are
// recognised by disagreeing difference quotients at Eps and Eps/4 and
// skipped, up to a quarter of those checked. f must be deterministic
// (seed any dropout inside f) and must build its result from inputs on the
// tape it is given. It returns an error naming the first input and element
// whose gradients disagree.
func GradCheck(f func(tp *Tape) *Tensor, inputs []*Tensor, o GradCheckOptions) error {
	if o.Eps == 0 {
		o.Eps = 1e-2
	}
	if o.ATol == 0 {
		o.ATol = 1e-2
	}
	if o.RTol == 0 {
		o.RTol = 1e-2
	}
	if o.MaxPerInput == 0 {
		o.MaxPerInput = 64
	}
	rng := rand.New(rand.NewPCG(o.Seed, 17))
	for _, in := range inputs {
		in.SetRequiresGrad(true)
		in.Grad = nil
	}
	tp := NewTape()
	out := f(tp)
	w := make([]float32, len(out.Data))
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	tp.BackwardWithGrad(out, w)
	analytic := make([][]float32, len(inputs))
	for i, in := range inputs {
		if in.Grad == nil {
			analytic[i] = make([]float32, len(in.Data))
		} else {
			analytic[i] = append([]float32(nil), in.Grad...)
		}
	}
	tp.Reset()
	loss := func() float64 {
		t := NewTape()
		y := f(t)
		var s float64
		for i, v := range y.Data {
			s += float64(w[i]) * float64(v)
		}
		t.Reset()
		return s
	}
	for ii, in := range inputs {
		idx := make([]int, len(in.Data))
		for i := range idx {
			idx[i] = i
		}
		if len(idx) > o.MaxPerInput {
			rng.Shuffle(len(idx), func(a, b int) { idx[a], idx[b] = idx[b], idx[a] })
			idx = idx[:o.MaxPerInput]
		}
		kinks := 0
		for _, j := range idx {
			num := central(in, j, o.Eps, loss)
			an := float64(analytic[ii][j])
			close := func(a, b float64) bool { return math.Abs(a-b) <= o.ATol+o.RTol*math.Max(math.Abs(a), math.Abs(b)) }
			if close(num, an) {
				continue
			}
			// A kink (relu, max, hinge) within eps of the point makes the
			// difference quotient meaningless there: then the estimates at
			// eps and eps/4 disagree. Skip such points, but not too many.
			if half := central(in, j, o.Eps/4, loss); !close(num, half) {
				kinks++
				if kinks > max(2, len(idx)/4) {
					return fmt.Errorf("input %d (shape %v): %d of %d checked elements sit on non-differentiable points; move the inputs away from kinks", ii, in.Shape, kinks, len(idx))
				}
				continue
			}
			return fmt.Errorf("input %d (shape %v) element %d: analytic gradient %.6g, numeric %.6g", ii, in.Shape, j, an, num)
		}
	}
	for _, in := range inputs {
		in.Grad = nil
	}
	return nil
}

// central is the central difference quotient of loss in element j of in.
func central(in *Tensor, j int, eps float64, loss func() float64) float64 {
	orig := in.Data[j]
	in.Data[j] = orig + float32(eps)
	lp := loss()
	in.Data[j] = orig - float32(eps)
	lm := loss()
	in.Data[j] = orig
	// The actual step after rounding to float32.
	step := float64(orig+float32(eps)) - float64(orig-float32(eps))
	return (lp - lm) / step
}

// RandN returns a tensor of the given shape with standard normal entries
// from rng (for tests and initialisation).
func RandN(rng *rand.Rand, shape ...int) *Tensor {
	t := New(shape...)
	for i := range t.Data {
		t.Data[i] = float32(rng.NormFloat64())
	}
	return t
}

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
// every input element that is sampled takes part. f must be deterministic
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
		for _, j := range idx {
			orig := in.Data[j]
			in.Data[j] = orig + float32(o.Eps)
			lp := loss()
			in.Data[j] = orig - float32(o.Eps)
			lm := loss()
			in.Data[j] = orig
			num := (lp - lm) / (2 * o.Eps)
			an := float64(analytic[ii][j])
			if math.Abs(num-an) > o.ATol+o.RTol*math.Max(math.Abs(num), math.Abs(an)) {
				return fmt.Errorf("input %d (shape %v) element %d: analytic gradient %.6g, numeric %.6g", ii, in.Shape, j, an, num)
			}
		}
	}
	for _, in := range inputs {
		in.Grad = nil
	}
	return nil
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

// Package nn holds xmr's neural-network layers: linear maps, layer norm,
// embeddings, multi-head attention, post-norm transformer encoder and decoder
// layers, GRU and LSTM, and 1-d convolution.
//
// Each layer is a struct of parameter tensors with a constructor that
// initialises them as PyTorch does, a Forward method that runs on a
// *tensor.Tape (nil for no-grad inference), and a Params method that lists
// its parameters under PyTorch's state_dict names, so that checkpoints of the
// reference implementations load by name.
//
// Bad input shapes are programming errors: Forward panics with a
// *tensor.ShapeError naming the shapes involved, which tensor.Try turns into
// an error at entry points that take user input.
package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/xmr-project/xmr/tensor"
)

// Named is a parameter with its PyTorch-style dotted name.
type Named struct {
	Name string
	T    *tensor.Tensor
}

// Prefix prepends prefix+"." to every name.
func Prefix(prefix string, ps []Named) []Named {
	out := make([]Named, len(ps))
	for i, p := range ps {
		out[i] = Named{Name: prefix + "." + p.Name, T: p.T}
	}
	return out
}

// Tensors returns the tensors of ps.
func Tensors(ps []Named) []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(ps))
	for i, p := range ps {
		out[i] = p.T
	}
	return out
}

// Activation selects the non-linearity of a feed-forward block.
type Activation int

const (
	// ReLU is max(0, x).
	ReLU Activation = iota
	// GELU is x * Phi(x) with the exact normal CDF (PyTorch's "gelu").
	GELU
)

// String returns PyTorch's name of the activation.
func (a Activation) String() string {
	switch a {
	case ReLU:
		return "relu"
	case GELU:
		return "gelu"
	}
	return fmt.Sprintf("Activation(%d)", int(a))
}

// Apply applies the activation to x.
func (a Activation) Apply(tp *tensor.Tape, x *tensor.Tensor) *tensor.Tensor {
	if a == GELU {
		return tp.GELU(x)
	}
	return tp.ReLU(x)
}

// Uniform returns a trainable tensor with entries drawn from U(-bound, bound).
func Uniform(rng *rand.Rand, bound float64, shape ...int) *tensor.Tensor {
	t := tensor.New(shape...)
	for i := range t.Data {
		t.Data[i] = float32((2*rng.Float64() - 1) * bound)
	}
	return t.SetRequiresGrad(true)
}

// kaimingBound is the bound of PyTorch's default kaiming_uniform_(a=sqrt(5))
// initialisation of Linear and Conv weights (and of their biases):
// 1/sqrt(fan_in).
func kaimingBound(fanIn int) float64 {
	if fanIn <= 0 {
		return 0
	}
	return 1 / math.Sqrt(float64(fanIn))
}

// zeros returns a trainable zero tensor.
func zeros(shape ...int) *tensor.Tensor { return tensor.New(shape...).SetRequiresGrad(true) }

// shapeErr panics with a *tensor.ShapeError for layer op.
func shapeErr(op, format string, args ...any) {
	panic(&tensor.ShapeError{Op: op, Msg: fmt.Sprintf(format, args...)})
}

package nn

import (
	"math/rand/v2"

	"github.com/xmr-project/xmr/tensor"
)

// Conv1d is torch.nn.Conv1d (stride 1, zero padding) in the channels-last
// layout: it maps x (B, T, In) to (B, T+2*Padding-K+1, Out).
type Conv1d struct {
	W       *tensor.Tensor // (Out, In, K), as PyTorch stores it
	B       *tensor.Tensor // (Out), or nil
	Padding int
}

// NewConv1d returns a convolution initialised as PyTorch's: weight and bias
// from U(-1/sqrt(in*kernel), 1/sqrt(in*kernel)).
func NewConv1d(rng *rand.Rand, in, out, kernel, padding int) *Conv1d {
	bound := kaimingBound(in * kernel)
	return &Conv1d{W: Uniform(rng, bound, out, in, kernel), B: Uniform(rng, bound, out), Padding: padding}
}

// Forward convolves x (B, T, In) over time.
func (c *Conv1d) Forward(tp *tensor.Tape, x *tensor.Tensor) *tensor.Tensor {
	return tp.Conv1d(x, c.W, c.B, c.Padding)
}

// Params returns "weight" and, with a bias, "bias".
func (c *Conv1d) Params() []Named {
	ps := []Named{{"weight", c.W}}
	if c.B != nil {
		ps = append(ps, Named{"bias", c.B})
	}
	return ps
}

package nn

import (
	"math/rand/v2"

	"github.com/xmr-project/xmr/tensor"
)

// Linear is torch.nn.Linear: y = x W^T + b.
type Linear struct {
	W *tensor.Tensor // (Out, In), as PyTorch stores it
	B *tensor.Tensor // (Out), or nil without bias
}

// NewLinear returns a Linear layer initialised as PyTorch's: W and B from
// U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform with a = sqrt(5)).
func NewLinear(rng *rand.Rand, in, out int, bias bool) *Linear {
	bound := kaimingBound(in)
	l := &Linear{W: Uniform(rng, bound, out, in)}
	if bias {
		l.B = Uniform(rng, bound, out)
	}
	return l
}

// In returns the input width.
func (l *Linear) In() int { return l.W.Shape[1] }

// Out returns the output width.
func (l *Linear) Out() int { return l.W.Shape[0] }

// Forward maps x (..., In) to (..., Out).
func (l *Linear) Forward(tp *tensor.Tape, x *tensor.Tensor) *tensor.Tensor {
	l.check(x)
	return tp.Linear(x, l.W, l.B)
}

// ForwardAct returns act(Forward(x)), fused into one pass.
func (l *Linear) ForwardAct(tp *tensor.Tape, x *tensor.Tensor, act Activation) *tensor.Tensor {
	l.check(x)
	if act == GELU {
		return tp.LinearGELU(x, l.W, l.B)
	}
	return tp.LinearReLU(x, l.W, l.B)
}

func (l *Linear) check(x *tensor.Tensor) {
	if x.Dims() < 1 || x.Dim(-1) != l.In() {
		shapeErr("Linear", "input %v does not fit weight %v (want (..., %d))", x.Shape, l.W.Shape, l.In())
	}
}

// Params returns "weight" and, with a bias, "bias".
func (l *Linear) Params() []Named {
	ps := []Named{{"weight", l.W}}
	if l.B != nil {
		ps = append(ps, Named{"bias", l.B})
	}
	return ps
}

// LayerNorm is torch.nn.LayerNorm over the last dimension.
type LayerNorm struct {
	Gamma *tensor.Tensor // (D), initialised to ones
	Beta  *tensor.Tensor // (D), initialised to zeros
	Eps   float32        // 1e-5 in PyTorch's default, 1e-12 in BERT
}

// NewLayerNorm returns a LayerNorm over d features with gamma = 1, beta = 0.
func NewLayerNorm(d int, eps float32) *LayerNorm {
	return &LayerNorm{Gamma: tensor.Full(1, d).SetRequiresGrad(true), Beta: zeros(d), Eps: eps}
}

// Forward normalises x (..., D) over its last dimension.
func (l *LayerNorm) Forward(tp *tensor.Tape, x *tensor.Tensor) *tensor.Tensor {
	if x.Dims() < 1 || x.Dim(-1) != l.Gamma.Numel() {
		shapeErr("LayerNorm", "input %v does not fit weight %v (want (..., %d))", x.Shape, l.Gamma.Shape, l.Gamma.Numel())
	}
	return tp.LayerNorm(x, l.Gamma, l.Beta, l.Eps)
}

// Params returns "weight" (gamma) and "bias" (beta).
func (l *LayerNorm) Params() []Named { return []Named{{"weight", l.Gamma}, {"bias", l.Beta}} }

// Embedding is torch.nn.Embedding: a lookup table of vectors.
type Embedding struct {
	W *tensor.Tensor // (V, D)
}

// NewEmbedding returns a vocab x dim table drawn from N(0, 1), as PyTorch.
func NewEmbedding(rng *rand.Rand, vocab, dim int) *Embedding {
	return &Embedding{W: tensor.RandN(rng, vocab, dim).SetRequiresGrad(true)}
}

// Forward looks up ids and shapes the result (shape..., D); with no shape it
// is (len(ids), D). An id outside the vocabulary is a *tensor.ShapeError.
func (e *Embedding) Forward(tp *tensor.Tape, ids []int32, shape ...int) *tensor.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	if len(shape) > 0 && n != len(ids) {
		shapeErr("Embedding", "%d ids do not fill shape %v", len(ids), shape)
	}
	out := tp.Embedding(e.W, ids) // (N, D)
	if len(shape) == 0 {
		return out
	}
	return tp.Reshape(out, append(append([]int(nil), shape...), e.W.Shape[1])...)
}

// Params returns "weight".
func (e *Embedding) Params() []Named { return []Named{{"weight", e.W}} }

package nn

import (
	"math"
	"math/rand/v2"

	"github.com/xmr-project/xmr/tensor"
)

// MultiheadAttention is torch.nn.MultiheadAttention with batch_first=True
// and equal query, key and value widths: the three input projections are
// stacked in one (3D, D) matrix, the heads attend in parallel, and an output
// projection mixes them.
type MultiheadAttention struct {
	InProjW *tensor.Tensor // (3D, D): rows [0,D) query, [D,2D) key, [2D,3D) value
	InProjB *tensor.Tensor // (3D)
	OutProj *Linear        // D -> D
	Heads   int
	// Dropout is the probability of dropping an attention weight in
	// training.
	Dropout float32
}

// NewMultiheadAttention returns an attention layer of width d split into
// heads, initialised as PyTorch's: in_proj_weight xavier_uniform, in_proj_bias
// zeros, out_proj a default Linear with a zero bias.
func NewMultiheadAttention(rng *rand.Rand, d, heads int, dropout float32) *MultiheadAttention {
	if heads <= 0 || d%heads != 0 {
		shapeErr("MultiheadAttention", "width %d does not split into %d heads", d, heads)
	}
	// xavier_uniform on (3D, D): fan_in D, fan_out 3D.
	w := Uniform(rng, math.Sqrt(6/float64(4*d)), 3*d, d)
	out := NewLinear(rng, d, d, true)
	clear(out.B.Data)
	return &MultiheadAttention{InProjW: w, InProjB: zeros(3 * d), OutProj: out, Heads: heads, Dropout: dropout}
}

// Dim returns the model width D.
func (m *MultiheadAttention) Dim() int { return m.InProjW.Shape[1] }

// Forward attends from q (B, Tq, D) to k and v (B, Tk, D) and returns
// (B, Tq, D). keyValid (B, Tk) has 1 for real keys and 0 for padding (the
// opposite polarity of PyTorch's key_padding_mask) and may be nil; causal
// hides later keys (Tq == Tk). Passing the same tensor as q, k and v
// (self-attention) projects all three in one GEMM; the same tensor as k and v
// (cross-attention over a memory) projects keys and values together.
func (m *MultiheadAttention) Forward(tp *tensor.Tape, q, k, v, keyValid *tensor.Tensor, causal bool) *tensor.Tensor {
	d := m.Dim()
	switch {
	case q.Dims() != 3 || k.Dims() != 3 || v.Dims() != 3 || q.Shape[2] != d || k.Shape[2] != d || v.Shape[2] != d:
		shapeErr("MultiheadAttention", "query %v, key %v, value %v must be (B, T, %d)", q.Shape, k.Shape, v.Shape, d)
	case k.Shape[0] != q.Shape[0] || v.Shape[0] != q.Shape[0] || k.Shape[1] != v.Shape[1]:
		shapeErr("MultiheadAttention", "query %v, key %v, value %v disagree in batch or key length", q.Shape, k.Shape, v.Shape)
	case keyValid != nil && (keyValid.Dims() != 2 || keyValid.Shape[0] != k.Shape[0] || keyValid.Shape[1] != k.Shape[1]):
		shapeErr("MultiheadAttention", "key mask %v does not fit key %v (want (%d, %d))", keyValid.Shape, k.Shape, k.Shape[0], k.Shape[1])
	case causal && q.Shape[1] != k.Shape[1]:
		shapeErr("MultiheadAttention", "causal attention needs query %v and key %v of one length", q.Shape, k.Shape)
	}
	o := tensor.AttentionOptions{Heads: m.Heads, KeyValid: keyValid, Causal: causal, Dropout: m.Dropout, Dim: d}
	var ctx *tensor.Tensor // (B, Tq, D), heads side by side
	switch {
	case q == k && k == v:
		qkv := tp.Linear(q, m.InProjW, m.InProjB) // (B, T, 3D)
		o.KOff, o.VOff = d, 2*d
		ctx = tp.Attention(qkv, qkv, qkv, o)
	case k == v:
		wq, bq := m.proj(tp, 0, 1)
		wkv, bkv := m.proj(tp, 1, 2)
		qp := tp.Linear(q, wq, bq)   // (B, Tq, D)
		kv := tp.Linear(k, wkv, bkv) // (B, Tk, 2D)
		o.VOff = d
		ctx = tp.Attention(qp, kv, kv, o)
	default:
		wq, bq := m.proj(tp, 0, 1)
		wk, bk := m.proj(tp, 1, 1)
		wv, bv := m.proj(tp, 2, 1)
		ctx = tp.Attention(tp.Linear(q, wq, bq), tp.Linear(k, wk, bk), tp.Linear(v, wv, bv), o)
	}
	return m.OutProj.Forward(tp, ctx) // (B, Tq, D)
}

// proj returns rows [first*D, (first+n)*D) of the input projection and its
// bias: a view without a tape or gradients, a recorded slice otherwise.
func (m *MultiheadAttention) proj(tp *tensor.Tape, first, n int) (w, b *tensor.Tensor) {
	d := m.Dim()
	if tp == nil || !m.InProjW.RequiresGrad() && !m.InProjB.RequiresGrad() {
		w = tensor.FromData(m.InProjW.Data[first*d*d:(first+n)*d*d], n*d, d)
		b = tensor.FromData(m.InProjB.Data[first*d:(first+n)*d], n*d)
		return w, b
	}
	return tp.Narrow(m.InProjW, 0, first*d, n*d), tp.Narrow(m.InProjB, 0, first*d, n*d)
}

// Params returns "in_proj_weight", "in_proj_bias", "out_proj.weight" and
// "out_proj.bias".
func (m *MultiheadAttention) Params() []Named {
	return append([]Named{{"in_proj_weight", m.InProjW}, {"in_proj_bias", m.InProjB}}, Prefix("out_proj", m.OutProj.Params())...)
}

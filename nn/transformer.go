package nn

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/xmr-project/xmr/tensor"
)

// TransformerEncoderLayer is torch.nn.TransformerEncoderLayer with
// batch_first=True and norm_first=False (post-norm):
//
//	x = norm1(x + dropout1(self_attn(x, x, x)))
//	x = norm2(x + dropout2(linear2(dropout(act(linear1(x))))))
type TransformerEncoderLayer struct {
	SelfAttn         *MultiheadAttention
	Linear1, Linear2 *Linear    // D -> FF -> D
	Norm1, Norm2     *LayerNorm // eps 1e-5
	Dropout          float32
	Act              Activation
}

// NewTransformerEncoderLayer returns a layer of width d with heads attention
// heads and a feed-forward block of width ff, initialised as PyTorch's.
func NewTransformerEncoderLayer(rng *rand.Rand, d, heads, ff int, dropout float32, act Activation) *TransformerEncoderLayer {
	return &TransformerEncoderLayer{
		SelfAttn: NewMultiheadAttention(rng, d, heads, dropout),
		Linear1:  NewLinear(rng, d, ff, true),
		Linear2:  NewLinear(rng, ff, d, true),
		Norm1:    NewLayerNorm(d, 1e-5),
		Norm2:    NewLayerNorm(d, 1e-5),
		Dropout:  dropout,
		Act:      act,
	}
}

// Forward maps x (B, T, D) to (B, T, D); keyValid (B, T) marks real tokens
// with 1 and padding with 0, or is nil.
func (l *TransformerEncoderLayer) Forward(tp *tensor.Tape, x, keyValid *tensor.Tensor) *tensor.Tensor {
	return l.attend(tp, x, x, keyValid)
}

// attend is the layer with its attention's keys and values taken from kv
// (B, Tk, D), whose real entries kvValid (B, Tk) marks, or nil.
func (l *TransformerEncoderLayer) attend(tp *tensor.Tape, x, kv, kvValid *tensor.Tensor) *tensor.Tensor {
	a := l.SelfAttn.Forward(tp, x, kv, kv, kvValid, false)  // (B, T, D)
	x = l.Norm1.Forward(tp, tp.AddDropout(x, a, l.Dropout)) // (B, T, D)
	return l.Norm2.Forward(tp, tp.AddDropout(x, feedForward(tp, x, l.Linear1, l.Linear2, l.Act, l.Dropout), l.Dropout))
}

// feedForward returns linear2(dropout(act(linear1(x)))).
func feedForward(tp *tensor.Tape, x *tensor.Tensor, l1, l2 *Linear, act Activation, p float32) *tensor.Tensor {
	h := l1.ForwardAct(tp, x, act) // (B, T, FF)
	h = tp.Dropout(h, p)
	return l2.Forward(tp, h) // (B, T, D)
}

// Params returns "self_attn.*", "linear1.*", "linear2.*", "norm1.*" and
// "norm2.*".
func (l *TransformerEncoderLayer) Params() []Named {
	var ps []Named
	ps = append(ps, Prefix("self_attn", l.SelfAttn.Params())...)
	ps = append(ps, Prefix("linear1", l.Linear1.Params())...)
	ps = append(ps, Prefix("linear2", l.Linear2.Params())...)
	ps = append(ps, Prefix("norm1", l.Norm1.Params())...)
	return append(ps, Prefix("norm2", l.Norm2.Params())...)
}

// TransformerEncoder is torch.nn.TransformerEncoder without a final norm: a
// stack of encoder layers.
type TransformerEncoder struct {
	Layers []*TransformerEncoderLayer
}

// NewTransformerEncoder returns n encoder layers. Each layer draws its own
// initial weights (PyTorch copies one layer's initial weights n times).
func NewTransformerEncoder(rng *rand.Rand, n, d, heads, ff int, dropout float32, act Activation) *TransformerEncoder {
	e := &TransformerEncoder{}
	for i := 0; i < n; i++ {
		e.Layers = append(e.Layers, NewTransformerEncoderLayer(rng, d, heads, ff, dropout, act))
	}
	return e
}

// Forward runs x (B, T, D) through every layer with the same key mask.
func (e *TransformerEncoder) Forward(tp *tensor.Tape, x, keyValid *tensor.Tensor) *tensor.Tensor {
	for _, l := range e.Layers {
		x = l.Forward(tp, x, keyValid)
	}
	return x
}

// Params returns "layers.0.self_attn.in_proj_weight" and so on.
func (e *TransformerEncoder) Params() []Named {
	var ps []Named
	for i, l := range e.Layers {
		ps = append(ps, Prefix(fmt.Sprintf("layers.%d", i), l.Params())...)
	}
	return ps
}

// TransformerDecoderLayer is torch.nn.TransformerDecoderLayer with
// batch_first=True and norm_first=False:
//
//	x = norm1(x + dropout1(self_attn(x, x, x, causal, tgt padding)))
//	x = norm2(x + dropout2(multihead_attn(x, mem, mem, memory padding)))
//	x = norm3(x + dropout3(linear2(dropout(act(linear1(x))))))
type TransformerDecoderLayer struct {
	SelfAttn            *MultiheadAttention
	CrossAttn           *MultiheadAttention // "multihead_attn" in PyTorch
	Linear1, Linear2    *Linear
	Norm1, Norm2, Norm3 *LayerNorm
	Dropout             float32
	Act                 Activation
}

// NewTransformerDecoderLayer returns a decoder layer initialised as
// PyTorch's.
func NewTransformerDecoderLayer(rng *rand.Rand, d, heads, ff int, dropout float32, act Activation) *TransformerDecoderLayer {
	return &TransformerDecoderLayer{
		SelfAttn:  NewMultiheadAttention(rng, d, heads, dropout),
		CrossAttn: NewMultiheadAttention(rng, d, heads, dropout),
		Linear1:   NewLinear(rng, d, ff, true),
		Linear2:   NewLinear(rng, ff, d, true),
		Norm1:     NewLayerNorm(d, 1e-5),
		Norm2:     NewLayerNorm(d, 1e-5),
		Norm3:     NewLayerNorm(d, 1e-5),
		Dropout:   dropout,
		Act:       act,
	}
}

// Forward maps tgt (B, Tt, D) attending causally to itself and to memory
// (B, Tm, D) to (B, Tt, D). tgtValid (B, Tt) and memValid (B, Tm) mark real
// tokens with 1 and padding with 0; either may be nil.
func (l *TransformerDecoderLayer) Forward(tp *tensor.Tape, tgt, memory, tgtValid, memValid *tensor.Tensor) *tensor.Tensor {
	x := tgt
	sa := l.SelfAttn.Forward(tp, x, x, x, tgtValid, true)             // (B, Tt, D)
	x = l.Norm1.Forward(tp, tp.AddDropout(x, sa, l.Dropout))          // (B, Tt, D)
	ca := l.CrossAttn.Forward(tp, x, memory, memory, memValid, false) // (B, Tt, D)
	x = l.Norm2.Forward(tp, tp.AddDropout(x, ca, l.Dropout))          // (B, Tt, D)
	ff := feedForward(tp, x, l.Linear1, l.Linear2, l.Act, l.Dropout)  // (B, Tt, D)
	return l.Norm3.Forward(tp, tp.AddDropout(x, ff, l.Dropout))
}

// Params returns "self_attn.*", "multihead_attn.*", "linear1.*",
// "linear2.*" and "norm1.*" to "norm3.*".
func (l *TransformerDecoderLayer) Params() []Named {
	var ps []Named
	ps = append(ps, Prefix("self_attn", l.SelfAttn.Params())...)
	ps = append(ps, Prefix("multihead_attn", l.CrossAttn.Params())...)
	ps = append(ps, Prefix("linear1", l.Linear1.Params())...)
	ps = append(ps, Prefix("linear2", l.Linear2.Params())...)
	ps = append(ps, Prefix("norm1", l.Norm1.Params())...)
	ps = append(ps, Prefix("norm2", l.Norm2.Params())...)
	return append(ps, Prefix("norm3", l.Norm3.Params())...)
}

// TransformerDecoder is torch.nn.TransformerDecoder without a final norm.
type TransformerDecoder struct {
	Layers []*TransformerDecoderLayer
}

// NewTransformerDecoder returns n decoder layers, each with its own initial
// weights.
func NewTransformerDecoder(rng *rand.Rand, n, d, heads, ff int, dropout float32, act Activation) *TransformerDecoder {
	dec := &TransformerDecoder{}
	for i := 0; i < n; i++ {
		dec.Layers = append(dec.Layers, NewTransformerDecoderLayer(rng, d, heads, ff, dropout, act))
	}
	return dec
}

// Forward runs tgt through every layer against the same memory.
func (dec *TransformerDecoder) Forward(tp *tensor.Tape, tgt, memory, tgtValid, memValid *tensor.Tensor) *tensor.Tensor {
	for _, l := range dec.Layers {
		tgt = l.Forward(tp, tgt, memory, tgtValid, memValid)
	}
	return tgt
}

// Params returns "layers.0.self_attn.in_proj_weight" and so on.
func (dec *TransformerDecoder) Params() []Named {
	var ps []Named
	for i, l := range dec.Layers {
		ps = append(ps, Prefix(fmt.Sprintf("layers.%d", i), l.Params())...)
	}
	return ps
}

// TransformerCrossLayer is a transformer encoder layer whose attention
// takes its keys and values from a memory rather than from its input (a
// "cross-transformer encoder layer", Q != V): the post-norm layer of
// TransformerEncoderLayer, whose SelfAttn here attends to the memory.
//
//	x = norm1(x + dropout1(attn(x, mem, mem, memory padding)))
//	x = norm2(x + dropout2(linear2(dropout(act(linear1(x))))))
type TransformerCrossLayer struct {
	TransformerEncoderLayer
}

// NewTransformerCrossLayer returns a cross layer of width d, initialised as
// an encoder layer.
func NewTransformerCrossLayer(rng *rand.Rand, d, heads, ff int, dropout float32, act Activation) *TransformerCrossLayer {
	return &TransformerCrossLayer{*NewTransformerEncoderLayer(rng, d, heads, ff, dropout, act)}
}

// Forward maps x (B, Tq, D) attending to memory (B, Tm, D) to (B, Tq, D);
// memValid (B, Tm) marks real memory entries with 1 and padding with 0, or
// is nil.
func (l *TransformerCrossLayer) Forward(tp *tensor.Tape, x, memory, memValid *tensor.Tensor) *tensor.Tensor {
	return l.attend(tp, x, memory, memValid)
}

// Params returns the encoder layer's, with "cross_attn.*" for
// "self_attn.*".
func (l *TransformerCrossLayer) Params() []Named {
	ps := l.TransformerEncoderLayer.Params()
	for i, p := range ps {
		if rest, ok := strings.CutPrefix(p.Name, "self_attn."); ok {
			ps[i].Name = "cross_attn." + rest
		}
	}
	return ps
}

// TransformerCrossEncoder is a stack of cross layers: each layer's output
// is the next one's queries, and every layer attends to the same memory.
type TransformerCrossEncoder struct {
	Layers []*TransformerCrossLayer
}

// NewTransformerCrossEncoder returns n cross layers, each with its own
// initial weights.
func NewTransformerCrossEncoder(rng *rand.Rand, n, d, heads, ff int, dropout float32, act Activation) *TransformerCrossEncoder {
	e := &TransformerCrossEncoder{}
	for i := 0; i < n; i++ {
		e.Layers = append(e.Layers, NewTransformerCrossLayer(rng, d, heads, ff, dropout, act))
	}
	return e
}

// Forward runs x (B, Tq, D) through every layer against memory (B, Tm, D).
func (e *TransformerCrossEncoder) Forward(tp *tensor.Tape, x, memory, memValid *tensor.Tensor) *tensor.Tensor {
	for _, l := range e.Layers {
		x = l.Forward(tp, x, memory, memValid)
	}
	return x
}

// Params returns "layers.0.cross_attn.in_proj_weight" and so on.
func (e *TransformerCrossEncoder) Params() []Named {
	var ps []Named
	for i, l := range e.Layers {
		ps = append(ps, Prefix(fmt.Sprintf("layers.%d", i), l.Params())...)
	}
	return ps
}

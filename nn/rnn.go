package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/xmr-project/xmr/tensor"
)

// RNNWeights are the parameters of one direction of one recurrent layer,
// with the gates stacked in PyTorch's order (GRU r, z, n; LSTM i, f, g, o).
type RNNWeights struct {
	WIH *tensor.Tensor // (G*H, In)
	WHH *tensor.Tensor // (G*H, H)
	BIH *tensor.Tensor // (G*H)
	BHH *tensor.Tensor // (G*H)
}

// rnn is the machinery shared by GRU and LSTM.
type rnn struct {
	in, hidden, layers, gates int
	bidirectional             bool
	// cells[l*dirs+d] is direction d (0 forward, 1 reverse) of layer l.
	cells []*RNNWeights
}

func newRNN(rng *rand.Rand, in, hidden, layers, gates int, bidirectional bool) rnn {
	r := rnn{in: in, hidden: hidden, layers: layers, gates: gates, bidirectional: bidirectional}
	bound := 1 / math.Sqrt(float64(hidden))
	for l := 0; l < layers; l++ {
		lin := in
		if l > 0 {
			lin = hidden * r.dirs()
		}
		for d := 0; d < r.dirs(); d++ {
			r.cells = append(r.cells, &RNNWeights{
				WIH: Uniform(rng, bound, gates*hidden, lin),
				WHH: Uniform(rng, bound, gates*hidden, hidden),
				BIH: Uniform(rng, bound, gates*hidden),
				BHH: Uniform(rng, bound, gates*hidden),
			})
		}
	}
	return r
}

func (r *rnn) dirs() int {
	if r.bidirectional {
		return 2
	}
	return 1
}

func (r *rnn) params() []Named {
	var ps []Named
	for l := 0; l < r.layers; l++ {
		for d := 0; d < r.dirs(); d++ {
			sfx := fmt.Sprintf("_l%d", l)
			if d == 1 {
				sfx += "_reverse"
			}
			w := r.cells[l*r.dirs()+d]
			ps = append(ps, Named{"weight_ih" + sfx, w.WIH}, Named{"weight_hh" + sfx, w.WHH},
				Named{"bias_ih" + sfx, w.BIH}, Named{"bias_hh" + sfx, w.BHH})
		}
	}
	return ps
}

// stepFunc advances one direction by one step t: it updates the state held
// in st and returns the new hidden state (B, H).
type stepFunc func(tp *tensor.Tape, w *RNNWeights, xp *tensor.Tensor, t int, st []*tensor.Tensor, valid []bool) *tensor.Tensor

// forward runs every layer and direction over x (B, T, In). It returns the
// top layer's outputs (B, T, H*dirs), zero at padded steps, and its last
// hidden states (B, H*dirs).
func (r *rnn) forward(op string, tp *tensor.Tape, x *tensor.Tensor, lengths []int, nState int, step stepFunc) (out, last *tensor.Tensor) {
	if x.Dims() != 3 || x.Shape[2] != r.in {
		shapeErr(op, "input %v does not fit input width %d (want (B, T, %d))", x.Shape, r.in, r.in)
	}
	b, steps := x.Shape[0], x.Shape[1]
	if lengths == nil {
		lengths = make([]int, b)
		for i := range lengths {
			lengths[i] = steps
		}
	}
	if len(lengths) != b {
		shapeErr(op, "%d lengths for input %v", len(lengths), x.Shape)
	}
	// valid[t][i]: step t is real for item i; mask (B, T) is its 0/1 form.
	valid := make([][]bool, steps)
	mask := tensor.New(b, steps)
	for t := range valid {
		valid[t] = make([]bool, b)
	}
	for i, n := range lengths {
		if n < 0 || n > steps {
			shapeErr(op, "length %d of item %d outside [0, %d] for input %v", n, i, steps, x.Shape)
		}
		for t := 0; t < n; t++ {
			valid[t][i] = true
			mask.Data[i*steps+t] = 1
		}
	}
	anyValid := func(t int) bool {
		for _, v := range valid[t] {
			if v {
				return true
			}
		}
		return false
	}
	input := x
	var lasts []*tensor.Tensor
	for l := 0; l < r.layers; l++ {
		outs := make([]*tensor.Tensor, r.dirs())
		lasts = lasts[:0]
		for d := 0; d < r.dirs(); d++ {
			w := r.cells[l*r.dirs()+d]
			xp := tp.Linear(input, w.WIH, w.BIH) // (B, T, G*H) for all steps at once
			st := make([]*tensor.Tensor, nState)
			for k := range st {
				st[k] = tensor.New(b, r.hidden) // zero initial state
			}
			hs := make([]*tensor.Tensor, steps)
			for k := 0; k < steps; k++ {
				t := k
				if d == 1 {
					t = steps - 1 - k // reverse: each item starts at its own last step
				}
				if !anyValid(t) {
					hs[t] = st[0] // every item padded: state unchanged
					continue
				}
				hs[t] = step(tp, w, xp, t, st, valid[t]) // (B, H)
			}
			outs[d] = tp.MaskRows(tp.Stack(1, hs...), mask) // (B, T, H), zero at padding
			lasts = append(lasts, st[0])
		}
		input = outs[0]
		if r.bidirectional {
			input = tp.Concat(2, outs[0], outs[1]) // (B, T, 2H)
		}
	}
	last = lasts[0]
	if r.bidirectional {
		last = tp.Concat(1, lasts[0], lasts[1]) // (B, 2H)
	}
	return input, last
}

// GRU is torch.nn.GRU with batch_first=True over padded batches.
type GRU struct{ rnn }

// NewGRU returns a GRU with layers stacked layers of hidden units, optionally
// bidirectional, with every weight and bias from U(-1/sqrt(hidden),
// 1/sqrt(hidden)) as PyTorch.
func NewGRU(rng *rand.Rand, in, hidden, layers int, bidirectional bool) *GRU {
	return &GRU{newRNN(rng, in, hidden, layers, 3, bidirectional)}
}

// Cell returns the weights of direction dir (0 forward, 1 reverse) of layer
// l.
func (g *GRU) Cell(l, dir int) *RNNWeights { return g.cells[l*g.dirs()+dir] }

// Forward runs x (B, T, In) where item b has lengths[b] real steps (nil: all
// T). It returns out (B, T, H*dirs), zero at padded steps, and last (B,
// H*dirs), the top layer's state after each item's last real step (forward
// direction) and after step 0 (reverse direction), as with
// pack_padded_sequence.
func (g *GRU) Forward(tp *tensor.Tape, x *tensor.Tensor, lengths []int) (out, last *tensor.Tensor) {
	return g.forward("GRU", tp, x, lengths, 1, g.stepGRU)
}

// stepGRU is one GRU step; st holds h.
func (g *GRU) stepGRU(tp *tensor.Tape, w *RNNWeights, xp *tensor.Tensor, t int, st []*tensor.Tensor, valid []bool) *tensor.Tensor {
	gh := tp.Linear(st[0], w.WHH, w.BHH) // (B, 3H)
	st[0] = tp.GRUCell(xp, t, gh, st[0], valid)
	return st[0]
}

// Params returns weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0 (and
// the _reverse and deeper-layer ones) in PyTorch's order.
func (g *GRU) Params() []Named { return g.params() }

// LSTM is torch.nn.LSTM with batch_first=True over padded batches.
type LSTM struct{ rnn }

// NewLSTM returns an LSTM initialised as PyTorch's (see NewGRU).
func NewLSTM(rng *rand.Rand, in, hidden, layers int, bidirectional bool) *LSTM {
	return &LSTM{newRNN(rng, in, hidden, layers, 4, bidirectional)}
}

// Cell returns the weights of direction dir of layer l.
func (m *LSTM) Cell(l, dir int) *RNNWeights { return m.cells[l*m.dirs()+dir] }

// Forward is GRU.Forward for an LSTM; last holds the hidden states h (not
// the cell states).
func (m *LSTM) Forward(tp *tensor.Tape, x *tensor.Tensor, lengths []int) (out, last *tensor.Tensor) {
	return m.forward("LSTM", tp, x, lengths, 2, m.stepLSTM)
}

// stepLSTM is one LSTM step; st holds h and c.
func (m *LSTM) stepLSTM(tp *tensor.Tape, w *RNNWeights, xp *tensor.Tensor, t int, st []*tensor.Tensor, valid []bool) *tensor.Tensor {
	gh := tp.Linear(st[0], w.WHH, w.BHH) // (B, 4H)
	st[0], st[1] = tp.LSTMCell(xp, t, gh, st[0], st[1], valid)
	return st[0]
}

// Params returns the LSTM's parameters in PyTorch's order (see GRU.Params).
func (m *LSTM) Params() []Named { return m.params() }

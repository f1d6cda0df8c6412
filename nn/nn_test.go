package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/tensor"
)

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 99)) }

func randn(seed uint64, shape ...int) *tensor.Tensor { return tensor.RandN(newRNG(seed), shape...) }

// validMask returns a (B, T) 0/1 tensor with lengths[b] leading ones.
func validMask(t int, lengths ...int) *tensor.Tensor {
	m := tensor.New(len(lengths), t)
	for b, n := range lengths {
		for j := 0; j < n; j++ {
			m.Data[b*t+j] = 1
		}
	}
	return m
}

func maskRows(m *tensor.Tensor) [][]float64 {
	if m == nil {
		return nil
	}
	return toSeq(tensor.FromData(m.Data, m.Shape[0], m.Shape[1], 1)).flat()
}

// flat turns a [b][t][1] seq into [b][t].
func (s seq) flat() [][]float64 {
	out := make([][]float64, len(s))
	for b := range s {
		for _, v := range s[b] {
			out[b] = append(out[b], v[0])
		}
	}
	return out
}

// rnnOut concatenates a recurrent layer's outputs into one tensor for the
// gradient checker.
func rnnOut(tp *tensor.Tape, forward func(*tensor.Tape, *tensor.Tensor, []int) (*tensor.Tensor, *tensor.Tensor), x *tensor.Tensor, lengths []int) *tensor.Tensor {
	out, last := forward(tp, x, lengths)
	return tp.Concat(1, tp.Reshape(out, out.Shape[0], -1), last)
}

func TestGradients(t *testing.T) {
	kv := validMask(4, 3, 4)  // (2, 4)
	mv := validMask(3, 2, 3)  // (2, 3)
	lengths := []int{3, 1, 4} // for (3, 4, In) sequences
	ids := []int32{1, 4, 0, 2, 2, 3}
	type tc struct {
		name   string
		inputs []*tensor.Tensor // data inputs (checked too)
		params []Named
		f      func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor
	}
	lin := NewLinear(newRNG(1), 4, 3, true)
	ln := NewLayerNorm(5, 1e-5)
	for i := range ln.Gamma.Data { // non-trivial affine part
		ln.Gamma.Data[i], ln.Beta.Data[i] = 1+0.1*float32(i), 0.2*float32(i)
	}
	emb := NewEmbedding(newRNG(2), 5, 3)
	mha := NewMultiheadAttention(newRNG(3), 6, 2, 0)
	mhaDrop := NewMultiheadAttention(newRNG(3), 6, 2, 0.3)
	randomise(mha.InProjB, mha.OutProj.B, mhaDrop.InProjB)
	enc := NewTransformerEncoderLayer(newRNG(4), 6, 2, 8, 0, ReLU)
	encDrop := NewTransformerEncoderLayer(newRNG(4), 6, 3, 8, 0.2, GELU)
	dec := NewTransformerDecoderLayer(newRNG(5), 6, 2, 8, 0.1, GELU) // GELU: no kinks for finite differences
	gru := NewGRU(newRNG(6), 3, 4, 2, true)
	lstm := NewLSTM(newRNG(7), 3, 4, 1, true)
	conv := NewConv1d(newRNG(8), 3, 4, 3, 1)
	cases := []tc{
		{"linear", []*tensor.Tensor{randn(1, 2, 3, 4)}, lin.Params(), func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor { return lin.Forward(tp, x[0]) }},
		{"linear-relu", []*tensor.Tensor{randn(1, 2, 3, 4)}, lin.Params(), func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor {
			return lin.ForwardAct(tp, x[0], ReLU)
		}},
		{"layernorm", []*tensor.Tensor{randn(2, 3, 5)}, ln.Params(), func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor { return ln.Forward(tp, x[0]) }},
		{"embedding", nil, emb.Params(), func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor { return emb.Forward(tp, ids, 2, 3) }},
		{"mha-self", []*tensor.Tensor{randn(3, 2, 4, 6)}, mha.Params(), func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor {
			return mha.Forward(tp, x[0], x[0], x[0], kv, false)
		}},
		{"mha-causal", []*tensor.Tensor{randn(3, 2, 4, 6)}, mha.Params(), func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor {
			return mha.Forward(tp, x[0], x[0], x[0], kv, true)
		}},
		{"mha-cross", []*tensor.Tensor{randn(4, 2, 3, 6), randn(5, 2, 4, 6)}, mha.Params(), func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor {
			return mha.Forward(tp, x[0], x[1], x[1], kv, false)
		}},
		{"mha-qkv", []*tensor.Tensor{randn(4, 2, 3, 6), randn(5, 2, 4, 6), randn(6, 2, 4, 6)}, mha.Params(), func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor {
			return mha.Forward(tp, x[0], x[1], x[2], kv, false)
		}},
		{"mha-dropout", []*tensor.Tensor{randn(3, 2, 4, 6)}, mhaDrop.Params(), func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor {
			tp.Seed(1, 2)
			return mhaDrop.Forward(tp, x[0], x[0], x[0], kv, false)
		}},
		{"encoder-layer", []*tensor.Tensor{randn(7, 2, 4, 6)}, enc.Params(), func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor {
			return enc.Forward(tp, x[0], kv)
		}},
		{"encoder-layer-dropout-gelu", []*tensor.Tensor{randn(7, 2, 4, 6)}, encDrop.Params(), func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor {
			tp.Seed(3, 4)
			return encDrop.Forward(tp, x[0], kv)
		}},
		{"decoder-layer", []*tensor.Tensor{randn(8, 2, 4, 6), randn(9, 2, 3, 6)}, dec.Params(), func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor {
			tp.Seed(5, 6)
			return dec.Forward(tp, x[0], x[1], kv, mv)
		}},
		{"gru-bi-2layer", []*tensor.Tensor{randn(10, 3, 4, 3)}, gru.Params(), func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor {
			return rnnOut(tp, gru.Forward, x[0], lengths)
		}},
		{"lstm-bi", []*tensor.Tensor{randn(11, 3, 4, 3)}, lstm.Params(), func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor {
			return rnnOut(tp, lstm.Forward, x[0], lengths)
		}},
		{"conv1d", []*tensor.Tensor{randn(12, 2, 5, 3)}, conv.Params(), func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor { return conv.Forward(tp, x[0]) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			all := append(append([]*tensor.Tensor(nil), c.inputs...), Tensors(c.params)...)
			err := tensor.GradCheck(func(tp *tensor.Tape) *tensor.Tensor { return c.f(tp, c.inputs) }, all,
				tensor.GradCheckOptions{Eps: 5e-3, ATol: 5e-3, RTol: 2e-2, MaxPerInput: 24})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// randomise fills tensors (zero-initialised biases) with small values so
// that their gradients matter.
func randomise(ts ...*tensor.Tensor) {
	rng := newRNG(42)
	for _, t := range ts {
		for i := range t.Data {
			t.Data[i] = float32(0.3 * rng.NormFloat64())
		}
	}
}

func closeSeq(t *testing.T, name string, got *tensor.Tensor, want seq, tol float64) {
	t.Helper()
	g := toSeq(got)
	if len(g) != len(want) {
		t.Fatalf("%s: batch %d, want %d", name, len(g), len(want))
	}
	for b := range want {
		if len(g[b]) != len(want[b]) {
			t.Fatalf("%s: item %d has %d steps, want %d", name, b, len(g[b]), len(want[b]))
		}
		for s := range want[b] {
			for i := range want[b][s] {
				if d := math.Abs(g[b][s][i] - want[b][s][i]); d > tol || math.IsNaN(g[b][s][i]) {
					t.Fatalf("%s: [%d,%d,%d] = %.7g, want %.7g", name, b, s, i, g[b][s][i], want[b][s][i])
				}
			}
		}
	}
}

func TestMultiheadAttentionMatchesNaive(t *testing.T) {
	m := NewMultiheadAttention(newRNG(1), 8, 2, 0.5) // dropout must not act without a tape
	randomise(m.InProjB, m.OutProj.B)
	kv := validMask(5, 5, 3, 1)
	q, k, v := randn(2, 3, 5, 8), randn(3, 3, 5, 8), randn(4, 3, 5, 8)
	q3 := randn(5, 3, 2, 8)
	cases := []struct {
		name    string
		q, k, v *tensor.Tensor
		valid   *tensor.Tensor
		causal  bool
	}{
		{"self", q, q, q, nil, false},
		{"self-padding", q, q, q, kv, false},
		{"self-causal-padding", q, q, q, kv, true},
		{"cross-kv-shared", q3, k, k, kv, false},
		{"cross-separate", q3, k, v, kv, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := naiveMHA(m, toSeq(c.q), toSeq(c.k), toSeq(c.v), maskRows(c.valid), c.causal)
			closeSeq(t, "no-grad", m.Forward(nil, c.q, c.k, c.v, c.valid, c.causal), want, 1e-4)
			tp := tensor.NewTape()
			tp.Training = false
			closeSeq(t, "eval tape", m.Forward(tp, c.q, c.k, c.v, c.valid, c.causal), want, 1e-4)
		})
	}
}

func TestTransformerLayersMatchNaive(t *testing.T) {
	for _, act := range []Activation{ReLU, GELU} {
		t.Run(act.String(), func(t *testing.T) {
			enc := NewTransformerEncoderLayer(newRNG(2), 8, 4, 16, 0.1, act)
			randomise(enc.SelfAttn.InProjB, enc.SelfAttn.OutProj.B, enc.Norm1.Gamma, enc.Norm2.Beta)
			x := randn(3, 3, 5, 8)
			kv := validMask(5, 5, 2, 4)
			closeSeq(t, "encoder layer", enc.Forward(nil, x, kv), naiveEncoderLayer(enc, toSeq(x), maskRows(kv)), 1e-4)

			dec := NewTransformerDecoderLayer(newRNG(3), 8, 2, 16, 0.1, act)
			randomise(dec.CrossAttn.InProjB, dec.Norm3.Beta)
			mem := randn(4, 3, 6, 8)
			mv := validMask(6, 6, 3, 1)
			closeSeq(t, "decoder layer", dec.Forward(nil, x, mem, kv, mv), naiveDecoderLayer(dec, toSeq(x), toSeq(mem), maskRows(kv), maskRows(mv)), 1e-4)

			cross := NewTransformerCrossLayer(newRNG(4), 8, 2, 16, 0.1, act)
			randomise(cross.SelfAttn.InProjB, cross.Norm2.Beta)
			closeSeq(t, "cross layer", cross.Forward(nil, x, mem, mv), naiveAttendLayer(&cross.TransformerEncoderLayer, toSeq(x), toSeq(mem), maskRows(mv)), 1e-4)
		})
	}
	// A cross layer's parameters are an encoder layer's, its attention
	// named cross_attn (the names MEMBER's checkpoints hold).
	var names []string
	for _, p := range NewTransformerCrossLayer(newRNG(4), 8, 2, 16, 0, ReLU).Params() {
		names = append(names, p.Name)
	}
	want := []string{"cross_attn.in_proj_weight", "cross_attn.in_proj_bias", "cross_attn.out_proj.weight", "cross_attn.out_proj.bias",
		"linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"}
	if !slices.Equal(names, want) {
		t.Errorf("cross layer parameters %q, want %q", names, want)
	}
	// A stack is the composition of its layers.
	e := NewTransformerEncoder(newRNG(5), 2, 8, 2, 16, 0, ReLU)
	x := randn(6, 2, 4, 8)
	closeSeq(t, "encoder", e.Forward(nil, x, nil), naiveEncoderLayer(e.Layers[1], naiveEncoderLayer(e.Layers[0], toSeq(x), nil), nil), 1e-4)
}

func TestLayerNormAndLinearMatchNaive(t *testing.T) {
	ln := NewLayerNorm(6, 1e-12)
	randomise(ln.Gamma, ln.Beta)
	lin := NewLinear(newRNG(1), 6, 3, true)
	x := randn(2, 2, 3, 6)
	xs := toSeq(x)
	y := ln.Forward(nil, x)
	z := lin.Forward(nil, x)
	for b := range xs {
		for s := range xs[b] {
			for i, w := range naiveLayerNorm(ln, xs[b][s]) {
				if d := math.Abs(float64(y.At(b, s, i)) - w); d > 1e-5 {
					t.Fatalf("layernorm [%d,%d,%d] = %v, want %v", b, s, i, y.At(b, s, i), w)
				}
			}
			for i, w := range naiveLinear(lin, xs[b][s]) {
				if d := math.Abs(float64(z.At(b, s, i)) - w); d > 1e-5 {
					t.Fatalf("linear [%d,%d,%d] = %v, want %v", b, s, i, z.At(b, s, i), w)
				}
			}
		}
	}
}

func TestRecurrentMatchesNaive(t *testing.T) {
	x := randn(1, 4, 6, 3)
	type rnnCase struct {
		name    string
		r       *rnn
		forward func(tp *tensor.Tape, x *tensor.Tensor, lengths []int) (out, last *tensor.Tensor)
		lengths []int
	}
	var cases []rnnCase
	for _, bi := range []bool{false, true} {
		for _, layers := range []int{1, 2} {
			g := NewGRU(newRNG(uint64(layers)), 3, 5, layers, bi)
			l := NewLSTM(newRNG(uint64(layers)+10), 3, 5, layers, bi)
			name := fmt.Sprintf("bidirectional=%v-layers=%d", bi, layers)
			cases = append(cases,
				rnnCase{"gru-" + name, &g.rnn, g.Forward, []int{6, 2, 5, 1}},
				rnnCase{"lstm-" + name, &l.rnn, l.Forward, []int{3, 6, 0, 4}})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantOut, wantLast := naiveRNN(c.r, toSeq(x), c.lengths)
			for _, tp := range []*tensor.Tape{nil, tensor.NewTape()} {
				out, last := c.forward(tp, x, c.lengths)
				closeSeq(t, "out", out, wantOut, 1e-5)
				closeSeq(t, "last", tp.Reshape(last, last.Shape[0], 1, -1), seq{{wantLast[0]}, {wantLast[1]}, {wantLast[2]}, {wantLast[3]}}, 1e-5)
			}
		})
	}
	// nil lengths mean every step is real.
	g := NewGRU(newRNG(3), 3, 4, 1, true)
	a, _ := g.Forward(nil, x, nil)
	b, _ := g.Forward(nil, x, []int{6, 6, 6, 6})
	for i := range a.Data {
		if a.Data[i] != b.Data[i] {
			t.Fatal("nil lengths differ from full lengths")
		}
	}
}

func TestConv1dMatchesNaive(t *testing.T) {
	for _, k := range []int{1, 2, 3} {
		c := NewConv1d(newRNG(uint64(k)), 3, 4, k, k/2+1)
		x := randn(5, 2, 6, 3)
		y := c.Forward(nil, x)
		tout := 6 + 2*c.Padding - k + 1
		if y.Shape[0] != 2 || y.Shape[1] != tout || y.Shape[2] != 4 {
			t.Fatalf("k=%d: shape %v", k, y.Shape)
		}
		for b := 0; b < 2; b++ {
			for s := 0; s < tout; s++ {
				for o := 0; o < 4; o++ {
					want := float64(c.B.Data[o])
					for kk := 0; kk < k; kk++ {
						ti := s + kk - c.Padding
						if ti < 0 || ti >= 6 {
							continue
						}
						for i := 0; i < 3; i++ {
							want += float64(c.W.At(o, i, kk)) * float64(x.At(b, ti, i))
						}
					}
					if d := math.Abs(float64(y.At(b, s, o)) - want); d > 1e-5 {
						t.Fatalf("k=%d [%d,%d,%d] = %v, want %v", k, b, s, o, y.At(b, s, o), want)
					}
				}
			}
		}
	}
}

func TestParamNames(t *testing.T) {
	rng := newRNG(1)
	names := func(ps []Named) string {
		var s []string
		for _, p := range ps {
			s = append(s, p.Name)
		}
		return strings.Join(s, " ")
	}
	cases := []struct {
		ps   []Named
		want string
	}{
		{NewLinear(rng, 2, 3, false).Params(), "weight"},
		{NewMultiheadAttention(rng, 4, 2, 0).Params(), "in_proj_weight in_proj_bias out_proj.weight out_proj.bias"},
		{NewTransformerEncoder(rng, 2, 4, 2, 8, 0, ReLU).Params()[:10], "layers.0.self_attn.in_proj_weight layers.0.self_attn.in_proj_bias layers.0.self_attn.out_proj.weight layers.0.self_attn.out_proj.bias layers.0.linear1.weight layers.0.linear1.bias layers.0.linear2.weight layers.0.linear2.bias layers.0.norm1.weight layers.0.norm1.bias"},
		{NewTransformerDecoderLayer(rng, 4, 2, 8, 0, ReLU).Params()[4:6], "multihead_attn.in_proj_weight multihead_attn.in_proj_bias"},
		{NewGRU(rng, 3, 2, 2, true).Params(), "weight_ih_l0 weight_hh_l0 bias_ih_l0 bias_hh_l0 weight_ih_l0_reverse weight_hh_l0_reverse bias_ih_l0_reverse bias_hh_l0_reverse weight_ih_l1 weight_hh_l1 bias_ih_l1 bias_hh_l1 weight_ih_l1_reverse weight_hh_l1_reverse bias_ih_l1_reverse bias_hh_l1_reverse"},
		{Prefix("enc", NewConv1d(rng, 2, 3, 2, 1).Params()), "enc.weight enc.bias"},
	}
	for _, c := range cases {
		if got := names(c.ps); got != c.want {
			t.Errorf("names %q, want %q", got, c.want)
		}
	}
	if g := NewGRU(rng, 3, 2, 2, true); g.Cell(1, 0).WIH.Shape[1] != 4 {
		t.Errorf("layer 1 input width %v, want 4", g.Cell(1, 0).WIH.Shape)
	}
}

func TestInitBounds(t *testing.T) {
	rng := newRNG(7)
	within := func(name string, x *tensor.Tensor, bound float64) {
		t.Helper()
		mx := 0.0
		for _, v := range x.Data {
			mx = math.Max(mx, math.Abs(float64(v)))
		}
		if mx > bound || mx < 0.8*bound {
			t.Errorf("%s: max |w| = %v, want just under %v", name, mx, bound)
		}
	}
	l := NewLinear(rng, 64, 32, true)
	within("linear.weight", l.W, 1/8.0)
	within("linear.bias", l.B, 1/8.0)
	m := NewMultiheadAttention(rng, 32, 4, 0)
	within("in_proj_weight", m.InProjW, math.Sqrt(6.0/128))
	for _, v := range append(append([]float32(nil), m.InProjB.Data...), m.OutProj.B.Data...) {
		if v != 0 {
			t.Fatal("attention biases must start at zero")
		}
	}
	g := NewGRU(rng, 8, 16, 1, false)
	within("gru", g.Cell(0, 0).WHH, 0.25)
	c := NewConv1d(rng, 4, 8, 4, 1)
	within("conv", c.W, 0.25)
}

func TestShapeErrors(t *testing.T) {
	rng := newRNG(1)
	lin := NewLinear(rng, 4, 3, true)
	mha := NewMultiheadAttention(rng, 8, 2, 0)
	enc := NewTransformerEncoderLayer(rng, 8, 2, 16, 0, ReLU)
	gru := NewGRU(rng, 3, 4, 1, false)
	conv := NewConv1d(rng, 3, 4, 3, 1)
	cases := []struct {
		name string
		f    func()
		want []string
	}{
		{"linear", func() { lin.Forward(tensor.NewTape(), tensor.New(2, 5)) }, []string{"[2 5]", "[3 4]"}},
		{"layernorm", func() { NewLayerNorm(4, 1e-5).Forward(nil, tensor.New(2, 5)) }, []string{"[2 5]", "[4]"}},
		{"embedding-shape", func() { NewEmbedding(rng, 4, 2).Forward(nil, []int32{1, 2, 3}, 2, 2) }, []string{"3 ids", "[2 2]"}},
		{"embedding-id", func() { NewEmbedding(rng, 4, 2).Forward(nil, []int32{1, 9}) }, []string{"9"}},
		{"mha-width", func() { mha.Forward(nil, tensor.New(1, 2, 8), tensor.New(1, 3, 6), tensor.New(1, 3, 6), nil, false) }, []string{"[1 2 8]", "[1 3 6]"}},
		{"mha-mask", func() {
			x := tensor.New(2, 3, 8)
			mha.Forward(nil, x, x, x, tensor.New(2, 4), false)
		}, []string{"[2 4]", "[2 3 8]"}},
		{"encoder", func() { enc.Forward(tensor.NewTape(), tensor.New(2, 3, 7), nil) }, []string{"[2 3 7]"}},
		{"gru-input", func() { gru.Forward(nil, tensor.New(2, 3, 5), nil) }, []string{"[2 3 5]", "3"}},
		{"gru-lengths", func() { gru.Forward(nil, tensor.New(2, 3, 3), []int{1, 4}) }, []string{"length 4", "[2 3 3]"}},
		{"gru-lengths-count", func() { gru.Forward(nil, tensor.New(2, 3, 3), []int{1}) }, []string{"1 lengths", "[2 3 3]"}},
		{"conv", func() { conv.Forward(nil, tensor.New(2, 5, 4)) }, []string{"[2 5 4]", "[4 3 3]"}},
		{"conv-short", func() { NewConv1d(rng, 3, 4, 5, 0).Forward(nil, tensor.New(2, 3, 3)) }, []string{"[2 3 3]", "[4 3 5]"}},
		{"heads", func() { NewMultiheadAttention(rng, 6, 4, 0) }, []string{"6", "4 heads"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := tensor.Try(c.f)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestRecurrentParallelRows runs the cells at a size where they split rows
// over goroutines (and, with -race, checks that the split does not race),
// against the naive loops.
func TestRecurrentParallelRows(t *testing.T) {
	x := randn(1, 16, 5, 8)
	lengths := []int{5, 1, 3, 4, 5, 2, 5, 5, 1, 2, 3, 4, 5, 5, 4, 3}
	for _, r := range []*rnn{&NewGRU(newRNG(2), 8, 160, 1, true).rnn, &NewLSTM(newRNG(3), 8, 160, 1, true).rnn} {
		wantOut, _ := naiveRNN(r, toSeq(x), lengths)
		tp := tensor.NewTape()
		nState := map[int]int{3: 1, 4: 2}[r.gates]
		step := (&GRU{*r}).stepGRU
		if r.gates == 4 {
			step = (&LSTM{*r}).stepLSTM
		}
		out, last := r.forward("rnn", tp, x, lengths, nState, step)
		closeSeq(t, "out", out, wantOut, 1e-5)
		tp.Backward(tp.Add(tp.SumAll(out), tp.SumAll(last)))
		for _, p := range r.params() {
			if p.T.Grad == nil || p.T.HasNaN() {
				t.Fatalf("%s: no gradient", p.Name)
			}
			p.T.Grad = nil
		}
	}
}

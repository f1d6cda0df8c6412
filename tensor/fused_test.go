package tensor

import (
	"math"
	"runtime"
	"testing"

	"github.com/xmr-project/xmr/blas"
)

func TestFusedGradients(t *testing.T) {
	// keyValid (2, 4): item 0 has 3 real keys, item 1 has 2.
	kv := FromData([]float32{1, 1, 1, 0, 1, 0, 1, 0}, 2, 4)
	valid := []bool{true, false, true}
	type tc struct {
		name   string
		inputs []*Tensor
		f      func(tp *Tape, x []*Tensor) *Tensor
	}
	cases := []tc{
		{"linear", []*Tensor{rnd(1, 2, 3, 4), rnd(2, 5, 4), rnd(3, 5)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Linear(x[0], x[1], x[2]) }},
		{"linear-nobias", []*Tensor{rnd(1, 3, 4), rnd(2, 5, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Linear(x[0], x[1], nil) }},
		{"linear-relu", []*Tensor{rnd(1, 3, 4), rnd(2, 5, 4), rnd(3, 5)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.LinearReLU(x[0], x[1], x[2]) }},
		{"linear-gelu", []*Tensor{rnd(1, 3, 4), rnd(2, 5, 4), rnd(3, 5)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.LinearGELU(x[0], x[1], x[2]) }},
		{"adddropout", []*Tensor{rnd(1, 4, 6), rnd(2, 4, 6)}, func(tp *Tape, x []*Tensor) *Tensor {
			tp.Seed(3, 3)
			return tp.AddDropout(x[0], x[1], 0.4)
		}},
		{"maskrows", []*Tensor{rnd(1, 2, 4, 3)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.MaskRows(x[0], kv) }},
		{"stack", []*Tensor{rnd(1, 2, 3), rnd(2, 2, 3), rnd(3, 2, 3)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Stack(1, x...) }},
		{"attention-self", []*Tensor{rnd(1, 2, 4, 6), rnd(2, 2, 4, 6), rnd(3, 2, 4, 6)}, func(tp *Tape, x []*Tensor) *Tensor {
			return tp.Attention(x[0], x[1], x[2], AttentionOptions{Heads: 2, KeyValid: kv})
		}},
		{"attention-causal", []*Tensor{rnd(1, 2, 4, 6), rnd(2, 2, 4, 6), rnd(3, 2, 4, 6)}, func(tp *Tape, x []*Tensor) *Tensor {
			return tp.Attention(x[0], x[1], x[2], AttentionOptions{Heads: 3, KeyValid: kv, Causal: true})
		}},
		{"attention-cross", []*Tensor{rnd(1, 2, 3, 4), rnd(2, 2, 4, 4), rnd(3, 2, 4, 4)}, func(tp *Tape, x []*Tensor) *Tensor {
			return tp.Attention(x[0], x[1], x[2], AttentionOptions{Heads: 2, KeyValid: kv})
		}},
		{"attention-packed", []*Tensor{rnd(1, 2, 4, 12)}, func(tp *Tape, x []*Tensor) *Tensor {
			return tp.Attention(x[0], x[0], x[0], AttentionOptions{Heads: 2, KeyValid: kv, Dim: 4, KOff: 4, VOff: 8})
		}},
		{"attention-dropout", []*Tensor{rnd(1, 2, 4, 6), rnd(2, 2, 4, 6), rnd(3, 2, 4, 6)}, func(tp *Tape, x []*Tensor) *Tensor {
			tp.Seed(5, 5)
			return tp.Attention(x[0], x[1], x[2], AttentionOptions{Heads: 2, KeyValid: kv, Dropout: 0.3})
		}},
		{"grucell", []*Tensor{rnd(1, 3, 2, 12), rnd(2, 3, 12), rnd(3, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor {
			return tp.GRUCell(x[0], 1, x[1], x[2], valid)
		}},
		{"lstmcell-h", []*Tensor{rnd(1, 3, 2, 16), rnd(2, 3, 16), rnd(3, 3, 4), rnd(4, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor {
			h, _ := tp.LSTMCell(x[0], 1, x[1], x[2], x[3], valid)
			return h
		}},
		{"lstmcell-hc", []*Tensor{rnd(1, 3, 2, 16), rnd(2, 3, 16), rnd(3, 3, 4), rnd(4, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor {
			h, c := tp.LSTMCell(x[0], 0, x[1], x[2], x[3], valid)
			return tp.Concat(1, h, c)
		}},
		{"conv1d", []*Tensor{rnd(1, 2, 5, 3), rnd(2, 4, 3, 3), rnd(3, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Conv1d(x[0], x[1], x[2], 1) }},
		{"conv1d-k2", []*Tensor{rnd(1, 2, 5, 3), rnd(2, 4, 3, 2), rnd(3, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Conv1d(x[0], x[1], x[2], 1) }},
		{"conv1d-nopad", []*Tensor{rnd(1, 2, 5, 3), rnd(2, 4, 3, 3)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Conv1d(x[0], x[1], nil, 0) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := GradCheck(func(tp *Tape) *Tensor { return c.f(tp, c.inputs) }, c.inputs, GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// naiveAttention is the textbook triple loop of multi-head attention.
func naiveAttention(q, k, v *Tensor, o AttentionOptions) []float32 {
	b, tq, tk := q.Shape[0], q.Shape[1], k.Shape[1]
	d := o.Dim
	if d == 0 {
		d = q.Shape[2] - o.QOff
	}
	dh := d / o.Heads
	out := make([]float32, b*tq*d)
	for n := 0; n < b; n++ {
		for h := 0; h < o.Heads; h++ {
			for i := 0; i < tq; i++ {
				s := make([]float64, tk)
				mx := math.Inf(-1)
				for j := 0; j < tk; j++ {
					if (o.KeyValid != nil && o.KeyValid.At(n, j) == 0) || (o.Causal && j > i) {
						s[j] = math.Inf(-1)
						continue
					}
					for c := 0; c < dh; c++ {
						s[j] += float64(q.At(n, i, o.QOff+h*dh+c)) * float64(k.At(n, j, o.KOff+h*dh+c))
					}
					s[j] /= math.Sqrt(float64(dh))
					mx = math.Max(mx, s[j])
				}
				var z float64
				for j := range s {
					s[j] = math.Exp(s[j] - mx)
					z += s[j]
				}
				for c := 0; c < dh; c++ {
					var acc float64
					for j := range s {
						acc += s[j] / z * float64(v.At(n, j, o.VOff+h*dh+c))
					}
					out[(n*tq+i)*d+h*dh+c] = float32(acc)
				}
			}
		}
	}
	return out
}

func TestAttentionMatchesNaive(t *testing.T) {
	kv := FromData([]float32{1, 1, 1, 0, 0, 1, 1, 1, 1, 0}, 2, 5)
	packed := rnd(4, 2, 5, 24)
	cases := []struct {
		name    string
		q, k, v *Tensor
		o       AttentionOptions
	}{
		{"self", rnd(1, 2, 5, 8), rnd(2, 2, 5, 8), rnd(3, 2, 5, 8), AttentionOptions{Heads: 2}},
		{"padding", rnd(1, 2, 5, 8), rnd(2, 2, 5, 8), rnd(3, 2, 5, 8), AttentionOptions{Heads: 4, KeyValid: kv}},
		{"causal", rnd(1, 2, 5, 8), rnd(2, 2, 5, 8), rnd(3, 2, 5, 8), AttentionOptions{Heads: 2, KeyValid: kv, Causal: true}},
		{"cross", rnd(1, 2, 3, 8), rnd(2, 2, 5, 8), rnd(3, 2, 5, 8), AttentionOptions{Heads: 2, KeyValid: kv}},
		{"packed", packed, packed, packed, AttentionOptions{Heads: 2, KeyValid: kv, Dim: 8, KOff: 8, VOff: 16}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := naiveAttention(c.q, c.k, c.v, c.o)
			for _, tp := range []*Tape{nil, NewTape()} {
				got := tp.Attention(c.q, c.k, c.v, c.o)
				for i := range want {
					if math.Abs(float64(got.Data[i]-want[i])) > 1e-5 {
						t.Fatalf("tape %v: element %d = %v, want %v", tp != nil, i, got.Data[i], want[i])
					}
				}
			}
		})
	}
}

func TestConv1dMatchesNaive(t *testing.T) {
	x, w, b := rnd(1, 2, 6, 3), rnd(2, 4, 3, 3), rnd(3, 4)
	for _, pad := range []int{0, 1, 2} {
		got := (*Tape)(nil).Conv1d(x, w, b, pad)
		tout := 6 + 2*pad - 3 + 1
		if got.Shape[1] != tout {
			t.Fatalf("pad %d: shape %v", pad, got.Shape)
		}
		for n := 0; n < 2; n++ {
			for s := 0; s < tout; s++ {
				for o := 0; o < 4; o++ {
					acc := float64(b.Data[o])
					for k := 0; k < 3; k++ {
						ti := s + k - pad
						if ti < 0 || ti >= 6 {
							continue
						}
						for i := 0; i < 3; i++ {
							acc += float64(w.At(o, i, k)) * float64(x.At(n, ti, i))
						}
					}
					if g := got.At(n, s, o); math.Abs(float64(g)-acc) > 1e-5 {
						t.Fatalf("pad %d (%d,%d,%d): %v, want %v", pad, n, s, o, g, acc)
					}
				}
			}
		}
	}
}

func TestDropoutRate(t *testing.T) {
	tp := NewTape()
	x := Full(1, 100000)
	y := tp.Dropout(x, 0.25)
	zeros := 0
	for _, v := range y.Data {
		switch v {
		case 0:
			zeros++
		case 1 / 0.75:
		default:
			t.Fatalf("value %v", v)
		}
	}
	if r := float64(zeros) / 1e5; math.Abs(r-0.25) > 0.01 {
		t.Fatalf("dropped %.3f, want 0.25", r)
	}
	if (*Tape)(nil).Dropout(x, 0.5) != x {
		t.Fatal("no-grad dropout is not the identity")
	}
}

func TestFusedShapeErrors(t *testing.T) {
	cases := []struct {
		name string
		f    func()
		want []string
	}{
		{"linear", func() { NewTape().Linear(New(2, 3), New(4, 5), nil) }, []string{"[2 3]", "[4 5]"}},
		{"attention-heads", func() { NewTape().Attention(New(1, 2, 6), New(1, 2, 6), New(1, 2, 6), AttentionOptions{Heads: 4}) }, []string{"[1 2 6]", "4 heads"}},
		{"attention-batch", func() { NewTape().Attention(New(1, 2, 6), New(2, 2, 6), New(2, 2, 6), AttentionOptions{Heads: 2}) }, []string{"[1 2 6]", "[2 2 6]"}},
		{"attention-mask", func() {
			NewTape().Attention(New(1, 2, 6), New(1, 3, 6), New(1, 3, 6), AttentionOptions{Heads: 2, KeyValid: New(1, 2)})
		}, []string{"[1 2]", "[1 3 6]"}},
		{"grucell", func() { NewTape().GRUCell(New(2, 3, 9), 0, New(2, 9), New(2, 4), nil) }, []string{"[2 3 9]", "[2 4]"}},
		{"conv1d", func() { NewTape().Conv1d(New(1, 5, 3), New(2, 4, 3), nil, 1) }, []string{"[1 5 3]", "[2 4 3]"}},
		{"stack", func() { NewTape().Stack(0, New(2), New(3)) }, []string{"[2]", "[3]"}},
	}
	checkShapeErrors(t, cases)
}

// TestOneThreadScheduling checks the products that gemm and forEachHead
// run side by side (OpenBLAS on one thread per call) against plain calls
// (OpenBLAS's own threads): few-row column tiles, per-head attention tasks
// and their backward.
func TestOneThreadScheduling(t *testing.T) {
	ob, ok := blas.Current().(*blas.OpenBLAS)
	if !ok {
		t.Skip("needs OpenBLAS; in use: " + blas.Describe())
	}
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skipf("needs GOMAXPROCS > 1; this machine gives %d", runtime.GOMAXPROCS(0))
	}
	run := func() [][]float32 {
		x, w, b := rnd(1, 3, 4, 130), rnd(2, 3000, 130), rnd(3, 3000) // 12 rows: column tiles
		q := rnd(4, 3, 20, 48)
		ps := []*Tensor{x, w, b, q}
		for _, p := range ps {
			p.SetRequiresGrad(true)
			p.Grad = nil
		}
		tp := NewTape()
		tp.Seed(1, 1)
		y := tp.LinearReLU(x, w, b)                                                                                     // (3, 4, 3000)
		a := tp.Attention(q, q, q, AttentionOptions{Heads: 4, Dim: 16, KOff: 16, VOff: 32, Dropout: 0.2, Causal: true}) // (3, 20, 16)
		tp.Backward(tp.Add(tp.SumAll(tp.Mul(y, y)), tp.SumAll(tp.Mul(a, a))))
		out := [][]float32{y.Data, a.Data}
		for _, p := range ps {
			out = append(out, p.Grad)
		}
		return out
	}
	prevThreads, prevSplit := ob.Threads(), ob.Split()
	defer func() {
		ob.SetThreads(prevThreads)
		ob.SetSplit(prevSplit)
	}()
	ob.SetThreads(1)
	ob.SetSplit(runtime.GOMAXPROCS(0))
	if !oneThreadBLAS() {
		t.Fatal("one-thread scheduling is off with OpenBLAS on one thread")
	}
	tiled := run()
	ob.SetThreads(2)
	ob.SetSplit(1)
	if oneThreadBLAS() {
		t.Fatal("one-thread scheduling still on with OpenBLAS threads")
	}
	plain := run()
	for i := range plain {
		for j := range plain[i] {
			if d := math.Abs(float64(tiled[i][j] - plain[i][j])); d > 1e-3*(1+math.Abs(float64(plain[i][j]))) {
				t.Fatalf("result %d element %d: side by side %v, plain %v", i, j, tiled[i][j], plain[i][j])
			}
		}
	}
}

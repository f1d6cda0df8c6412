package tensor

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func rnd(seed uint64, shape ...int) *Tensor {
	return RandN(rand.New(rand.NewPCG(seed, 1)), shape...)
}

// awayFromZero shifts entries near 0 (kinks of relu, abs, clamp) away.
func awayFromZero(t *Tensor, margin float32) *Tensor {
	for i, v := range t.Data {
		if v >= 0 && v < margin {
			t.Data[i] = v + margin
		} else if v < 0 && v > -margin {
			t.Data[i] = v - margin
		}
	}
	return t
}

func positive(t *Tensor) *Tensor {
	for i, v := range t.Data {
		t.Data[i] = float32(math.Abs(float64(v))) + 0.5
	}
	return t
}

func TestGradients(t *testing.T) {
	mask := FromData([]float32{1, 1, 0, 1, 0, 1, 1, 1}, 2, 1, 4)
	ids := []int32{2, 0, 4, 2}
	cases := []struct {
		name   string
		inputs []*Tensor
		f      func(tp *Tape, x []*Tensor) *Tensor
	}{
		{"matmul", []*Tensor{rnd(1, 3, 4), rnd(2, 4, 5)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.MatMul(x[0], x[1], false, false) }},
		{"matmul-tA", []*Tensor{rnd(1, 4, 3), rnd(2, 4, 5)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.MatMul(x[0], x[1], true, false) }},
		{"matmul-tB", []*Tensor{rnd(1, 3, 4), rnd(2, 5, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.MatMul(x[0], x[1], false, true) }},
		{"matmul-tAtB", []*Tensor{rnd(1, 4, 3), rnd(2, 5, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.MatMul(x[0], x[1], true, true) }},
		{"matmul-rows", []*Tensor{rnd(1, 2, 3, 4), rnd(2, 4, 5)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.MatMul(x[0], x[1], false, false) }},
		{"matmul-rows-tB", []*Tensor{rnd(1, 2, 3, 4), rnd(2, 5, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.MatMul(x[0], x[1], false, true) }},
		{"bmm", []*Tensor{rnd(1, 2, 3, 4), rnd(2, 2, 4, 5)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.MatMul(x[0], x[1], false, false) }},
		{"bmm-tAtB", []*Tensor{rnd(1, 2, 2, 4, 3), rnd(2, 2, 2, 5, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.MatMul(x[0], x[1], true, true) }},
		{"add-same", []*Tensor{rnd(1, 3, 4), rnd(2, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Add(x[0], x[1]) }},
		{"add-bias", []*Tensor{rnd(1, 2, 3, 4), rnd(2, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Add(x[0], x[1]) }},
		{"add-general", []*Tensor{rnd(1, 3, 1, 4), rnd(2, 1, 5, 1)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Add(x[0], x[1]) }},
		{"sub-scalar", []*Tensor{rnd(1, 3, 4), rnd(2)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Sub(x[0], x[1]) }},
		{"sub-col", []*Tensor{rnd(1, 3, 4), rnd(2, 3, 1)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Sub(x[1], x[0]) }},
		{"mul", []*Tensor{rnd(1, 3, 4), rnd(2, 1, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Mul(x[0], x[1]) }},
		{"div", []*Tensor{rnd(1, 3, 4), positive(rnd(2, 3, 1))}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Div(x[0], x[1]) }},
		{"scale", []*Tensor{rnd(1, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Scale(x[0], -2.5) }},
		{"addscalar", []*Tensor{rnd(1, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.AddScalar(x[0], 0.3) }},
		{"neg", []*Tensor{rnd(1, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Neg(x[0]) }},
		{"abs", []*Tensor{awayFromZero(rnd(1, 3, 4), 0.1)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Abs(x[0]) }},
		{"exp", []*Tensor{rnd(1, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Exp(x[0]) }},
		{"log", []*Tensor{positive(rnd(1, 3, 4))}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Log(x[0]) }},
		{"sqrt", []*Tensor{positive(rnd(1, 3, 4))}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Sqrt(x[0]) }},
		{"relu", []*Tensor{awayFromZero(rnd(1, 3, 4), 0.1)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.ReLU(x[0]) }},
		{"gelu", []*Tensor{rnd(1, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.GELU(x[0]) }},
		{"tanh", []*Tensor{rnd(1, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Tanh(x[0]) }},
		{"sigmoid", []*Tensor{rnd(1, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Sigmoid(x[0]) }},
		{"clamp", []*Tensor{awayFromZero(rnd(1, 4, 5), 0.1)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Clamp(x[0], -0.5, 0.7) }},
		{"hinge", []*Tensor{awayFromZero(rnd(1, 4, 5), 0.1)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Hinge(x[0]) }},
		{"softmax-last", []*Tensor{rnd(1, 3, 5)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Softmax(x[0], -1, nil) }},
		{"softmax-mid", []*Tensor{rnd(1, 2, 4, 3)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Softmax(x[0], 1, nil) }},
		{"softmax-mask", []*Tensor{rnd(1, 2, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Softmax(x[0], -1, mask) }},
		{"logsoftmax", []*Tensor{rnd(1, 3, 5)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.LogSoftmax(x[0], 1, nil) }},
		{"logsoftmax-mask", []*Tensor{rnd(1, 2, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor {
			// Masked entries are -Inf: fill them before the checker sums.
			y := tp.LogSoftmax(x[0], -1, mask)
			return tp.MaskedFill(y, FromData(invert(mask.Data), mask.Shape...), 0)
		}},
		{"layernorm", []*Tensor{rnd(1, 3, 6), rnd(2, 6), rnd(3, 6)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.LayerNorm(x[0], x[1], x[2], 1e-5) }},
		{"layernorm-noaffine", []*Tensor{rnd(1, 2, 3, 5)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.LayerNorm(x[0], nil, nil, 1e-5) }},
		{"dropout", []*Tensor{rnd(1, 4, 6)}, func(tp *Tape, x []*Tensor) *Tensor {
			tp.Seed(7, 7)
			return tp.Dropout(x[0], 0.3)
		}},
		{"embedding", []*Tensor{rnd(1, 5, 3)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Embedding(x[0], ids) }},
		{"concat", []*Tensor{rnd(1, 2, 3), rnd(2, 2, 2), rnd(3, 2, 1)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Concat(1, x[0], x[1], x[2]) }},
		{"concat0", []*Tensor{rnd(1, 2, 3), rnd(2, 1, 3)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Concat(0, x[0], x[1]) }},
		{"narrow", []*Tensor{rnd(1, 3, 5, 2)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Narrow(x[0], 1, 1, 3) }},
		{"reshape", []*Tensor{rnd(1, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Mul(tp.Reshape(x[0], 2, -1), tp.Reshape(x[0], 2, 6)) }},
		{"transpose", []*Tensor{rnd(1, 2, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Transpose(x[0], 0, 2) }},
		{"permute", []*Tensor{rnd(1, 2, 3, 4, 2)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Permute(x[0], 2, 0, 3, 1) }},
		{"sum-axes", []*Tensor{rnd(1, 2, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Sum(x[0], false, 0, 2) }},
		{"sum-keep", []*Tensor{rnd(1, 2, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Sum(x[0], true, -1) }},
		{"sumall", []*Tensor{rnd(1, 2, 3)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.SumAll(x[0]) }},
		{"mean", []*Tensor{rnd(1, 2, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Mean(x[0], false, 1) }},
		{"meanall", []*Tensor{rnd(1, 2, 3)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.MeanAll(x[0]) }},
		{"max", []*Tensor{rnd(1, 2, 5, 3)}, func(tp *Tape, x []*Tensor) *Tensor { y, _ := tp.Max(x[0], 1, false, nil); return y }},
		{"max-mask", []*Tensor{rnd(1, 2, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor { y, _ := tp.Max(x[0], -1, true, mask); return y }},
		{"l2norm", []*Tensor{rnd(1, 3, 5)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.L2Normalize(x[0], 1e-12) }},
		{"maskedfill", []*Tensor{rnd(1, 2, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.MaskedFill(x[0], mask, -3) }},
		{"order-violation", []*Tensor{rnd(1, 5, 3), rnd(2, 3, 3)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.OrderViolation(x[0], x[1]) }},
		{"crossentropy", []*Tensor{rnd(1, 4, 5)}, func(tp *Tape, x []*Tensor) *Tensor {
			return tp.CrossEntropy(x[0], []int32{1, -100, 4, 0}, -100)
		}},
		{"chain", []*Tensor{rnd(1, 3, 4), rnd(2, 4, 4), rnd(3, 4)}, func(tp *Tape, x []*Tensor) *Tensor {
			h := tp.Tanh(tp.Add(tp.MatMul(x[0], x[1], false, false), x[2]))
			return tp.Softmax(tp.MatMul(h, h, false, true), -1, nil)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := GradCheck(func(tp *Tape) *Tensor { return c.f(tp, c.inputs) }, c.inputs, GradCheckOptions{})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func invert(m []float32) []float32 {
	out := make([]float32, len(m))
	for i, v := range m {
		if v == 0 {
			out[i] = 1
		}
	}
	return out
}

// TestGradCheckCatchesWrongGradient makes sure the checker's tolerance
// cannot be passed by a gradient that is off by a factor.
func TestGradCheckCatchesWrongGradient(t *testing.T) {
	x := rnd(1, 3, 4)
	wrong := func(tp *Tape) *Tensor {
		// A deliberately wrong op: forward x^2, backward 1.5x.
		out := tp.newTensor(x.Shape)
		for i, v := range x.Data {
			out.Data[i] = v * v
		}
		if tp.needs(x) {
			tp.record(out, func(g []float32) {
				gx := tp.grad(x)
				for i := range g {
					gx[i] += g[i] * 1.5 * x.Data[i]
				}
			})
		}
		return out
	}
	if err := GradCheck(wrong, []*Tensor{x}, GradCheckOptions{}); err == nil {
		t.Fatal("a wrong gradient passed the check")
	}
}

func TestForwardValues(t *testing.T) {
	a := FromData([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	b := FromData([]float32{1, 0, 0, 1, 1, 1}, 3, 2)
	var tp *Tape
	got := tp.MatMul(a, b, false, false)
	want := []float32{4, 5, 10, 11}
	for i := range want {
		if got.Data[i] != want[i] {
			t.Fatalf("matmul = %v, want %v", got.Data, want)
		}
	}
	s := tp.Softmax(FromData([]float32{0, 0, math.Float32frombits(0xff800000)}, 3), 0, nil)
	if math.Abs(float64(s.Data[0])-0.5) > 1e-6 || s.Data[2] != 0 {
		t.Fatalf("softmax with -inf = %v", s.Data)
	}
	m, arg := tp.Max(FromData([]float32{1, 5, 2, 7, 3, 0}, 2, 3), 1, false, nil)
	if m.Data[0] != 5 || m.Data[1] != 7 || arg[0] != 1 || arg[1] != 0 {
		t.Fatalf("max = %v argmax %v", m.Data, arg)
	}
	p := tp.Permute(FromData([]float32{0, 1, 2, 3, 4, 5}, 2, 3), 1, 0)
	wantP := []float32{0, 3, 1, 4, 2, 5}
	for i := range wantP {
		if p.Data[i] != wantP[i] {
			t.Fatalf("permute = %v, want %v", p.Data, wantP)
		}
	}
	ln := tp.LayerNorm(FromData([]float32{1, 2, 3, 4}, 1, 4), nil, nil, 0)
	// mean 2.5, var 1.25
	if math.Abs(float64(ln.Data[0])+1.5/math.Sqrt(1.25)) > 1e-5 {
		t.Fatalf("layernorm = %v", ln.Data)
	}
	ce := tp.CrossEntropy(FromData([]float32{0, 0, 0, 0}, 2, 2), []int32{0, 1}, -1)
	if math.Abs(float64(ce.Data[0])-math.Ln2) > 1e-6 {
		t.Fatalf("cross-entropy = %v, want ln 2", ce.Data[0])
	}
}

func TestShapeErrorsNameShapes(t *testing.T) {
	cases := []struct {
		name string
		f    func()
		want []string
	}{
		{"matmul", func() { (*Tape)(nil).MatMul(New(2, 3), New(4, 5), false, false) }, []string{"[2 3]", "[4 5]"}},
		{"add", func() { (*Tape)(nil).Add(New(2, 3), New(4, 5)) }, []string{"[2 3]", "[4 5]"}},
		{"reshape", func() { (*Tape)(nil).Reshape(New(2, 3), 4, 2) }, []string{"[2 3]", "[4 2]"}},
		{"concat", func() { (*Tape)(nil).Concat(0, New(2, 3), New(2, 4)) }, []string{"[2 3]", "[2 4]"}},
		{"embedding", func() { (*Tape)(nil).Embedding(New(3, 2), []int32{5}) }, []string{"id 5"}},
	}
	checkShapeErrors(t, cases)
}

func TestNoGradAllocatesNoTape(t *testing.T) {
	w := rnd(1, 8, 8).SetRequiresGrad(true)
	x := rnd(2, 4, 8)
	var tp *Tape
	y := tp.ReLU(tp.MatMul(x, w, false, false))
	if tp.Len() != 0 || w.Grad != nil {
		t.Fatal("no-grad forward recorded operations")
	}
	fwd := func(tp *Tape) {
		tp.Softmax(tp.Add(tp.MatMul(x, w, false, false), y), -1, nil)
	}
	noGrad := testing.AllocsPerRun(20, func() { fwd(nil) })
	// The same forward with weights that need no gradient: a nil tape must
	// allocate exactly as much, i.e. nothing for nodes or closures.
	w.SetRequiresGrad(false)
	plain := testing.AllocsPerRun(20, func() { fwd(nil) })
	w.SetRequiresGrad(true)
	if noGrad != plain {
		t.Fatalf("no-grad forward over trainable weights made %v allocations, over constants %v", noGrad, plain)
	}
	rec := NewTape()
	fwd(rec)
	if rec.Len() != 3 {
		t.Fatalf("recording tape has %d nodes, want 3", rec.Len())
	}
}

func TestTapeResetRecyclesBuffers(t *testing.T) {
	w := rnd(1, 16, 16).SetRequiresGrad(true)
	x := rnd(2, 4, 16)
	tp := NewTape()
	step := func() float32 {
		loss := tp.MeanAll(tp.Tanh(tp.MatMul(x, w, false, false)))
		tp.Backward(loss)
		v := loss.Item()
		tp.Reset()
		return v
	}
	first := step()
	g1 := append([]float32(nil), w.Grad...)
	w.ZeroGrad()
	if second := step(); second != first {
		t.Fatalf("second step loss %v != first %v", second, first)
	}
	for i := range g1 {
		if g1[i] != w.Grad[i] {
			t.Fatal("gradients differ after buffer reuse")
		}
	}
}

func TestLearnsRegression(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	// y = x W* + noise; learn W by gradient descent.
	wTrue := RandN(rng, 5, 2)
	x := RandN(rng, 64, 5)
	y := (*Tape)(nil).MatMul(x, wTrue, false, false)
	w := New(5, 2).SetRequiresGrad(true)
	tp := NewTape()
	var first, last float32
	for it := 0; it < 200; it++ {
		d := tp.Sub(tp.MatMul(x, w, false, false), y)
		loss := tp.MeanAll(tp.Mul(d, d))
		tp.Backward(loss)
		if it == 0 {
			first = loss.Item()
		}
		last = loss.Item()
		for i := range w.Data {
			w.Data[i] -= 0.1 * w.Grad[i]
		}
		w.ZeroGrad()
		tp.Reset()
	}
	if last > first*1e-3 || last > 1e-3 {
		t.Fatalf("loss went from %v to %v", first, last)
	}
}

// shapeErrCase is an operation on misfitting operands and the words its
// error must contain.
type shapeErrCase = struct {
	name string
	f    func()
	want []string
}

// checkShapeErrors runs each case under Try: it must fail with an error
// that names the shapes.
func checkShapeErrors(t *testing.T, cases []shapeErrCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Try(c.f)
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

package tensor

import (
	"fmt"
	"math"
	"testing"
)

// samePads returns TensorFlow's SAME output length and padding before, for
// the naive references (written out apart from conv2dGeom).
func samePads(in, k, s int) (out, before int) {
	out = int(math.Ceil(float64(in) / float64(s)))
	total := (out-1)*s + k - in
	if total < 0 {
		total = 0
	}
	return out, total / 2
}

// naiveGeom is the output size and top/left padding along one axis.
func naiveGeom(in, k, s int, same bool) (out, before int) {
	if same {
		return samePads(in, k, s)
	}
	return (in-k)/s + 1, 0
}

// naiveConv2d is TensorFlow's conv2d (NHWC, HWIO) as the textbook loops in
// float64; depthwise treats w as (K, K, C, 1).
func naiveConv2d(x, w, b *Tensor, s int, same, depthwise bool) (shape []int, out []float64) {
	n, h, wi, cin := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	k := w.Shape[0]
	cout := w.Shape[3]
	if depthwise {
		cout = cin
	}
	ho, pt := naiveGeom(h, k, s, same)
	wo, pl := naiveGeom(wi, k, s, same)
	out = make([]float64, n*ho*wo*cout)
	for in := 0; in < n; in++ {
		for oy := 0; oy < ho; oy++ {
			for ox := 0; ox < wo; ox++ {
				for o := 0; o < cout; o++ {
					var acc float64
					if b != nil {
						acc = float64(b.Data[o])
					}
					for ky := 0; ky < k; ky++ {
						for kx := 0; kx < k; kx++ {
							iy, ix := oy*s+ky-pt, ox*s+kx-pl
							if iy < 0 || iy >= h || ix < 0 || ix >= wi {
								continue
							}
							if depthwise {
								acc += float64(w.At(ky, kx, o, 0)) * float64(x.At(in, iy, ix, o))
								continue
							}
							for i := 0; i < cin; i++ {
								acc += float64(w.At(ky, kx, i, o)) * float64(x.At(in, iy, ix, i))
							}
						}
					}
					out[((in*ho+oy)*wo+ox)*cout+o] = acc
				}
			}
		}
	}
	return []int{n, ho, wo, cout}, out
}

// conv2dCase is one configuration of a 2-D convolution test.
type conv2dCase struct {
	k, s, h, w int
	same, bias bool
}

func (c conv2dCase) String() string {
	pad := "valid"
	if c.same {
		pad = "same"
	}
	return fmt.Sprintf("k%d-s%d-%dx%d-%s-bias%v", c.k, c.s, c.h, c.w, pad, c.bias)
}

// conv2dCases lists kernels ks at strides 1 and 2, SAME and VALID, on odd
// and even maps, with and without bias.
func conv2dCases(ks ...int) []conv2dCase {
	var cs []conv2dCase
	for _, k := range ks {
		for _, s := range []int{1, 2} {
			for _, same := range []bool{true, false} {
				for _, hw := range [][2]int{{7, 6}, {8, 8}} {
					for _, bias := range []bool{true, false} {
						cs = append(cs, conv2dCase{k, s, hw[0], hw[1], same, bias})
					}
				}
			}
		}
	}
	return cs
}

// checkAgainstNaive compares got with the reference values and shape.
func checkAgainstNaive(t *testing.T, got *Tensor, shape []int, want []float64) {
	t.Helper()
	if !sameShape(got.Shape, shape) {
		t.Fatalf("shape %v, want %v", got.Shape, shape)
	}
	for i, v := range want {
		if d := math.Abs(float64(got.Data[i]) - v); d > 1e-4*math.Max(1, math.Abs(v)) {
			t.Fatalf("element %d = %v, want %v", i, got.Data[i], v)
		}
	}
}

func TestConv2dMatchesNaive(t *testing.T) {
	const n, cin, cout = 2, 3, 5
	for i, c := range conv2dCases(1, 3, 5) {
		t.Run(c.String(), func(t *testing.T) {
			seed := uint64(10 * i)
			x, w := rnd(seed+1, n, c.h, c.w, cin), rnd(seed+2, c.k, c.k, cin, cout)
			var b *Tensor
			if c.bias {
				b = rnd(seed+3, cout)
			}
			shape, want := naiveConv2d(x, w, b, c.s, c.same, false)
			for _, tp := range []*Tape{nil, NewTape()} {
				checkAgainstNaive(t, tp.Conv2d(x, w, b, c.s, c.same), shape, want)
			}
		})
	}
}

func TestDepthwiseConv2dMatchesNaive(t *testing.T) {
	const n, ch = 2, 6
	for i, c := range conv2dCases(3, 5) {
		t.Run(c.String(), func(t *testing.T) {
			seed := uint64(10 * i)
			x, w := rnd(seed+1, n, c.h, c.w, ch), rnd(seed+2, c.k, c.k, ch, 1)
			var b *Tensor
			if c.bias {
				b = rnd(seed+3, ch)
			}
			shape, want := naiveConv2d(x, w, b, c.s, c.same, true)
			for _, tp := range []*Tape{nil, NewTape()} {
				checkAgainstNaive(t, tp.DepthwiseConv2d(x, w, b, c.s, c.same), shape, want)
			}
		})
	}
}

// TestConv2dGeometry checks TensorFlow's output sizes and SAME padding on
// sizes worked out by hand, including an odd total padding (more after).
func TestConv2dGeometry(t *testing.T) {
	cases := []struct {
		in, k, s  int
		same      bool
		out, padT int
	}{
		{7, 3, 2, true, 4, 1},   // total (4-1)*2+3-7 = 2
		{8, 3, 2, true, 4, 0},   // total 1: none before, one after
		{8, 5, 2, true, 4, 1},   // total 3
		{32, 5, 2, true, 16, 1}, // MobileNetV3's stride-2 5x5
		{6, 1, 2, true, 3, 0},
		{7, 3, 1, true, 7, 1},
		{7, 3, 2, false, 3, 0},
		{8, 5, 1, false, 4, 0},
		{5, 5, 3, false, 1, 0},
	}
	for _, c := range cases {
		out, pad := conv2dGeom(c.in, c.k, c.s, c.same)
		if out != c.out || pad != c.padT {
			t.Errorf("in %d k %d s %d same %v: out %d pad %d, want %d %d", c.in, c.k, c.s, c.same, out, pad, c.out, c.padT)
		}
	}
}

func TestConv2dGradients(t *testing.T) {
	type tc struct {
		name   string
		inputs []*Tensor
		f      func(tp *Tape, x []*Tensor) *Tensor
	}
	conv := func(s int, same bool) func(tp *Tape, x []*Tensor) *Tensor {
		return func(tp *Tape, x []*Tensor) *Tensor { return tp.Conv2d(x[0], x[1], x[2], s, same) }
	}
	dw := func(s int, same bool) func(tp *Tape, x []*Tensor) *Tensor {
		return func(tp *Tape, x []*Tensor) *Tensor { return tp.DepthwiseConv2d(x[0], x[1], x[2], s, same) }
	}
	// Weights outside the inputs: only x requires a gradient.
	wFixed, dwFixed := rnd(40, 3, 3, 3, 4), rnd(41, 3, 3, 4, 1)
	cases := []tc{
		{"conv-k3-s2-same-even", []*Tensor{rnd(1, 2, 6, 6, 3), rnd(2, 3, 3, 3, 4), rnd(3, 4)}, conv(2, true)},
		{"conv-k3-s2-same-odd", []*Tensor{rnd(1, 2, 7, 5, 3), rnd(2, 3, 3, 3, 4), rnd(3, 4)}, conv(2, true)},
		{"conv-k5-s2-same-even", []*Tensor{rnd(1, 2, 6, 8, 2), rnd(2, 5, 5, 2, 3), rnd(3, 3)}, conv(2, true)},
		{"conv-k1-s1-direct", []*Tensor{rnd(1, 2, 5, 4, 6), rnd(2, 1, 1, 6, 5), rnd(3, 5)}, conv(1, true)},
		{"conv-k1-s2", []*Tensor{rnd(1, 2, 5, 4, 6), rnd(2, 1, 1, 6, 5), rnd(3, 5)}, conv(2, false)},
		{"conv-k3-s1-valid", []*Tensor{rnd(1, 2, 6, 5, 3), rnd(2, 3, 3, 3, 4), rnd(3, 4)}, conv(1, false)},
		{"conv-k3-s2-valid-nobias", []*Tensor{rnd(1, 2, 7, 6, 3), rnd(2, 3, 3, 3, 4)}, func(tp *Tape, x []*Tensor) *Tensor {
			return tp.Conv2d(x[0], x[1], nil, 2, false)
		}},
		{"conv-x-only", []*Tensor{rnd(1, 2, 6, 5, 3)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.Conv2d(x[0], wFixed, nil, 2, true) }},
		{"dw-k3-s2-same-even", []*Tensor{rnd(1, 2, 6, 6, 4), rnd(2, 3, 3, 4, 1), rnd(3, 4)}, dw(2, true)},
		{"dw-k5-s2-same-odd", []*Tensor{rnd(1, 2, 7, 5, 4), rnd(2, 5, 5, 4, 1), rnd(3, 4)}, dw(2, true)},
		{"dw-k5-s2-same-even", []*Tensor{rnd(1, 2, 8, 8, 3), rnd(2, 5, 5, 3, 1), rnd(3, 3)}, dw(2, true)},
		{"dw-k3-s1-same", []*Tensor{rnd(1, 2, 5, 6, 4), rnd(2, 3, 3, 4, 1), rnd(3, 4)}, dw(1, true)},
		{"dw-k3-s1-valid", []*Tensor{rnd(1, 2, 6, 5, 4), rnd(2, 3, 3, 4, 1), rnd(3, 4)}, dw(1, false)},
		{"dw-k3-s2-valid-nobias", []*Tensor{rnd(1, 2, 7, 6, 4), rnd(2, 3, 3, 4, 1)}, func(tp *Tape, x []*Tensor) *Tensor {
			return tp.DepthwiseConv2d(x[0], x[1], nil, 2, false)
		}},
		{"dw-x-only", []*Tensor{rnd(1, 2, 6, 5, 4)}, func(tp *Tape, x []*Tensor) *Tensor { return tp.DepthwiseConv2d(x[0], dwFixed, nil, 2, true) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := GradCheck(func(tp *Tape) *Tensor { return c.f(tp, c.inputs) }, c.inputs, GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// naiveConv2dBackward returns the gradients of naiveConv2d's inputs for
// the output gradient g, in float64.
func naiveConv2dBackward(x, w, g *Tensor, s int, same, depthwise bool) (dx, dw, db []float64) {
	n, h, wi, cin := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	k, cout := w.Shape[0], w.Shape[3]
	if depthwise {
		cout = cin
	}
	ho, pt := naiveGeom(h, k, s, same)
	wo, pl := naiveGeom(wi, k, s, same)
	dx, dw, db = make([]float64, len(x.Data)), make([]float64, len(w.Data)), make([]float64, cout)
	for in := 0; in < n; in++ {
		for oy := 0; oy < ho; oy++ {
			for ox := 0; ox < wo; ox++ {
				for o := 0; o < cout; o++ {
					gv := float64(g.At(in, oy, ox, o))
					db[o] += gv
					for ky := 0; ky < k; ky++ {
						for kx := 0; kx < k; kx++ {
							iy, ix := oy*s+ky-pt, ox*s+kx-pl
							if iy < 0 || iy >= h || ix < 0 || ix >= wi {
								continue
							}
							if depthwise {
								xi, wj := ((in*h+iy)*wi+ix)*cin+o, (ky*k+kx)*cin+o
								dx[xi] += gv * float64(w.Data[wj])
								dw[wj] += gv * float64(x.Data[xi])
								continue
							}
							for i := 0; i < cin; i++ {
								xi, wj := ((in*h+iy)*wi+ix)*cin+i, ((ky*k+kx)*cin+i)*cout+o
								dx[xi] += gv * float64(w.Data[wj])
								dw[wj] += gv * float64(x.Data[xi])
							}
						}
					}
				}
			}
		}
	}
	return dx, dw, db
}

// TestConv2dBackwardMatchesNaive checks all three gradients on maps large
// enough for every kernel to split over goroutines (and the depthwise
// weight gradient over blocks of rows), against the naive sums.
func TestConv2dBackwardMatchesNaive(t *testing.T) {
	cases := []struct {
		name         string
		n, h, w, cin int
		k, cout, s   int
		same, dw     bool
	}{
		{"conv-k3-s1-same", 2, 16, 16, 8, 3, 6, 1, true, false},
		{"conv-k3-s2-same", 2, 17, 16, 8, 3, 6, 2, true, false},
		{"conv-k5-s2-valid", 2, 16, 15, 8, 5, 6, 2, false, false},
		{"conv-k1-direct", 2, 16, 16, 24, 1, 40, 1, true, false},
		{"dw-k5-s2-same", 4, 16, 16, 40, 5, 1, 2, true, true},
		{"dw-k3-s1-valid", 2, 15, 16, 40, 3, 1, 1, false, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seed := uint64(10 * i)
			x := rnd(seed+1, c.n, c.h, c.w, c.cin).SetRequiresGrad(true)
			w := rnd(seed+2, c.k, c.k, c.cin, c.cout).SetRequiresGrad(true)
			nOut := c.cout
			if c.dw {
				nOut = c.cin
			}
			b := rnd(seed+3, nOut).SetRequiresGrad(true)
			tp := NewTape()
			var y *Tensor
			if c.dw {
				y = tp.DepthwiseConv2d(x, w, b, c.s, c.same)
			} else {
				y = tp.Conv2d(x, w, b, c.s, c.same)
			}
			if c.dw {
				if nr := c.n * y.Shape[1]; nr*y.Shape[2]*c.k*c.k*c.cin < minParallel || nr < depthwiseParts {
					t.Fatalf("map too small to split the weight gradient: %d rows", nr)
				}
			}
			g := rnd(seed+4, y.Shape...)
			tp.BackwardWithGrad(y, g.Data)
			dx, dw, db := naiveConv2dBackward(x, w, g, c.s, c.same, c.dw)
			for _, r := range []struct {
				name string
				got  []float32
				want []float64
			}{{"x", x.Grad, dx}, {"w", w.Grad, dw}, {"b", b.Grad, db}} {
				for j, v := range r.want {
					if d := math.Abs(float64(r.got[j]) - v); d > 1e-4*math.Max(1, math.Abs(v)) {
						t.Fatalf("gradient of %s element %d = %v, want %v", r.name, j, r.got[j], v)
					}
				}
			}
		})
	}
}

func TestConv2dNoGradMatchesTaped(t *testing.T) {
	x := rnd(1, 2, 7, 6, 4)
	for _, c := range []struct {
		name string
		f    func(tp *Tape, x, w, b *Tensor) *Tensor
		w, b *Tensor
	}{
		{"conv-k3-s2", func(tp *Tape, x, w, b *Tensor) *Tensor { return tp.Conv2d(x, w, b, 2, true) }, rnd(2, 3, 3, 4, 5), rnd(3, 5)},
		{"conv-k1", func(tp *Tape, x, w, b *Tensor) *Tensor { return tp.Conv2d(x, w, b, 1, true) }, rnd(2, 1, 1, 4, 5), rnd(3, 5)},
		{"depthwise-k5-s2", func(tp *Tape, x, w, b *Tensor) *Tensor { return tp.DepthwiseConv2d(x, w, b, 2, true) }, rnd(2, 5, 5, 4, 1), rnd(3, 4)},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := c.f(nil, x, c.w, c.b)
			w, b := c.w.Clone().SetRequiresGrad(true), c.b.Clone().SetRequiresGrad(true)
			tp := NewTape()
			got := c.f(tp, x, w, b)
			if tp.Len() != 1 {
				t.Fatalf("taped call recorded %d ops, want 1", tp.Len())
			}
			if !sameShape(got.Shape, want.Shape) {
				t.Fatalf("shape %v, no-grad %v", got.Shape, want.Shape)
			}
			for i := range want.Data {
				if got.Data[i] != want.Data[i] {
					t.Fatalf("element %d: taped %v, no-grad %v", i, got.Data[i], want.Data[i])
				}
			}
			// Inputs that need no gradient record nothing.
			tp2 := NewTape()
			c.f(tp2, x, c.w, c.b)
			if tp2.Len() != 0 {
				t.Fatalf("op over constants recorded %d ops", tp2.Len())
			}
		})
	}
}

// TestConv2dBackwardAndReset runs a MobileNet-like block (expand 1x1,
// depthwise 5x5 stride 2, project 1x1) with every released buffer
// poisoned and weight gradients on the worker, against Backward.
func TestConv2dBackwardAndReset(t *testing.T) {
	x := rnd(1, 2, 8, 8, 6)
	params := []*Tensor{
		rnd(2, 1, 1, 6, 12), rnd(3, 12), rnd(4, 5, 5, 12, 1), rnd(5, 12),
		rnd(6, 3, 3, 12, 7), rnd(7, 7),
	}
	for _, p := range params {
		p.SetRequiresGrad(true)
	}
	run := func(release bool) [][]float32 {
		for _, p := range params {
			p.ZeroGrad()
		}
		tp := NewTape()
		h := tp.ReLU(tp.Conv2d(x, params[0], params[1], 1, true))
		h = tp.ReLU(tp.DepthwiseConv2d(h, params[2], params[3], 2, true))
		h = tp.Conv2d(h, params[4], params[5], 1, false)
		loss := tp.SumAll(tp.Mul(h, h))
		if release {
			enabled, minWork := asyncEnabled, asyncMinWork
			asyncEnabled, asyncMinWork = func() bool { return true }, 0
			PoisonReleased = true
			defer func() { asyncEnabled, asyncMinWork, PoisonReleased = enabled, minWork, false }()
			tp.BackwardAndReset(loss)
		} else {
			tp.Backward(loss)
			tp.Reset()
		}
		var grads [][]float32
		for _, p := range params {
			grads = append(grads, append([]float32(nil), p.Grad...))
		}
		return grads
	}
	want := run(false)
	got := run(true)
	for i := range want {
		for j, v := range want[i] {
			if d := math.Abs(float64(got[i][j] - v)); !(d <= 1e-5*(1+math.Abs(float64(v)))) {
				t.Fatalf("parameter %d value %d: gradient %g, want %g", i, j, got[i][j], v)
			}
		}
	}
}

func TestConv2dShapeErrors(t *testing.T) {
	tp := NewTape()
	checkShapeErrors(t, []shapeErrCase{
		{"conv-input-rank", func() { tp.Conv2d(New(2, 8, 3), New(3, 3, 3, 4), nil, 1, true) }, []string{"Conv2d", "[2 8 3]", "[3 3 3 4]"}},
		{"conv-weight-rank", func() { tp.Conv2d(New(2, 8, 8, 3), New(3, 3, 4), nil, 1, true) }, []string{"Conv2d", "[2 8 8 3]", "[3 3 4]"}},
		{"conv-weight-square", func() { tp.Conv2d(New(2, 8, 8, 3), New(3, 1, 3, 4), nil, 1, true) }, []string{"[2 8 8 3]", "[3 1 3 4]"}},
		{"conv-channels", func() { tp.Conv2d(New(2, 8, 8, 3), New(3, 3, 5, 4), nil, 1, true) }, []string{"[2 8 8 3]", "[3 3 5 4]"}},
		{"conv-bias", func() { tp.Conv2d(New(2, 8, 8, 3), New(3, 3, 3, 4), New(3), 1, true) }, []string{"bias [3]", "[3 3 3 4]"}},
		{"conv-stride", func() { tp.Conv2d(New(2, 8, 8, 3), New(3, 3, 3, 4), nil, 0, true) }, []string{"stride 0", "[2 8 8 3]"}},
		{"conv-kernel", func() { tp.Conv2d(New(2, 4, 8, 3), New(5, 5, 3, 4), nil, 1, false) }, []string{"[2 4 8 3]", "[5 5 3 4]", "VALID"}},
		{"dw-input-rank", func() { tp.DepthwiseConv2d(New(8, 8, 3), New(3, 3, 3, 1), nil, 1, true) }, []string{"DepthwiseConv2d", "[8 8 3]", "[3 3 3 1]"}},
		{"dw-multiplier", func() { tp.DepthwiseConv2d(New(2, 8, 8, 3), New(3, 3, 3, 2), nil, 1, true) }, []string{"[2 8 8 3]", "[3 3 3 2]"}},
		{"dw-channels", func() { tp.DepthwiseConv2d(New(2, 8, 8, 3), New(3, 3, 4, 1), nil, 1, true) }, []string{"[2 8 8 3]", "[3 3 4 1]"}},
		{"dw-bias", func() { tp.DepthwiseConv2d(New(2, 8, 8, 3), New(3, 3, 3, 1), New(4), 1, true) }, []string{"bias [4]", "[3 3 3 1]"}},
		{"dw-stride", func() { tp.DepthwiseConv2d(New(2, 8, 8, 3), New(3, 3, 3, 1), nil, -1, true) }, []string{"stride -1", "[2 8 8 3]"}},
		{"dw-kernel", func() { tp.DepthwiseConv2d(New(2, 8, 2, 3), New(3, 3, 3, 1), nil, 2, false) }, []string{"[2 8 2 3]", "[3 3 3 1]", "VALID"}},
	})
}

func benchConv(b *testing.B, f func(tp *Tape) *Tensor) {
	tp := NewTape()
	y := f(tp)
	g := make([]float32, len(y.Data))
	for i := range g {
		g[i] = 1e-3
	}
	tp.Reset()
	b.ResetTimer()
	for range b.N {
		y := f(tp)
		tp.BackwardWithGrad(y, g)
		tp.Reset()
	}
}

// BenchmarkConv2d1x1 is a MobileNetV3 expansion: 32x32x88 -> 504, forward
// and backward, batch 16.
func BenchmarkConv2d1x1(b *testing.B) {
	x := rnd(1, 16, 32, 32, 88).SetRequiresGrad(true)
	w, bias := rnd(2, 1, 1, 88, 504).SetRequiresGrad(true), rnd(3, 504).SetRequiresGrad(true)
	benchConv(b, func(tp *Tape) *Tensor { return tp.Conv2d(x, w, bias, 1, true) })
}

// BenchmarkDepthwiseConv2d is a MobileNetV3 depthwise 5x5 stride 2 on
// 32x32x504, forward and backward, batch 16.
func BenchmarkDepthwiseConv2d(b *testing.B) {
	x := rnd(1, 16, 32, 32, 504).SetRequiresGrad(true)
	w, bias := rnd(2, 5, 5, 504, 1).SetRequiresGrad(true), rnd(3, 504).SetRequiresGrad(true)
	benchConv(b, func(tp *Tape) *Tensor { return tp.DepthwiseConv2d(x, w, bias, 2, true) })
}

package tensor

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// hardSwishRef is the detector graph's four nodes, each rounded to float32.
func hardSwishRef(x float32) float32 {
	m := float32(1.0/6) * x
	a := x + 3
	r := min(max(a, 0), 6)
	return m * r
}

func TestHardSwishMatchesGraph(t *testing.T) {
	var xs []float32
	for v := float32(-5); v <= 5; v += 0.125 {
		xs = append(xs, v)
	}
	xs = append(xs, -3, 3, math.Nextafter32(-3, 0), math.Nextafter32(-3, -4), math.Nextafter32(3, 0),
		math.Nextafter32(3, 4), 0, float32(math.Copysign(0, -1)), 1e-7, -1e-7, 2.9999998, 1.0/3, -2.7182817)
	rng := rand.New(rand.NewPCG(7, 7))
	for range 200 {
		xs = append(xs, float32(rng.Float64()*10-5))
	}
	x := FromData(xs, len(xs))
	for _, tp := range []*Tape{nil, NewTape()} {
		y := tp.HardSwish(x)
		for i, v := range xs {
			if want := hardSwishRef(v); math.Float32bits(y.Data[i]) != math.Float32bits(want) {
				t.Fatalf("tape %v: HardSwish(%v) = %v, want %v", tp != nil, v, y.Data[i], want)
			}
		}
	}
}

func TestHardSwishGradient(t *testing.T) {
	// Values across -5..5 kept 0.05 away from the kinks at -3 and 3.
	x := rnd(1, 3, 40)
	for i, v := range x.Data {
		v *= 2.5
		for _, k := range []float32{-3, 3} {
			if d := v - k; d >= 0 && d < 0.05 {
				v = k + 0.05
			} else if d < 0 && d > -0.05 {
				v = k - 0.05
			}
		}
		x.Data[i] = v
	}
	if err := GradCheck(func(tp *Tape) *Tensor { return tp.HardSwish(x) }, []*Tensor{x}, GradCheckOptions{MaxPerInput: 120}); err != nil {
		t.Fatal(err)
	}
	// With the detector graph's float16 constant in place of 1/6.
	if err := GradCheck(func(tp *Tape) *Tensor { return tp.HardSwishScaled(x, 0.16662598) }, []*Tensor{x}, GradCheckOptions{MaxPerInput: 120}); err != nil {
		t.Fatal(err)
	}
	y := (*Tape)(nil).HardSwishScaled(x, 0.16662598)
	for i, v := range x.Data {
		if got, want := y.Data[i], (v*0.16662598)*min(max(v+3, 0), 6); got != want {
			t.Fatalf("HardSwishScaled(%v) = %v, want %v", v, got, want)
		}
	}
	// The derivative at and beyond the kinks, as TensorFlow's Relu6
	// gradient takes it.
	for _, c := range []struct{ x, d float32 }{{-4, 0}, {-3, 0}, {-1.5, 0}, {0, 0.5}, {1.5, 1}, {3, 1}, {4, 1}} {
		p := FromData([]float32{c.x}, 1).SetRequiresGrad(true)
		tp := NewTape()
		tp.Backward(tp.HardSwish(p))
		if got := p.Grad[0]; math.Abs(float64(got-c.d)) > 1e-6 {
			t.Errorf("d HardSwish/dx at %v = %v, want %v", c.x, got, c.d)
		}
	}
}

// naiveResize is TF1's ResizeBilinear (align_corners and
// half_pixel_centers false) element by element.
func naiveResize(x *Tensor, oh, ow int) []float32 {
	nb, h, w, c := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	out := make([]float32, 0, nb*oh*ow*c)
	hs, ws := float32(h)/float32(oh), float32(w)/float32(ow)
	for n := range nb {
		for oy := range oh {
			in := float32(oy) * hs
			ylo := int(math.Floor(float64(in)))
			yhi := min(ylo+1, h-1)
			yl := in - float32(ylo)
			for ox := range ow {
				in := float32(ox) * ws
				xlo := int(math.Floor(float64(in)))
				xhi := min(xlo+1, w-1)
				xl := in - float32(xlo)
				for ch := range c {
					tl, tr := x.At(n, ylo, xlo, ch), x.At(n, ylo, xhi, ch)
					bl, br := x.At(n, yhi, xlo, ch), x.At(n, yhi, xhi, ch)
					top := tl + (tr-tl)*xl
					bot := bl + (br-bl)*xl
					out = append(out, top+(bot-top)*yl)
				}
			}
		}
	}
	return out
}

func TestResizeBilinear(t *testing.T) {
	cases := []struct {
		name      string
		x         *Tensor
		oh, ow    int
		gradCheck bool
	}{
		{"up2x", rnd(1, 2, 4, 4, 3), 8, 8, true},
		{"non-integer", rnd(2, 1, 5, 3, 2), 7, 8, true},
		{"down", rnd(3, 2, 7, 9, 2), 3, 4, true},
		{"same", rnd(4, 1, 3, 5, 2), 3, 5, false},
		{"1x1", rnd(5, 1, 1, 1, 3), 2, 3, false},
		{"wide", rnd(6, 1, 2, 6, 1), 5, 13, false},
		// Large enough for parallelFor to split rows and images.
		{"parallel", rnd(7, 3, 5, 6, 16), 11, 13, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := naiveResize(c.x, c.oh, c.ow)
			for _, tp := range []*Tape{nil, NewTape()} {
				got := tp.ResizeBilinear(c.x, c.oh, c.ow)
				if wantShape := []int{c.x.Shape[0], c.oh, c.ow, c.x.Shape[3]}; !sameShape(got.Shape, wantShape) {
					t.Fatalf("shape %v, want %v", got.Shape, wantShape)
				}
				for i := range want {
					if math.Float32bits(got.Data[i]) != math.Float32bits(want[i]) {
						t.Fatalf("tape %v: element %d = %v, want %v", tp != nil, i, got.Data[i], want[i])
					}
				}
			}
			if !c.gradCheck {
				return
			}
			x := c.x.Clone()
			if err := GradCheck(func(tp *Tape) *Tensor { return tp.ResizeBilinear(x, c.oh, c.ow) }, []*Tensor{x}, GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// naiveROI follows extract.ROIAlign and bilinearAdd line by line on image
// n of x, returning the pooled C values.
func naiveROI(m *Tensor, n, stride int, box [4]float32) []float32 {
	H, W, C := m.Shape[1], m.Shape[2], m.Shape[3]
	s := float64(stride)
	x1, y1 := float64(box[0])/s-0.5, float64(box[1])/s-0.5
	x2, y2 := float64(box[2])/s-0.5, float64(box[3])/s-0.5
	bw, bh := max(x2-x1, 1e-6), max(y2-y1, 1e-6)
	nx := min(max(int(math.Ceil(bw)), 2), 16)
	ny := min(max(int(math.Ceil(bh)), 2), 16)
	acc := make([]float32, C)
	for j := range ny {
		y := y1 + (float64(j)+0.5)*bh/float64(ny)
		for i := range nx {
			x := x1 + (float64(i)+0.5)*bw/float64(nx)
			// bilinearAdd
			xc := min(max(x, 0), float64(W-1))
			yc := min(max(y, 0), float64(H-1))
			x0, y0 := int(xc), int(yc)
			xx1, yy1 := min(x0+1, W-1), min(y0+1, H-1)
			fx, fy := float32(xc-float64(x0)), float32(yc-float64(y0))
			w00, w01 := (1-fx)*(1-fy), fx*(1-fy)
			w10, w11 := (1-fx)*fy, fx*fy
			for c := range acc {
				acc[c] += w00*m.At(n, y0, x0, c) + w01*m.At(n, y0, xx1, c) + w10*m.At(n, yy1, x0, c) + w11*m.At(n, yy1, xx1, c)
			}
		}
	}
	inv := 1 / float32(nx*ny)
	out := make([]float32, C)
	for c := range C {
		out[c] += acc[c] * inv
	}
	return out
}

func TestROIAlign(t *testing.T) {
	// Map 5x6 cells at stride 8: input 40 by 48 pixels.
	small := [][][4]float32{
		{
			{10, 10, 14, 13},   // under one cell
			{0, 0, 48, 40},     // the whole map
			{40, 30, 48, 40},   // at the bottom-right border
			{-10, -5, 20, 15},  // partly outside, top-left
			{30, 20, 70, 60},   // partly outside, bottom-right
			{20, 20, 20, 20},   // empty
			{3.3, 7.1, 5, 7.2}, // a sliver
		},
		{},
		{{0, 0, 8, 8}, {17.5, 2.25, 33.75, 38.5}},
	}
	// Map 20x20 cells at stride 4: boxes wider than 16 cells are sampled
	// on 16 points.
	large := [][][4]float32{
		{{0, 0, 80, 80}, {-20, 4, 100, 40}, {10, 10, 11, 75}},
		{{60, 60, 80, 80}},
	}
	cases := []struct {
		name     string
		x        *Tensor
		stride   int
		boxes    [][][4]float32
		maxBoxes int
	}{
		{"mixed", rnd(1, 3, 5, 6, 3), 8, small, 9},
		{"large", rnd(2, 2, 20, 20, 2), 4, large, 3},
		{"stride1", rnd(3, 1, 4, 3, 5), 1, [][][4]float32{{{0.5, 0.5, 2.5, 3.5}, {-1, -1, 5, 5}}}, 2},
		{"single-cell", rnd(4, 2, 1, 1, 2), 16, [][][4]float32{{{0, 0, 16, 16}}, {{4, 4, 9, 40}}}, 1},
		// Large enough for parallelFor to split rows and images.
		{"parallel", rnd(5, 3, 5, 6, 24), 8, small, 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			C := c.x.Shape[3]
			for _, tp := range []*Tape{nil, NewTape()} {
				got := tp.ROIAlign(c.x, c.stride, c.boxes, c.maxBoxes)
				if want := []int{c.x.Shape[0], c.maxBoxes, C}; !sameShape(got.Shape, want) {
					t.Fatalf("shape %v, want %v", got.Shape, want)
				}
				for n, bs := range c.boxes {
					for r := range c.maxBoxes {
						row := got.Data[(n*c.maxBoxes+r)*C : (n*c.maxBoxes+r+1)*C]
						want := make([]float32, C)
						if r < len(bs) {
							want = naiveROI(c.x, n, c.stride, bs[r])
						}
						for ch := range want {
							if math.Abs(float64(row[ch]-want[ch])) > 1e-5 {
								t.Fatalf("tape %v: image %d box %d channel %d = %v, want %v", tp != nil, n, r, ch, row[ch], want[ch])
							}
						}
					}
				}
			}
			x := c.x.Clone()
			if err := GradCheck(func(tp *Tape) *Tensor { return tp.ROIAlign(x, c.stride, c.boxes, c.maxBoxes) }, []*Tensor{x}, GradCheckOptions{MaxPerInput: 100}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestROIAlignPaddingGradient checks that padding rows pass no gradient and
// that the gradient of a box sums to the row's gradient (the bilinear
// weights of every sample sum to one, the samples' to nx*ny).
func TestROIAlignPaddingGradient(t *testing.T) {
	x := rnd(1, 2, 4, 4, 1).SetRequiresGrad(true)
	boxes := [][][4]float32{{{0, 0, 9, 13}}, {}}
	tp := NewTape()
	y := tp.ROIAlign(x, 4, boxes, 3)
	g := []float32{2, 100, 100, 100, 100, 100}
	tp.BackwardWithGrad(y, g)
	var s0, s1 float64
	for i, v := range x.Grad {
		if i < 16 {
			s0 += float64(v)
		} else {
			s1 += float64(v)
		}
	}
	if math.Abs(s0-2) > 1e-5 || s1 != 0 {
		t.Fatalf("gradient sums %v (image 0, want 2) and %v (image 1, want 0)", s0, s1)
	}
}

func TestNoRecordHardSwishResizeBilinearROIAlign(t *testing.T) {
	x := rnd(1, 1, 4, 4, 2)
	tp := NewTape()
	tp.HardSwish(x)
	tp.ResizeBilinear(x, 8, 8)
	tp.ROIAlign(x, 8, [][][4]float32{{{0, 0, 16, 16}}}, 1)
	if tp.Len() != 0 {
		t.Fatalf("ops on inputs without gradients recorded %d nodes", tp.Len())
	}
}

func TestShapeErrorsResizeBilinearROIAlign(t *testing.T) {
	x := rnd(1, 2, 4, 4, 3)
	one := [][4]float32{{0, 0, 8, 8}}
	cases := []struct {
		name, op string
		f        func()
	}{
		{"resize-rank", "ResizeBilinear", func() { (*Tape)(nil).ResizeBilinear(rnd(1, 4, 4, 3), 8, 8) }},
		{"resize-oh", "ResizeBilinear", func() { (*Tape)(nil).ResizeBilinear(x, 0, 8) }},
		{"resize-ow", "ResizeBilinear", func() { (*Tape)(nil).ResizeBilinear(x, 8, -1) }},
		{"roi-rank", "ROIAlign", func() { (*Tape)(nil).ROIAlign(rnd(1, 4, 4, 3), 8, [][][4]float32{one}, 1) }},
		{"roi-images", "ROIAlign", func() { (*Tape)(nil).ROIAlign(x, 8, [][][4]float32{one}, 1) }},
		{"roi-maxboxes", "ROIAlign", func() { (*Tape)(nil).ROIAlign(x, 8, [][][4]float32{one, {one[0], one[0]}}, 1) }},
		{"roi-stride", "ROIAlign", func() { (*Tape)(nil).ROIAlign(x, 0, [][][4]float32{one, one}, 1) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Try(c.f)
			if err == nil {
				t.Fatal("no shape error")
			}
			if !strings.Contains(err.Error(), "tensor."+c.op+":") || !strings.Contains(err.Error(), "[") {
				t.Fatalf("error %q does not name %s and the shapes", err, c.op)
			}
		})
	}
}

// benchBoxes returns n images' worth of k boxes of mixed sizes on a
// size-pixel input.
func benchBoxes(n, k int, size float32) [][][4]float32 {
	rng := rand.New(rand.NewPCG(3, 3))
	boxes := make([][][4]float32, n)
	for i := range boxes {
		for range k {
			w := size * float32(0.02+0.6*rng.Float64()*rng.Float64())
			h := size * float32(0.02+0.6*rng.Float64()*rng.Float64())
			x1 := float32(rng.Float64()) * (size - w)
			y1 := float32(rng.Float64()) * (size - h)
			boxes[i] = append(boxes[i], [4]float32{x1, y1, x1 + w, y1 + h})
		}
	}
	return boxes
}

func BenchmarkROIAlign(b *testing.B) {
	x := rnd(1, 32, 16, 16, 480).SetRequiresGrad(true)
	boxes := benchBoxes(32, 36, 512)
	g := make([]float32, 32*36*480)
	for i := range g {
		g[i] = 1
	}
	tp := NewTape()
	for b.Loop() {
		y := tp.ROIAlign(x, 32, boxes, 36)
		tp.BackwardWithGrad(y, g)
		tp.Reset()
	}
}

func BenchmarkResizeBilinear(b *testing.B) {
	x := rnd(1, 16, 16, 16, 128).SetRequiresGrad(true)
	g := make([]float32, 16*32*32*128)
	for i := range g {
		g[i] = 1
	}
	tp := NewTape()
	for b.Loop() {
		y := tp.ResizeBilinear(x, 32, 32)
		tp.BackwardWithGrad(y, g)
		tp.Reset()
	}
}

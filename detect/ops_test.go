package detect

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/tfjs"
)

// A small graph of every op the detector uses, run by the executor and
// compared with direct float64 implementations written from TF's
// definitions. It needs no weights files.

type tg struct {
	m   *tfjs.Model
	rng *rand.Rand
}

func newTG() *tg {
	return &tg{m: &tfjs.Model{Format: "graph-model", Weights: map[string]*tfjs.Tensor{}}, rng: rand.New(rand.NewPCG(3, 4))}
}

func (g *tg) node(name, op string, inputs []string, attr map[string]tfjs.Attr) {
	g.m.Nodes = append(g.m.Nodes, tfjs.Node{Name: name, Op: op, Inputs: inputs, Attr: attr})
}

func (g *tg) constant(name string, shape []int, v []float32) []float32 {
	if v == nil {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v = make([]float32, n)
		for i := range v {
			v[i] = float32(g.rng.NormFloat64())
		}
	}
	g.m.Weights[name] = &tfjs.Tensor{Name: name, Shape: shape, DType: "float32", F32: v}
	g.node(name, "Const", nil, nil)
	return v
}

func convAttr(stride int, padding string, fused ...string) map[string]tfjs.Attr {
	a := map[string]tfjs.Attr{
		"strides":     {Kind: "list", List: &tfjs.AttrList{I: []int64{1, int64(stride), int64(stride), 1}}},
		"padding":     {Kind: "s", S: []byte(padding)},
		"data_format": {Kind: "s", S: []byte("NHWC")},
	}
	if len(fused) > 0 {
		l := &tfjs.AttrList{}
		for _, f := range fused {
			l.S = append(l.S, []byte(f))
		}
		a["fused_ops"] = tfjs.Attr{Kind: "list", List: l}
		a["num_args"] = tfjs.Attr{Kind: "i", I: 1}
	}
	return a
}

// naiveConv is TF's Conv2D / DepthwiseConv2dNative (multiplier 1) on one
// NHWC image, with SAME or VALID padding.
func naiveConv(x []float32, h, w, cin int, f []float32, k, cout, stride int, same, depthwise bool) ([]float64, int, int) {
	oh, ow, pt, pl := (h-k)/stride+1, (w-k)/stride+1, 0, 0
	if same {
		oh, ow = (h+stride-1)/stride, (w+stride-1)/stride
		pt = max((oh-1)*stride+k-h, 0) / 2
		pl = max((ow-1)*stride+k-w, 0) / 2
	}
	out := make([]float64, oh*ow*cout)
	for oy := 0; oy < oh; oy++ {
		for ox := 0; ox < ow; ox++ {
			for co := 0; co < cout; co++ {
				var s float64
				for ky := 0; ky < k; ky++ {
					for kx := 0; kx < k; kx++ {
						iy, ix := oy*stride+ky-pt, ox*stride+kx-pl
						if iy < 0 || iy >= h || ix < 0 || ix >= w {
							continue
						}
						if depthwise {
							s += float64(x[(iy*w+ix)*cin+co]) * float64(f[(ky*k+kx)*cin+co])
							continue
						}
						for ci := 0; ci < cin; ci++ {
							s += float64(x[(iy*w+ix)*cin+ci]) * float64(f[((ky*k+kx)*cin+ci)*cout+co])
						}
					}
				}
				out[(oy*ow+ox)*cout+co] = s
			}
		}
	}
	return out, oh, ow
}

func closeTo(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Abs(float64(got[i])-want[i]) > 1e-4*(1+math.Abs(want[i])) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func TestOpsAgainstDefinitions(t *testing.T) {
	const h, w, cin, cout = 9, 7, 4, 6
	g := newTG()
	g.node("x", "Placeholder", nil, nil)
	f1 := g.constant("f1", []int{3, 3, cin, cout}, nil)
	b1 := g.constant("b1", []int{cout}, nil)
	g.node("c1", "_FusedConv2D", []string{"x", "f1", "b1"}, convAttr(2, "SAME", "BiasAdd"))
	g.node("r1", "Relu", []string{"c1"}, nil)
	f2 := g.constant("f2", []int{5, 5, cin, 1}, nil)
	g.node("d2", "DepthwiseConv2dNative", []string{"x", "f2"}, convAttr(2, "SAME"))
	// hard-swish as the graph writes it: (c * x) * relu6(x + 3)
	g.constant("six", nil, []float32{0.16662598})
	g.constant("three", nil, []float32{3})
	g.node("hs/mul", "Mul", []string{"six", "d2"}, nil)
	g.node("hs/add", "Add", []string{"d2", "three"}, nil)
	g.node("hs/relu6", "Relu6", []string{"hs/add"}, nil)
	g.node("hs", "Mul", []string{"hs/mul", "hs/relu6"}, nil)
	g.constant("axis", nil, []float32{3})
	g.node("cat", "ConcatV2", []string{"r1", "hs", "axis"}, nil)
	g.constant("size", []int{2}, []float32{10, 8})
	g.node("up", "ResizeBilinear", []string{"cat", "size"}, map[string]tfjs.Attr{})
	g.constant("axes", []int{2}, []float32{1, 2})
	g.node("mean", "Mean", []string{"up", "axes"}, map[string]tfjs.Attr{"keep_dims": {Kind: "b", B: true}})
	g.node("sig", "Sigmoid", []string{"mean"}, nil)
	g.node("se", "Mul", []string{"up", "sig"}, nil)
	f3 := g.constant("f3", []int{1, 1, 10, 3}, nil)
	g.node("p", "Conv2D", []string{"se", "f3"}, convAttr(1, "VALID"))
	g.node("out", "Identity", []string{"p"}, nil)

	cg, err := compile(g.m, shape{1, h, w, cin}, []string{"r1", "hs", "up", "se", "out"})
	if err != nil {
		t.Fatal(err)
	}
	// The hard-swish and the Relu became convolution epilogues.
	for _, s := range cg.steps {
		if s.op == "Relu" || s.op == "_HardSwish" || s.op == "Relu6" {
			t.Errorf("step %s (%s) was not fused", s.name, s.op)
		}
	}
	x := make([]float32, h*w*cin)
	for i := range x {
		x[i] = float32(g.rng.NormFloat64() * 3)
	}
	got, err := cg.run(context.Background(), x, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	c1, oh, ow := naiveConv(x, h, w, cin, f1, 3, cout, 2, true, false)
	for i := range c1 {
		c1[i] = max(c1[i]+float64(b1[i%cout]), 0)
	}
	closeTo(t, "conv3x3/2+bias+relu", got["r1"], c1)
	d2, _, _ := naiveConv(x, h, w, cin, f2, 5, cin, 2, true, true)
	for i, v := range d2 {
		d2[i] = float64(float32(0.16662598)) * v * min(max(v+3, 0), 6)
	}
	closeTo(t, "depthwise5x5/2+hswish", got["hs"], d2)
	// concat + resize x2 (TF1: source = dest/2)
	C := cout + cin
	cat := make([]float64, oh*ow*C)
	for p := 0; p < oh*ow; p++ {
		copy(cat[p*C:], c1[p*cout:(p+1)*cout])
		copy(cat[p*C+cout:], d2[p*cin:(p+1)*cin])
	}
	uh, uw := 10, 8
	up := make([]float64, uh*uw*C)
	for y := 0; y < uh; y++ {
		fy := float64(y) * float64(oh) / float64(uh)
		y0 := int(fy)
		y1 := min(y0+1, oh-1)
		for xx := 0; xx < uw; xx++ {
			fx := float64(xx) * float64(ow) / float64(uw)
			x0 := int(fx)
			x1 := min(x0+1, ow-1)
			for c := 0; c < C; c++ {
				v := func(yy, xq int) float64 { return cat[(yy*ow+xq)*C+c] }
				top := v(y0, x0) + (v(y0, x1)-v(y0, x0))*(fx-float64(x0))
				bot := v(y1, x0) + (v(y1, x1)-v(y1, x0))*(fx-float64(x0))
				up[(y*uw+xx)*C+c] = top + (bot-top)*(fy-float64(y0))
			}
		}
	}
	closeTo(t, "concat+resize", got["up"], up)
	se := make([]float64, len(up))
	for c := 0; c < C; c++ {
		var m float64
		for p := 0; p < uh*uw; p++ {
			m += up[p*C+c]
		}
		s := 1 / (1 + math.Exp(-m/float64(uh*uw)))
		for p := 0; p < uh*uw; p++ {
			se[p*C+c] = up[p*C+c] * s
		}
	}
	closeTo(t, "mean+sigmoid+mul", got["se"], se)
	xs := make([]float32, len(se))
	for i, v := range se {
		xs[i] = float32(v)
	}
	p, _, _ := naiveConv(xs, uh, uw, C, f3, 1, 3, 1, false, false)
	closeTo(t, "conv1x1", got["out"], p)
}

func TestCompileErrors(t *testing.T) {
	build := func(filterShape []int, op string) *tfjs.Model {
		g := newTG()
		g.node("x", "Placeholder", nil, nil)
		g.constant("f", filterShape, nil)
		g.node("y", op, []string{"x", "f"}, convAttr(1, "SAME"))
		return g.m
	}
	cases := []struct {
		m    *tfjs.Model
		want string
	}{
		{build([]int{3, 3, 5, 2}, "Conv2D"), `node "y" (Conv2D): filter "f" has shape [3 3 5 2]; input has 4 channels`},
		{build([]int{3, 3, 4, 2}, "DepthwiseConv2dNative"), "channel multiplier of 1"},
		{build([]int{3, 3, 4, 2}, "Conv3D"), "op Conv3D is not supported"},
		{build([]int{3, 3, 4}, "Conv2D"), "has shape [3 3 4]"},
	}
	for _, c := range cases {
		_, err := compile(c.m, shape{1, 8, 8, 4}, []string{"y"})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
	if _, err := compile(build([]int{1, 1, 4, 2}, "Conv2D"), shape{1, 8, 8, 4}, []string{"nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown output: %v", err)
	}
}

// TestWeightShapeChecked: a weight of the real model with a wrong shape is
// refused at load, naming the node and the weight.
func TestWeightShapeChecked(t *testing.T) {
	dir := testWeights(t)
	m, err := tfjs.Open(dir + "/" + ModelFile)
	if err != nil {
		t.Fatal(err)
	}
	w := m.Weights["tower_0/MobilenetV3/expanded_conv_3/project/Conv2D_bn_offset"]
	w.Shape = []int{w.Shape[0] + 1}
	w.F32 = append(w.F32, 0)
	_, err = newDetector(m, "centernet.json")
	if err == nil || !strings.Contains(err.Error(), "expanded_conv_3/project") || !strings.Contains(err.Error(), "want [32]") {
		t.Fatalf("error %v", err)
	}
}

func TestDecodeAndNMS(t *testing.T) {
	kp := make([]float32, gridSize*gridSize*NumClasses)
	wh := make([]float32, gridSize*gridSize*4)
	set := func(y, x, c int, v float32, d [4]float32) {
		kp[(y*gridSize+x)*NumClasses+c] = v
		copy(wh[(y*gridSize+x)*4:], d[:])
	}
	set(10, 20, 16, 0.9, [4]float32{8, 8, 8, 8})  // a dog at (80, 40)
	set(10, 21, 16, 0.5, [4]float32{8, 8, 8, 8})  // its neighbour: not a peak
	set(10, 20, 17, 0.8, [4]float32{8, 8, 8, 8})  // the same box as another class
	set(50, 50, 1, 0.7, [4]float32{4, 4, 12, 12}) // a bicycle
	set(90, 90, 2, 0.1, [4]float32{1, 1, 1, 1})   // below the threshold
	dets := decode(kp, wh, 100, 0.2)
	if len(dets) != 3 {
		t.Fatalf("%d candidates %+v, want 3", len(dets), dets)
	}
	if d := dets[0]; d.Class != 16 || d.Score != 0.9 || d.Box != [4]float32{72, 32, 88, 48} {
		t.Fatalf("best %+v", d)
	}
	if dets[1].Score != 0.8 || dets[1].Class != 17 || dets[2].Class != 1 || dets[2].Box != [4]float32{196, 196, 212, 212} {
		t.Fatalf("order %+v", dets)
	}
	kept := nms(dets, 0.5, 10)
	if len(kept) != 2 || kept[0].Score != 0.9 || kept[1].Class != 1 {
		t.Fatalf("nms kept %+v", kept)
	}
	if k := nms(dets, 0.5, 1); len(k) != 1 {
		t.Fatalf("max 1 kept %d", len(k))
	}
	if top := decode(kp, wh, 2, 0); len(top) != 2 || top[1].Score != 0.8 {
		t.Fatalf("top 2: %+v", top)
	}
	if v := IoU([4]float32{0, 0, 10, 10}, [4]float32{5, 0, 15, 10}); math.Abs(float64(v)-1.0/3) > 1e-6 {
		t.Fatalf("IoU %v", v)
	}
}

// TestDwRow checks the depthwise kernel in use (AVX2+FMA where the CPU has
// it) against the portable one over channel counts with every tail length.
func TestDwRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, C := range []int{1, 3, 7, 8, 9, 15, 16, 17, 18, 22, 24, 33, 72} {
		for _, stride := range []int{1, 2} {
			n := 5
			x := make([]float32, (n-1)*stride*C+C)
			w := make([]float32, C)
			o1 := make([]float32, n*C)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			for i := range w {
				w[i] = float32(rng.NormFloat64())
			}
			for i := range o1 {
				o1[i] = float32(rng.NormFloat64())
			}
			o2 := append([]float32(nil), o1...)
			dwRow(o1, x, w, n, C, stride*C)
			dwRowGo(o2, x, w, n, C, stride*C)
			for i := range o1 {
				if math.Abs(float64(o1[i]-o2[i])) > 1e-5*(1+math.Abs(float64(o2[i]))) {
					t.Fatalf("C=%d stride %d: [%d] %v, want %v", C, stride, i, o1[i], o2[i])
				}
			}
		}
	}
}

// TestBinaryBroadcast covers Add, Sub and Mul with a scalar or per-channel
// operand on either side.
func TestBinaryBroadcast(t *testing.T) {
	const h, w, c = 3, 70, 5
	g := newTG()
	g.node("x", "Placeholder", nil, nil)
	s := g.constant("s", nil, []float32{1.5})
	v := g.constant("v", []int{1, 1, 1, c}, nil)
	g.node("a", "Sub", []string{"s", "x"}, nil) // 1.5 - x
	g.node("b", "Sub", []string{"a", "v"}, nil) // a - v
	g.node("d", "Sub", []string{"v", "b"}, nil) // v - b
	g.node("e", "Mul", []string{"d", "s"}, nil) // d * 1.5
	g.node("f", "Add", []string{"e", "x"}, nil) // e + x
	g.node("y", "Sub", []string{"f", "e"}, nil) // f - e
	cg, err := compile(g.m, shape{1, h, w, c}, []string{"d", "y"})
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, h*w*c)
	for i := range x {
		x[i] = float32(g.rng.NormFloat64())
	}
	got, err := cg.run(context.Background(), x, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	wantD := make([]float64, len(x))
	wantY := make([]float64, len(x))
	for i, xv := range x {
		a := float64(s[0]) - float64(xv)
		b := a - float64(v[i%c])
		d := float64(v[i%c]) - b
		e := d * 1.5
		wantD[i] = d
		wantY[i] = (e + float64(xv)) - e
	}
	closeTo(t, "v-((s-x)-v)", got["d"], wantD)
	closeTo(t, "(e+x)-e", got["y"], wantY)
}

// TestDepthwiseAgainstDefinition runs depthwise convolutions of every kind
// the network has (3x3 and 5x5, stride 1 and 2, SAME and VALID) over widths
// with and without interior runs of four pixels and channel counts with
// every tail, so that the interior kernel, the tap-by-tap borders and their
// seams are all compared with the definition.
func TestDepthwiseAgainstDefinition(t *testing.T) {
	for _, k := range []int{3, 5} {
		for _, stride := range []int{1, 2} {
			for _, pad := range []string{"SAME", "VALID"} {
				for _, hw := range [][2]int{{6, 5}, {7, 13}, {9, 22}} {
					for _, C := range []int{1, 4, 8, 16, 18, 24, 40} {
						h, w := hw[0], hw[1]
						if pad == "VALID" && (h < k || w < k) {
							continue
						}
						name := fmt.Sprintf("k%d/s%d/%s/%dx%d/C%d", k, stride, pad, h, w, C)
						g := newTG()
						g.node("x", "Placeholder", nil, nil)
						f := g.constant("f", []int{k, k, C, 1}, nil)
						g.node("d", "DepthwiseConv2dNative", []string{"x", "f"}, convAttr(stride, pad))
						cg, err := compile(g.m, shape{1, h, w, C}, []string{"d"})
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						x := make([]float32, h*w*C)
						for i := range x {
							x[i] = float32(g.rng.NormFloat64())
						}
						got, err := cg.run(context.Background(), x, func(string) bool { return true })
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						want, _, _ := naiveConv(x, h, w, C, f, k, C, stride, pad == "SAME", true)
						closeTo(t, name, got["d"], want)
					}
				}
			}
		}
	}
}

package detect

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/tensor"
	"github.com/xmr-project/xmr/tfjs"
)

// netGraph is a small graph with every op a Net runs: a "lower" convolution
// from the image to the cut node "low", then, from it, an inverted
// residual block as MobileNetV3's (expansion with hard-swish, depthwise
// stride 2, squeeze-and-excite with a hard sigmoid, projection), a neck
// step (upsampling and concatenation) and a residual Add.
func netGraph() *tg {
	const cin, c = 3, 4
	g := newTG()
	g.node("img", "Placeholder", nil, nil)
	g.constant("f0", []int{3, 3, cin, c}, nil)
	g.constant("b0", []int{c}, nil)
	g.node("low", "_FusedConv2D", []string{"img", "f0", "b0"}, convAttr(1, "SAME", "BiasAdd", "Relu"))
	g.constant("six", nil, []float32{0.16662598}) // float16(1/6), as the detector's graph stores it
	g.constant("three", nil, []float32{3})
	hswish := func(name, x string) {
		g.node(name+"/mul", "Mul", []string{"six", x}, nil)
		g.node(name+"/add", "Add", []string{x, "three"}, nil)
		g.node(name+"/relu6", "Relu6", []string{name + "/add"}, nil)
		g.node(name, "Mul", []string{name + "/mul", name + "/relu6"}, nil)
	}
	g.constant("fe", []int{1, 1, c, 8}, nil)
	g.constant("be", []int{8}, nil)
	g.node("expand", "_FusedConv2D", []string{"low", "fe", "be"}, convAttr(1, "SAME", "BiasAdd"))
	hswish("expand/hs", "expand")
	g.constant("fd", []int{5, 5, 8, 1}, nil)
	g.constant("bd", []int{8}, nil)
	g.node("dw", "FusedDepthwiseConv2dNative", []string{"expand/hs", "fd", "bd"}, convAttr(2, "SAME", "BiasAdd"))
	hswish("dw/hs", "dw")
	g.constant("axes", []int{2}, []float32{1, 2})
	g.node("se/mean", "Mean", []string{"dw/hs", "axes"}, map[string]tfjs.Attr{"keep_dims": {Kind: "b", B: true}})
	g.constant("fs1", []int{1, 1, 8, 2}, nil)
	g.constant("bs1", []int{2}, nil)
	g.node("se/c1", "_FusedConv2D", []string{"se/mean", "fs1", "bs1"}, convAttr(1, "SAME", "BiasAdd", "Relu"))
	g.constant("fs2", []int{1, 1, 2, 8}, nil)
	g.constant("bs2", []int{8}, nil)
	g.node("se/c2", "_FusedConv2D", []string{"se/c1", "fs2", "bs2"}, convAttr(1, "SAME", "BiasAdd"))
	g.node("se/add", "Add", []string{"se/c2", "three"}, nil)
	g.node("se/r6", "Relu6", []string{"se/add"}, nil)
	g.node("se/gate", "Mul", []string{"six", "se/r6"}, nil)
	g.node("se", "Mul", []string{"se/gate", "dw/hs"}, nil)
	g.constant("fp", []int{1, 1, 8, c}, nil)
	g.constant("bp", []int{c}, nil)
	g.node("project", "_FusedConv2D", []string{"se", "fp", "bp"}, convAttr(1, "SAME", "BiasAdd"))
	g.constant("size", []int{2}, []float32{8, 6})
	g.node("up", "ResizeBilinear", []string{"project", "size"}, map[string]tfjs.Attr{})
	g.constant("axis", nil, []float32{3})
	g.node("cat", "ConcatV2", []string{"low", "up", "axis"}, nil)
	g.node("relu", "Relu", []string{"cat"}, nil)
	g.constant("fo", []int{3, 3, 2 * c, c}, nil)
	g.node("conv", "Conv2D", []string{"relu", "fo"}, convAttr(1, "SAME"))
	g.node("res", "Add", []string{"conv", "low"}, nil)
	g.node("sig", "Sigmoid", []string{"res"}, nil)
	g.node("out", "Identity", []string{"sig"}, nil)
	return g
}

// testNetGraph compiles netGraph for an 8x6 image and returns it, its
// executor and its part from "low" to "out".
func testNetGraph(t *testing.T) (*tg, *graph, *Net) {
	t.Helper()
	g := netGraph()
	cg, err := compile(g.m, shape{1, 8, 6, 3}, []string{"low", "out"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := newNet(g.m, cg, "low", "out")
	if err != nil {
		t.Fatal(err)
	}
	return g, cg, n
}

// TestNetMatchesExecutor runs the part of netGraph from "low" to "out" on
// the tape and compares it with the graph executor, for a batch of two
// images.
func TestNetMatchesExecutor(t *testing.T) {
	const h, w = 8, 6
	g, cg, n := testNetGraph(t)
	if got := n.InShape(); got[0] != h || got[1] != w || got[2] != 4 {
		t.Fatalf("InShape %v", got)
	}
	names := map[string]bool{}
	for _, p := range n.Params() {
		names[p.Name] = true
	}
	for _, want := range []string{"fe", "be", "fd", "bd", "fs1", "bs2", "fp", "fo"} {
		if !names[want] {
			t.Errorf("no parameter %q among %v", want, names)
		}
	}
	if names["f0"] || names["six"] || names["size"] {
		t.Errorf("a constant outside the part or not a filter is a parameter: %v", names)
	}
	var lows, outs [][]float32
	for range 2 {
		img := make([]float32, h*w*3)
		for j := range img {
			img[j] = float32(g.rng.NormFloat64() * 2)
		}
		got, err := cg.run(context.Background(), img, func(string) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		lows, outs = append(lows, got["low"]), append(outs, got["out"])
	}
	x := tensor.FromData(append(append([]float32{}, lows[0]...), lows[1]...), 2, h, w, 4)
	for _, tp := range []*tensor.Tape{nil, tensor.NewTape()} {
		y := n.Forward(tp, x)[0]
		if y.Dims() != 4 || y.Shape[0] != 2 || y.Shape[1] != h || y.Shape[2] != w || y.Shape[3] != 4 {
			t.Fatalf("output shape %v", y.Shape)
		}
		per := h * w * 4
		for i := range 2 {
			for j, want := range outs[i] {
				if got := y.Data[i*per+j]; math.Abs(float64(got-want)) > 1e-5 {
					t.Fatalf("image %d value %d: tape %v, executor %v", i, j, got, want)
				}
			}
		}
		tp.Reset()
	}
}

// TestNetGradients checks the part's gradients with respect to its input
// and to a few of its parameters by finite differences.
func TestNetGradients(t *testing.T) {
	const h, w = 8, 6
	g, _, n := testNetGraph(t)
	x := tensor.New(2, h, w, 4)
	for i := range x.Data {
		x.Data[i] = float32(g.rng.NormFloat64())
	}
	inputs := []*tensor.Tensor{x}
	for _, p := range n.Params() {
		switch p.Name {
		case "fe", "bd", "fs1", "fp", "fo":
			inputs = append(inputs, p.T)
		}
	}
	err := tensor.GradCheck(func(tp *tensor.Tape) *tensor.Tensor { return n.Forward(tp, x)[0] }, inputs,
		tensor.GradCheckOptions{Eps: 1e-2, ATol: 2e-2, RTol: 2e-2, MaxPerInput: 24})
	if err != nil {
		t.Fatal(err)
	}
}

func TestNetErrors(t *testing.T) {
	g := netGraph()
	cg, err := compile(g.m, shape{1, 8, 6, 3}, []string{"low", "out"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in, out, want string
	}{
		{"low", "nope", `"nope" is not a node`},
		{"project", "out", `reads the image`}, // "res" and "cat" read "low", computed from the image
		{"low", "low", "to itself"},
	} {
		_, err := newNet(g.m, cg, c.in, c.out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("net %s -> %s: error %v, want one containing %q", c.in, c.out, err, c.want)
		}
	}
	n, err := newNet(g.m, cg, "low", "out")
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.Try(func() { n.Forward(nil, tensor.New(1, 8, 6, 5)) }); err == nil || !strings.Contains(err.Error(), "want (N, 8, 6, 4)") {
		t.Errorf("wrong input shape: %v", err)
	}
}

// The part of the real detector that a photo model fine-tunes: from the
// backbone's stride-16 output through its stride-32 stage to the
// backbone's last map and the neck's stride-16 map.
const (
	testCut = "tower_0/MobilenetV3/expanded_conv_11/add"
)

// TestDetectorNetMatchesRun checks that the detector's own stride-32 stage
// and the neck's stride-16 merge, run on the tape from the tapped
// stride-16 activation, equal the maps Run returns (which
// TestMatchesTFJS holds equal to TensorFlow.js).
func TestDetectorNetMatchesRun(t *testing.T) {
	d := testDetector(t)
	td, err := d.WithTaps(testCut)
	if err != nil {
		t.Fatal(err)
	}
	out, err := td.Run(context.Background(), randomImage(7), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Taps) != 1 || out.Taps[0].Name != testCut || out.Taps[0].Stride != 16 {
		t.Fatalf("taps %+v", out.Taps)
	}
	tap := out.Taps[0]
	cut, err := CutNamed("s16")
	if err != nil || cut.Node != testCut {
		t.Fatalf("cut s16: %+v, %v", cut, err)
	}
	n, err := d.CutNet(cut) // neck_s16, backbone_s32
	if err != nil {
		t.Fatal(err)
	}
	ys := n.Forward(nil, tensor.FromData(tap.Data, 1, tap.H, tap.W, tap.C))
	for i, mi := range []int{2, 3} {
		spec := Maps[mi]
		y := ys[i]
		want := out.Maps[mi].Data
		var maxErr, maxAbs float64
		for i, v := range want {
			maxErr = math.Max(maxErr, math.Abs(float64(y.Data[i]-v)))
			maxAbs = math.Max(maxAbs, math.Abs(float64(v)))
		}
		if rel := maxErr / maxAbs; rel > 2e-5 {
			t.Errorf("%s: max |tape-run| / max |run| = %.3g, want <= 2e-5", spec.Name, rel)
		}
	}
	// The s32 cut, from the tapped output of the stride-32 stage's second
	// block, gives backbone_s32 alone.
	c32, err := CutNamed("s32")
	if err != nil {
		t.Fatal(err)
	}
	td32, err := d.WithTaps(c32.Node)
	if err != nil {
		t.Fatal(err)
	}
	out32, err := td32.Run(context.Background(), randomImage(7), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n32, err := d.CutNet(c32)
	if err != nil {
		t.Fatal(err)
	}
	tap32 := out32.Taps[0]
	if tap32.H != 16 || tap32.C != 120 || !slices.Equal(n32.InShape(), []int{16, 16, 120}) || !slices.Equal(n32.OutShape(0), []int{16, 16, 480}) {
		t.Fatalf("s32 tap %dx%dx%d, net %v -> %v", tap32.H, tap32.W, tap32.C, n32.InShape(), n32.OutShape(0))
	}
	y := n32.Forward(nil, tensor.FromData(tap32.Data, 1, 16, 16, 120))[0]
	for i, v := range out32.Maps[3].Data {
		if math.Abs(float64(y.Data[i]-v)) > 2e-5*(1+math.Abs(float64(v))) {
			t.Fatalf("s32 cut: backbone_s32[%d] tape %v, run %v", i, y.Data[i], v)
		}
	}
	if _, err := CutNamed("s8"); err == nil || !strings.Contains(err.Error(), "s16") {
		t.Errorf("CutNamed(s8): %v", err)
	}
}

// BenchmarkCutNet times a training step's pass through the part of the
// detector that each cut trains: forward and backward for a batch of 32
// images' cached activations (random), the weights' gradients included.
func BenchmarkCutNet(b *testing.B) {
	d := testDetector(b)
	for _, c := range Cuts {
		b.Run(c.Name, func(b *testing.B) {
			n, err := d.CutNet(c)
			if err != nil {
				b.Fatal(err)
			}
			in := n.InShape()
			x := tensor.New(32, in[0], in[1], in[2])
			for i := range x.Data {
				x.Data[i] = float32(i%7) - 3
			}
			tp := tensor.NewTape()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				ys := n.Forward(tp, x)
				loss := tp.SumAll(ys[0])
				for _, y := range ys[1:] {
					loss = tp.Add(loss, tp.SumAll(y))
				}
				tp.BackwardAndReset(loss)
			}
			b.ReportMetric(float64(b.Elapsed().Seconds())/float64(b.N)/32*1000, "ms/image")
		})
	}
}

package detect

import (
	"fmt"
	"slices"

	"github.com/xmr-project/xmr/tensor"
	"github.com/xmr-project/xmr/tfjs"
)

// Net is a part of the detector's network as operations on a tensor.Tape,
// so that it can be trained: the nodes that lead from one node of the
// graph (its input, an activation computed by the rest of the network,
// e.g. cached once per image) to another (its output), for a batch of
// images at once. Its convolution filters and biases are parameters
// (Params) initialised with the detector's weights; every other constant
// of the graph stays fixed. With the weights untouched, Forward computes
// what Detector.Run computes at its output node, up to the rounding of
// the matrix products (TestNetMatchesExecutor).
type Net struct {
	in        string
	outs      []string
	inShape   []int   // per image: H, W, C
	outShapes [][]int // per output, per image
	steps     []netStep
	nvals     int
	outSlots  []int
	params    []Param
	paramSlot map[string]*tensor.Tensor
}

// Param is one trainable tensor of a Net, named by the graph's constant
// it was initialised from.
type Param struct {
	Name string
	T    *tensor.Tensor
}

// netStep computes value slot out from the slots ins.
type netStep struct {
	name string
	ins  []int
	out  int
	run  func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor
}

// Net returns the part of the network from node in to the nodes outs (see
// Net); the outputs share what they have in common. Every node that an
// output depends on must depend on in or be a constant: a part that also
// reads the image, or another activation, is refused, and so is an op the
// tape does not implement.
func (d *Detector) Net(in string, outs ...string) (*Net, error) {
	if d.m == nil {
		return nil, fmt.Errorf("detect: this detector keeps no graph to build a part of")
	}
	return newNet(d.m, d.g, in, outs...)
}

// newNet builds the part of m from in to outs; g, the compiled executor of
// the whole network, gives every node's shape.
func newNet(m *tfjs.Model, g *graph, in string, outs ...string) (*Net, error) {
	if len(outs) == 0 {
		return nil, fmt.Errorf("detect: net from %q: no output", in)
	}
	byName := make(map[string]*gnode, len(m.Nodes))
	for i := range m.Nodes {
		byName[m.Nodes[i].Name] = &gnode{Node: m.Nodes[i]}
	}
	for _, name := range append([]string{in}, outs...) {
		if byName[name] == nil {
			return nil, fmt.Errorf("detect: net: %q is not a node of the graph", name)
		}
	}
	inSlot, ok := g.slot[in]
	if !ok {
		return nil, fmt.Errorf("detect: net: node %q is not computed by the detector's outputs", in)
	}
	fuseHardSwish(m, byName)
	n := &Net{in: in, outs: slices.Clone(outs), inShape: slices.Clone(g.shapes[inSlot][1:]), paramSlot: make(map[string]*tensor.Tensor)}
	slot := map[string]int{in: 0}
	consts := map[int]*tensor.Tensor{}
	n.nvals = 1
	newSlot := func(name string) int {
		slot[name] = n.nvals
		n.nvals++
		return n.nvals - 1
	}
	state := map[string]int{}
	var visit func(name string) error
	visit = func(name string) error {
		if _, done := slot[name]; done {
			return nil
		}
		if state[name] == 1 {
			return fmt.Errorf("node %q is part of a cycle", name)
		}
		state[name] = 1
		node := byName[name]
		if node == nil {
			return fmt.Errorf("node %q is missing", name)
		}
		switch node.Op {
		case "Placeholder":
			return fmt.Errorf("node %q reads the image, not %q: start the part later or end it earlier", name, in)
		case "Const":
			t := m.Weights[name]
			if t == nil {
				return fmt.Errorf("no weight named %q", name)
			}
			data := slices.Clone(t.F32)
			if t.DType == "int32" {
				data = make([]float32, len(t.I32))
				for i, v := range t.I32 {
					data[i] = float32(v)
				}
			} else if t.DType != "float32" {
				return fmt.Errorf("weight %q has dtype %s", name, t.DType)
			}
			sh := slices.Clone(t.Shape)
			v := newSlot(name)
			consts[v] = tensor.FromData(data, sh...)
			return nil
		}
		var ins []int
		var inNames []string
		for _, ref := range node.Inputs {
			if ref[0] == '^' {
				continue
			}
			if tfjs.InputIndex(ref) != 0 {
				return fmt.Errorf("node %q reads output %q; only single-output nodes are supported", name, ref)
			}
			src := tfjs.InputNode(ref)
			if err := visit(src); err != nil {
				return err
			}
			ins = append(ins, slot[src])
			inNames = append(inNames, src)
		}
		if node.Op == "Identity" {
			if len(ins) != 1 {
				return fmt.Errorf("node %q: Identity with %d inputs", name, len(ins))
			}
			slot[name] = ins[0]
			state[name] = 2
			return nil
		}
		run, err := n.compileStep(node, ins, inNames, consts)
		if err != nil {
			return fmt.Errorf("node %q (%s): %w", name, node.Op, err)
		}
		var acts []int // the inputs that are activations: the constants are bound into run
		for _, v := range ins {
			if consts[v] == nil {
				acts = append(acts, v)
			}
		}
		v := newSlot(name)
		n.steps = append(n.steps, netStep{name: name, ins: acts, out: v, run: run})
		state[name] = 2
		return nil
	}
	for _, out := range outs {
		if out == in {
			return nil, fmt.Errorf("detect: net from %q to itself", in)
		}
		if err := visit(out); err != nil {
			return nil, fmt.Errorf("detect: net from %q to %q: %w", in, out, err)
		}
		if _, isConst := consts[slot[out]]; isConst {
			return nil, fmt.Errorf("detect: net from %q to %q: the output is a constant", in, out)
		}
		n.outSlots = append(n.outSlots, slot[out])
	}
	// The outputs' shapes, from a run on one image of zeros.
	var err error
	terr := tensor.Try(func() {
		for _, y := range n.Forward(nil, tensor.New(append([]int{1}, n.inShape...)...)) {
			n.outShapes = append(n.outShapes, slices.Clone(y.Shape[1:]))
		}
	})
	if terr != nil {
		err = fmt.Errorf("detect: net from %q: %w", in, terr)
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(n.params, func(a, b Param) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return n, nil
}

// compileStep returns the tape operation of node; ins are its inputs'
// value slots, constants among them found in consts and bound into the
// operation, which receives the activations alone, in order.
func (n *Net) compileStep(node *gnode, ins []int, inNames []string, consts map[int]*tensor.Tensor) (func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor, error) {
	constAt := func(i int) *tensor.Tensor {
		if i >= len(ins) {
			return nil
		}
		return consts[ins[i]]
	}
	param := func(i int) (*tensor.Tensor, error) {
		c := constAt(i)
		if c == nil {
			return nil, fmt.Errorf("input %d must be a constant", i)
		}
		name := inNames[i]
		if p, ok := n.paramSlot[name]; ok {
			return p, nil
		}
		p := tensor.Param(slices.Clone(c.Data), c.Shape...)
		n.paramSlot[name] = p
		n.params = append(n.params, Param{Name: name, T: p})
		return p, nil
	}
	switch node.Op {
	case "_FusedConv2D", "Conv2D", "FusedDepthwiseConv2dNative", "DepthwiseConv2dNative":
		return n.convStep(node, ins, param)
	case "_HardSwish":
		if node.fused.add != 3 {
			return nil, fmt.Errorf("hard-swish adds %v, want 3", node.fused.add)
		}
		c := node.fused.mul
		return unaryStep(ins, consts, func(tp *tensor.Tape, x *tensor.Tensor) *tensor.Tensor { return tp.HardSwishScaled(x, c) })
	case "Relu":
		return unaryStep(ins, consts, func(tp *tensor.Tape, x *tensor.Tensor) *tensor.Tensor { return tp.ReLU(x) })
	case "Relu6":
		return unaryStep(ins, consts, func(tp *tensor.Tape, x *tensor.Tensor) *tensor.Tensor { return tp.Clamp(x, 0, 6) })
	case "Sigmoid":
		return unaryStep(ins, consts, func(tp *tensor.Tape, x *tensor.Tensor) *tensor.Tensor { return tp.Sigmoid(x) })
	case "Add", "Mul", "Sub":
		return binaryStep(node.Op, ins, consts)
	case "Mean":
		axes := constAt(1)
		if axes == nil || len(axes.Data) != 2 || axes.Data[0] != 1 || axes.Data[1] != 2 || !node.Attr["keep_dims"].B {
			return nil, fmt.Errorf("only the mean over axes [1 2] with keep_dims is supported")
		}
		return unaryStep(ins[:1], consts, func(tp *tensor.Tape, x *tensor.Tensor) *tensor.Tensor { return tp.Mean(x, true, 1, 2) })
	case "ResizeBilinear":
		size := constAt(1)
		if size == nil || len(size.Data) != 2 || node.Attr["align_corners"].B || node.Attr["half_pixel_centers"].B {
			return nil, fmt.Errorf("only a constant size with align_corners and half_pixel_centers false is supported")
		}
		oh, ow := int(size.Data[0]), int(size.Data[1])
		return unaryStep(ins[:1], consts, func(tp *tensor.Tape, x *tensor.Tensor) *tensor.Tensor { return tp.ResizeBilinear(x, oh, ow) })
	case "ConcatV2":
		axis := constAt(len(ins) - 1)
		if axis == nil || len(axis.Data) != 1 || (axis.Data[0] != 3 && axis.Data[0] != -1) {
			return nil, fmt.Errorf("only concatenation along channels is supported")
		}
		parts := ins[:len(ins)-1]
		for _, v := range parts {
			if consts[v] != nil {
				return nil, fmt.Errorf("concatenation of a constant")
			}
		}
		return func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor { return tp.Concat(3, x...) }, nil
	}
	return nil, fmt.Errorf("op %s is not supported on the tape", node.Op)
}

// unaryStep is an op on one activation input.
func unaryStep(ins []int, consts map[int]*tensor.Tensor, f func(tp *tensor.Tape, x *tensor.Tensor) *tensor.Tensor) (func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor, error) {
	if len(ins) != 1 || consts[ins[0]] != nil {
		return nil, fmt.Errorf("want one activation input")
	}
	return func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor { return f(tp, x[0]) }, nil
}

// binaryStep is Add, Mul or Sub of two activations (broadcasting a
// (N, 1, 1, C) one) or of an activation and a scalar constant.
func binaryStep(op string, ins []int, consts map[int]*tensor.Tensor) (func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor, error) {
	if len(ins) != 2 {
		return nil, fmt.Errorf("%d inputs, want 2", len(ins))
	}
	a, b := consts[ins[0]], consts[ins[1]]
	switch {
	case a == nil && b == nil:
		return func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor {
			switch op {
			case "Add":
				return tp.Add(x[0], x[1])
			case "Mul":
				return tp.Mul(x[0], x[1])
			}
			return tp.Sub(x[0], x[1])
		}, nil
	case a != nil && b != nil:
		return nil, fmt.Errorf("ops on constants alone are not supported")
	}
	c, constFirst := b, false
	if a != nil {
		c, constFirst = a, true
	}
	if len(c.Data) != 1 {
		return nil, fmt.Errorf("only a scalar constant operand is supported, got shape %v", c.Shape)
	}
	v := c.Data[0]
	return func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor {
		switch {
		case op == "Add":
			return tp.AddScalar(x[0], v)
		case op == "Mul":
			return tp.Scale(x[0], v)
		case constFirst: // v - x
			return tp.AddScalar(tp.Neg(x[0]), v)
		}
		return tp.AddScalar(x[0], -v)
	}, nil
}

// convStep is a convolution, its bias and its fused activation.
func (n *Net) convStep(node *gnode, ins []int, param func(int) (*tensor.Tensor, error)) (func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor, error) {
	depthwise := node.Op == "FusedDepthwiseConv2dNative" || node.Op == "DepthwiseConv2dNative"
	fusedOp := node.Op == "_FusedConv2D" || node.Op == "FusedDepthwiseConv2dNative"
	st := ints(node.Attr["strides"])
	if len(st) != 4 || st[1] != st[2] || st[1] < 1 {
		return nil, fmt.Errorf("strides %v, want [1 s s 1]", st)
	}
	stride := int(st[1])
	same := string(node.Attr["padding"].S) == "SAME"
	w, err := param(1)
	if err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}
	var b *tensor.Tensor
	var a act
	if fusedOp {
		ops := node.Attr["fused_ops"].List
		if ops == nil || len(ops.S) == 0 || string(ops.S[0]) != "BiasAdd" || len(ins) != 3 {
			return nil, fmt.Errorf("fused_ops must start with BiasAdd and the node have 3 inputs")
		}
		if b, err = param(2); err != nil {
			return nil, fmt.Errorf("bias: %w", err)
		}
		for _, o := range ops.S[1:] {
			var ok bool
			if a, ok = actOf(string(o)); !ok || a.kind == "sigmoid" {
				return nil, fmt.Errorf("fused op %q is not supported", o)
			}
		}
	}
	return func(tp *tensor.Tape, x []*tensor.Tensor) *tensor.Tensor {
		var y *tensor.Tensor
		if depthwise {
			y = tp.DepthwiseConv2d(x[0], w, b, stride, same)
		} else {
			y = tp.Conv2d(x[0], w, b, stride, same)
		}
		switch a.kind {
		case "relu":
			y = tp.ReLU(y)
		case "relu6":
			y = tp.Clamp(y, 0, 6)
		}
		return y
	}, nil
}

// In names the part's input node.
func (n *Net) In() string { return n.in }

// Outs names the part's output nodes, in the order Forward returns them.
func (n *Net) Outs() []string { return slices.Clone(n.outs) }

// InShape is the shape of one image's input, (H, W, C).
func (n *Net) InShape() []int { return slices.Clone(n.inShape) }

// OutShape is the shape of one image's output i, (H, W, C).
func (n *Net) OutShape(i int) []int { return slices.Clone(n.outShapes[i]) }

// Params returns the trainable tensors, named by the graph's constants,
// sorted by name.
func (n *Net) Params() []Param { return slices.Clone(n.params) }

// Forward runs the part on x, (N, H, W, C) as InShape, recording on tp (nil:
// no gradients), and returns its outputs, each (N, H', W', C') as OutShape.
func (n *Net) Forward(tp *tensor.Tape, x *tensor.Tensor) []*tensor.Tensor {
	if x.Dims() != 4 || !slices.Equal(x.Shape[1:], n.inShape) {
		panic(&tensor.ShapeError{Op: "detect.Net.Forward", Msg: fmt.Sprintf("input %v, want (N, %d, %d, %d)", x.Shape, n.inShape[0], n.inShape[1], n.inShape[2])})
	}
	vals := make([]*tensor.Tensor, n.nvals)
	vals[0] = x
	for _, st := range n.steps {
		args := make([]*tensor.Tensor, len(st.ins)) // fresh: an op's backward may keep it (Concat)
		for i, v := range st.ins {
			args[i] = vals[v]
		}
		vals[st.out] = st.run(tp, args)
	}
	ys := make([]*tensor.Tensor, len(n.outSlots))
	for i, v := range n.outSlots {
		ys[i] = vals[v]
	}
	return ys
}

// A Cut is a place where the network is cut in two to fine-tune its upper
// part: Node's activation is computed once per image by the frozen lower
// part (WithTaps), and the Net from Node to the nodes of Maps recomputes
// those feature maps with trainable weights. The other maps do not depend
// on what the cut trains, or depend on more than Node.
type Cut struct {
	Name string   // short name: "s16" or "s32"
	Node string   // the graph node whose activation is cached
	Maps []string // names of the Maps entries the part recomputes, in Maps order
}

// Cuts lists the places where a photo model can fine-tune the detector:
// "s16" from the backbone's stride-16 output (32 x 32 x 88 at the 512
// input), through the stride-32 stage (three inverted-residual blocks and
// the last 1x1 convolution, 1.2 million weights) to backbone_s32, and
// through the neck's stride-16 merge to neck_s16; "s32" from the output
// of the stride-32 stage's second block (16 x 16 x 120), through its last
// block and the last 1x1 convolution to backbone_s32.
var Cuts = []Cut{
	{Name: "s16", Node: "tower_0/MobilenetV3/expanded_conv_11/add", Maps: []string{"neck_s16", "backbone_s32"}},
	{Name: "s32", Node: "tower_0/MobilenetV3/expanded_conv_13/add", Maps: []string{"backbone_s32"}},
}

// CutNamed returns the Cut of that name, or an error listing the names.
func CutNamed(name string) (Cut, error) {
	var names []string
	for _, c := range Cuts {
		if c.Name == name {
			return c, nil
		}
		names = append(names, c.Name)
	}
	return Cut{}, fmt.Errorf("detect: no cut named %q (want one of %v)", name, names)
}

// CutNet returns the part of the network that cut c fine-tunes: from
// c.Node to the nodes of c.Maps, Forward returning the maps in that order.
func (d *Detector) CutNet(c Cut) (*Net, error) {
	var outs []string
	for _, name := range c.Maps {
		i := slices.IndexFunc(Maps, func(s MapSpec) bool { return s.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("detect: cut %s: no map named %q", c.Name, name)
		}
		outs = append(outs, Maps[i].Node)
	}
	return d.Net(c.Node, outs...)
}

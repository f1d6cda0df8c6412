package detect

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/xmr-project/xmr/blas"
	"github.com/xmr-project/xmr/internal/colsum"
	"github.com/xmr-project/xmr/tfjs"
)

func sigmoid(v float32) float32 { return float32(1 / (1 + math.Exp(-float64(v)))) }

// add compiles node n into a step (or a constant slot) of g.
func (g *graph) add(n *gnode, m *tfjs.Model, inputShape shape) error {
	var ins []int
	var inShapes []shape
	for _, ref := range n.Inputs {
		if ref[0] == '^' {
			continue
		}
		v, ok := g.slot[tfjs.InputNode(ref)]
		if !ok {
			return fmt.Errorf("input %q not compiled", ref)
		}
		ins = append(ins, v)
		inShapes = append(inShapes, g.shapes[v])
	}
	constOf := func(i int) ([]float32, error) {
		if i >= len(ins) || g.consts[ins[i]] == nil {
			return nil, fmt.Errorf("input %d must be a constant", i)
		}
		return g.consts[ins[i]], nil
	}
	switch n.Op {
	case "Placeholder":
		if dt := n.Attr["dtype"]; dt.Kind == "type" && dt.Type != "DT_FLOAT" {
			return fmt.Errorf("input dtype %s, want DT_FLOAT", dt.Type)
		}
		if sh := n.Attr["shape"]; sh.Kind == "shape" {
			if len(sh.Shape) != len(inputShape) {
				return fmt.Errorf("input shape %v, want rank %d", sh.Shape, len(inputShape))
			}
			for i, d := range sh.Shape {
				if d >= 0 && int(d) != inputShape[i] {
					return fmt.Errorf("input shape %v does not accept %v", sh.Shape, inputShape)
				}
			}
		}
		g.input = g.newSlot(n.Name, inputShape, nil)
		return nil
	case "Const":
		t := m.Weights[n.Name]
		if t == nil {
			return fmt.Errorf("no weight named %q", n.Name)
		}
		data := t.F32
		switch t.DType {
		case "float32":
		case "int32":
			data = make([]float32, len(t.I32))
			for i, v := range t.I32 {
				data[i] = float32(v)
			}
		default:
			return fmt.Errorf("weight %q has dtype %s", n.Name, t.DType)
		}
		if data == nil {
			data = []float32{}
		}
		g.newSlot(n.Name, shape(slices.Clone(t.Shape)), data)
		return nil
	case "Identity":
		if len(ins) != 1 {
			return fmt.Errorf("%d inputs, want 1", len(ins))
		}
		g.slot[n.Name] = ins[0]
		return nil
	}
	if len(ins) == 0 || g.consts[ins[0]] != nil && n.Op != "Mul" && n.Op != "Add" && n.Op != "Sub" {
		return fmt.Errorf("ops on constants alone are not supported")
	}
	switch n.Op {
	case "_FusedConv2D", "Conv2D", "FusedDepthwiseConv2dNative", "DepthwiseConv2dNative":
		return g.addConv(n, ins, inShapes, constOf)
	case "_HardSwish", "Relu", "Relu6", "Sigmoid":
		a, ok := actOf(n.Op)
		if !ok {
			a = n.fused // _HardSwish
		}
		if len(ins) != 1 {
			return fmt.Errorf("%d inputs, want 1", len(ins))
		}
		g.addStep(n, ins, inShapes[0], func(in [][]float32, out []float32) {
			parallel(len(out)/256+1, func(lo, hi int) {
				lo, hi = lo*256, min(hi*256, len(out))
				biasAct(out[lo:hi], in[0][lo:hi], nil, hi-lo, a)
			})
		})
		return nil
	case "Add", "Mul", "Sub":
		return g.addBinary(n, ins, inShapes)
	case "Mean":
		axes, err := constOf(1)
		if err != nil {
			return err
		}
		s := inShapes[0]
		if len(s) != 4 || len(axes) != 2 || axes[0] != 1 || axes[1] != 2 {
			return fmt.Errorf("only the mean over axes [1 2] of an NHWC tensor is supported, got axes %v of %v", axes, s)
		}
		if kd := n.Attr["keep_dims"]; !kd.B {
			return fmt.Errorf("keep_dims must be true")
		}
		h, w, c := s[1], s[2], s[3]
		g.addStep(n, ins[:1], shape{1, 1, 1, c}, func(in [][]float32, out []float32) {
			colsum.Mean(out, in[0], h*w, c)
		})
		return nil
	case "ResizeBilinear":
		return g.addResize(n, ins, inShapes, constOf)
	case "ConcatV2":
		return g.addConcat(n, ins, inShapes, constOf)
	}
	return fmt.Errorf("op %s is not supported", n.Op)
}

func (g *graph) addStep(n *gnode, ins []int, out shape, run func(ins [][]float32, out []float32)) {
	v := g.newSlot(n.Name, out, nil)
	g.steps = append(g.steps, step{name: n.Name, op: n.Op, in: ins, out: v, run: run})
}

func ints(a tfjs.Attr) []int64 {
	if a.List == nil {
		return nil
	}
	return a.List.I
}

// samePad returns the output size and leading padding of TF's "SAME" or
// "VALID" padding.
func samePad(in, k, stride int, same bool) (out, pad int) {
	if !same {
		return (in-k)/stride + 1, 0
	}
	out = (in + stride - 1) / stride
	total := max((out-1)*stride+k-in, 0)
	return out, total / 2
}

func (g *graph) addConv(n *gnode, ins []int, inShapes []shape, constOf func(int) ([]float32, error)) error {
	depthwise := n.Op == "FusedDepthwiseConv2dNative" || n.Op == "DepthwiseConv2dNative"
	fusedOp := n.Op == "_FusedConv2D" || n.Op == "FusedDepthwiseConv2dNative"
	if df := n.Attr["data_format"]; df.Kind == "s" && string(df.S) != "NHWC" {
		return fmt.Errorf("data_format %q, want NHWC", df.S)
	}
	st := ints(n.Attr["strides"])
	if len(st) != 4 || st[0] != 1 || st[3] != 1 || st[1] != st[2] || st[1] < 1 || st[1] > 4 {
		return fmt.Errorf("strides %v, want [1 s s 1]", st)
	}
	stride := int(st[1])
	if d := ints(n.Attr["dilations"]); len(d) > 0 && (len(d) != 4 || d[1] != 1 || d[2] != 1) {
		return fmt.Errorf("dilations %v are not supported", d)
	}
	var same bool
	switch p := string(n.Attr["padding"].S); p {
	case "SAME":
		same = true
	case "VALID":
	default:
		return fmt.Errorf("padding %q, want SAME or VALID", p)
	}
	x := inShapes[0]
	if len(x) != 4 || x[0] != 1 {
		return fmt.Errorf("input shape %v, want [1 H W C]", x)
	}
	if len(ins) < 2 {
		return fmt.Errorf("no filter input")
	}
	filter, err := constOf(1)
	if err != nil {
		return fmt.Errorf("filter: %w", err)
	}
	fs := inShapes[1]
	if len(fs) != 4 || fs[2] != x[3] {
		return fmt.Errorf("filter %q has shape %v; input has %d channels", n.Inputs[1], fs, x[3])
	}
	if fs[0] != fs[1] || fs[0] > 7 {
		return fmt.Errorf("filter %q has shape %v; only square kernels up to 7 are supported", n.Inputs[1], fs)
	}
	k, cin := fs[0], fs[2]
	cout := fs[3]
	if depthwise {
		if fs[3] != 1 {
			return fmt.Errorf("filter %q has shape %v; only a channel multiplier of 1 is supported", n.Inputs[1], fs)
		}
		cout = cin
	}
	a := n.fused
	var bias []float32
	if fusedOp {
		ops := n.Attr["fused_ops"].List
		if ops == nil || len(ops.S) == 0 || string(ops.S[0]) != "BiasAdd" {
			return fmt.Errorf("fused_ops must start with BiasAdd")
		}
		if na := n.Attr["num_args"]; na.Kind == "i" && na.I != 1 {
			return fmt.Errorf("num_args %d, want 1", na.I)
		}
		if len(ins) != 3 {
			return fmt.Errorf("%d inputs, want 3 (input, filter, bias)", len(ins))
		}
		if bias, err = constOf(2); err != nil {
			return fmt.Errorf("bias: %w", err)
		}
		if bs := inShapes[2]; len(bs) != 1 || bs[0] != cout {
			return fmt.Errorf("bias %q has shape %v, want [%d]", n.Inputs[2], bs, cout)
		}
		for _, o := range ops.S[1:] {
			if a.kind != "" {
				return fmt.Errorf("two activations on one convolution")
			}
			var ok bool
			if a, ok = actOf(string(o)); !ok || a.kind == "sigmoid" {
				return fmt.Errorf("fused op %q is not supported", o)
			}
		}
	} else if len(ins) != 2 {
		return fmt.Errorf("%d inputs, want 2 (input, filter)", len(ins))
	}
	h, w := x[1], x[2]
	oh, padT := samePad(h, k, stride, same)
	ow, padL := samePad(w, k, stride, same)
	if oh < 1 || ow < 1 {
		return fmt.Errorf("kernel %d larger than input %dx%d", k, h, w)
	}
	c := conv{h: h, w: w, cin: cin, cout: cout, k: k, stride: stride, oh: oh, ow: ow, padT: padT, padL: padL, filter: filter, bias: bias, act: a}
	run := c.gemm
	if depthwise {
		run = c.depthwise
	}
	g.addStep(n, ins[:1], shape{1, oh, ow, cout}, run)
	return nil
}

// conv is a compiled convolution.
type conv struct {
	h, w, cin, cout, k, stride, oh, ow, padT, padL int
	filter, bias                                   []float32 // HWIO (depthwise: HWC1)
	act                                            act
}

// epilogue adds the bias and applies the activation to rows [lo, hi) of out.
func (c *conv) epilogue(out []float32, lo, hi int) {
	o := out[lo*c.cout : hi*c.cout]
	biasAct(o, o, c.bias, c.cout, c.act)
}

// gemmBlockFloats is the working set (im2col rows plus output rows, in
// floats) of one block of a convolution computed as a matrix product: small
// enough that the block's output is still in the core's cache when its
// epilogue runs.
const gemmBlockFloats = 32 << 10

// gemm computes a full convolution as a matrix product: directly for a 1x1
// kernel with stride 1, through im2col otherwise. The output pixels are cut
// into blocks of rows, each computed start to end (im2col, product, bias
// and activation) by one goroutine while it is in cache.
func (c *conv) gemm(in [][]float32, out []float32) {
	x := in[0]
	m := c.oh * c.ow
	kk := c.k * c.k * c.cin
	direct := c.k == 1 && c.stride == 1 && c.padT == 0 && c.padL == 0
	rows := min(m, max(16, gemmBlockFloats/(kk+c.cout)))
	blocks := (m + rows - 1) / rows
	parallel(blocks, func(b0, b1 int) {
		var scratch *[]float32
		if !direct {
			scratch = getScratch(rows * kk)
			defer scratchPool.Put(scratch)
		}
		for b := b0; b < b1; b++ {
			lo, hi := b*rows, min((b+1)*rows, m)
			var a []float32
			if direct {
				a = x[lo*kk:]
			} else {
				a = (*scratch)[:(hi-lo)*kk]
				c.im2col(x, a, lo, hi)
			}
			blas.SgemmSerial(false, false, hi-lo, c.cout, kk, 1, a, kk, c.filter, c.cout, 0, out[lo*c.cout:], c.cout)
			c.epilogue(out, lo, hi)
		}
	})
}

// im2col writes the input patches of output pixels [lo, hi) (in raster
// order) to dst, one row of k*k*cin values per pixel. A patch inside the
// input is k runs of k*cin contiguous values (one per kernel row), copied
// as such: the first convolution's 3 channels would otherwise take a copy
// of 3 values for each of its 9 taps.
func (c *conv) im2col(x, dst []float32, lo, hi int) {
	kk := c.k * c.k * c.cin
	run := c.k * c.cin
	for p := lo; p < hi; p++ {
		oy, ox := p/c.ow, p%c.ow
		row := dst[(p-lo)*kk : (p-lo+1)*kk]
		iy0, ix0 := oy*c.stride-c.padT, ox*c.stride-c.padL
		if iy0 >= 0 && ix0 >= 0 && iy0+c.k <= c.h && ix0+c.k <= c.w {
			for ky := 0; ky < c.k; ky++ {
				at := ((iy0+ky)*c.w + ix0) * c.cin
				copy(row[ky*run:(ky+1)*run], x[at:at+run])
			}
			continue
		}
		for ky := 0; ky < c.k; ky++ {
			iy := oy*c.stride + ky - c.padT
			for kx := 0; kx < c.k; kx++ {
				ix := ox*c.stride + kx - c.padL
				d := row[(ky*c.k+kx)*c.cin : (ky*c.k+kx+1)*c.cin]
				if iy < 0 || iy >= c.h || ix < 0 || ix >= c.w {
					clear(d)
					continue
				}
				copy(d, x[(iy*c.w+ix)*c.cin:])
			}
		}
	}
}

// scratchPool holds im2col buffers between blocks and runs.
var scratchPool sync.Pool

func getScratch(n int) *[]float32 {
	if s, ok := scratchPool.Get().(*[]float32); ok && cap(*s) >= n {
		*s = (*s)[:n]
		return s
	}
	s := make([]float32, n)
	return &s
}

// depthwise computes a depthwise convolution with channel multiplier 1, one
// output row at a time. The row's interior pixels (every tap inside the
// image) go through dwInterior, four pixels at a time with all taps summed
// in registers; the others accumulate tap by tap: for each kernel tap, the
// run of output pixels whose input pixel is inside the image is added by
// dwRow.
func (c *conv) depthwise(in [][]float32, out []float32) {
	x := in[0]
	C, s := c.cin, c.stride
	// Interior columns: ox*s - padL >= 0 and ox*s - padL + k - 1 < w.
	ia := (c.padL + s - 1) / s
	ib := 0
	if last := c.w - c.k + c.padL; last >= 0 {
		ib = min(c.ow, last/s+1)
	}
	parallel(c.oh, func(lo, hi int) {
		for oy := lo; oy < hi; oy++ {
			orow := out[oy*c.ow*C : (oy+1)*c.ow*C]
			iy0 := oy*s - c.padT
			if iy0 >= 0 && iy0+c.k <= c.h && ib-ia >= 4 {
				groups := (ib - ia) / 4
				b := ia + 4*groups
				dwInterior(orow[ia*C:], x[(iy0*c.w+ia*s-c.padL)*C:], c.filter, groups, C, c.k, s*C, c.w*C)
				c.dwTaps(orow, x, oy, 0, ia)
				c.dwTaps(orow, x, oy, b, c.ow)
			} else {
				c.dwTaps(orow, x, oy, 0, c.ow)
			}
			c.epilogue(out, oy*c.ow, (oy+1)*c.ow)
		}
	})
}

// dwTaps computes output pixels [lo, hi) of row oy of a depthwise
// convolution tap by tap.
func (c *conv) dwTaps(orow, x []float32, oy, lo, hi int) {
	if lo >= hi {
		return
	}
	C, s := c.cin, c.stride
	clear(orow[lo*C : hi*C])
	for ky := 0; ky < c.k; ky++ {
		iy := oy*s + ky - c.padT
		if iy < 0 || iy >= c.h {
			continue
		}
		for kx := 0; kx < c.k; kx++ {
			// ox*s + kx - padL must lie in [0, w).
			oxLo := lo
			if d := c.padL - kx; d > 0 {
				oxLo = max(oxLo, (d+s-1)/s)
			}
			last := c.w - 1 + c.padL - kx
			if last < 0 {
				continue
			}
			oxHi := min(hi, last/s+1)
			if oxLo >= oxHi {
				continue
			}
			ix := oxLo*s + kx - c.padL
			wk := c.filter[(ky*c.k+kx)*C : (ky*c.k+kx+1)*C]
			dwRow(orow[oxLo*C:], x[(iy*c.w+ix)*C:], wk, oxHi-oxLo, C, s*C)
		}
	}
}

// addBinary compiles Add, Mul or Sub with TF broadcasting of a scalar or a
// [1 1 1 C] tensor against an activation.
func (g *graph) addBinary(n *gnode, ins []int, inShapes []shape) error {
	if len(ins) != 2 {
		return fmt.Errorf("%d inputs, want 2", len(ins))
	}
	a, b := inShapes[0], inShapes[1]
	swap := false
	big, small := a, b
	if b.size() > a.size() {
		big, small, swap = b, a, true
	}
	if len(big) != 4 {
		return fmt.Errorf("shapes %v and %v: only NHWC activations are supported", a, b)
	}
	var period int // the small operand repeats with this period
	switch {
	case slices.Equal(a, b):
		period = 0
	case small.size() == 1 && len(small) <= 4:
		period = 1
	case len(small) == 4 && small[0] == 1 && small[1] == 1 && small[2] == 1 && small[3] == big[3]:
		period = big[3]
	default:
		return fmt.Errorf("shapes %v and %v do not broadcast in a supported way", a, b)
	}
	op := n.Op
	bi, si := 0, 1
	if swap {
		bi, si = 1, 0
	}
	// Sub is the one that is not commutative: out = in[0] - in[1].
	sign := float32(1)
	if op == "Sub" {
		sign = -1
	}
	C := max(period, 1)
	pixels := big.size() / C
	g.addStep(n, ins, slices.Clone(big), func(in [][]float32, out []float32) {
		X, Y := in[bi], in[si]
		parallel(pixels/64+1, func(lo, hi int) {
			lo, hi = lo*64*C, min(hi*64*C, len(out))
			o, x := out[lo:hi], X[lo:hi]
			switch {
			case period == 0 && op == "Mul":
				y := Y[lo:hi]
				for i := range o {
					o[i] = x[i] * y[i]
				}
			case period == 0:
				y := Y[lo:hi]
				if swap {
					x, y = y, x
				}
				for i := range o {
					o[i] = x[i] + sign*y[i]
				}
			case period == 1 && op == "Mul":
				v := Y[0]
				for i := range o {
					o[i] = x[i] * v
				}
			case period == 1:
				v := Y[0]
				for i := range o {
					if swap {
						o[i] = v + sign*x[i]
					} else {
						o[i] = x[i] + sign*v
					}
				}
			case op == "Mul":
				scaleCols(o, x, Y[:C], C)
			case op == "Add":
				biasAct(o, x, Y[:C], C, act{})
			default:
				y := Y[:C]
				for p := 0; p+C <= len(o); p += C {
					oo, xx := o[p:p+C], x[p:p+C]
					for j := range oo {
						if swap {
							oo[j] = y[j] + sign*xx[j]
						} else {
							oo[j] = xx[j] + sign*y[j]
						}
					}
				}
			}
		})
	})
	return nil
}

// addResize compiles ResizeBilinear with TF1 sampling (align_corners and
// half_pixel_centers false): source = destination * in/out.
func (g *graph) addResize(n *gnode, ins []int, inShapes []shape, constOf func(int) ([]float32, error)) error {
	size, err := constOf(1)
	if err != nil {
		return fmt.Errorf("size: %w", err)
	}
	if n.Attr["align_corners"].B || n.Attr["half_pixel_centers"].B {
		return fmt.Errorf("only align_corners=false, half_pixel_centers=false is supported")
	}
	s := inShapes[0]
	if len(s) != 4 || len(size) != 2 || size[0] < 1 || size[1] < 1 || size[0] > 1<<14 || size[1] > 1<<14 {
		return fmt.Errorf("input %v, size %v", s, size)
	}
	h, w, c := s[1], s[2], s[3]
	oh, ow := int(size[0]), int(size[1])
	sy, sx := float32(h)/float32(oh), float32(w)/float32(ow)
	g.addStep(n, ins[:1], shape{1, oh, ow, c}, func(in [][]float32, out []float32) {
		x := in[0]
		parallel(oh, func(lo, hi int) {
			for oy := lo; oy < hi; oy++ {
				fy := float32(oy) * sy
				y0 := int(fy)
				y1 := min(y0+1, h-1)
				dy := fy - float32(y0)
				for ox := 0; ox < ow; ox++ {
					fx := float32(ox) * sx
					x0 := int(fx)
					x1 := min(x0+1, w-1)
					dx := fx - float32(x0)
					tl, tr := x[(y0*w+x0)*c:], x[(y0*w+x1)*c:]
					bl, br := x[(y1*w+x0)*c:], x[(y1*w+x1)*c:]
					o := out[(oy*ow+ox)*c : (oy*ow+ox+1)*c]
					for j := range o {
						top := tl[j] + (tr[j]-tl[j])*dx
						bot := bl[j] + (br[j]-bl[j])*dx
						o[j] = top + (bot-top)*dy
					}
				}
			}
		})
	})
	return nil
}

// addConcat compiles ConcatV2 along the channel axis.
func (g *graph) addConcat(n *gnode, ins []int, inShapes []shape, constOf func(int) ([]float32, error)) error {
	if len(ins) < 2 {
		return fmt.Errorf("%d inputs, want at least 2", len(ins))
	}
	axis, err := constOf(len(ins) - 1)
	if err != nil || len(axis) != 1 {
		return fmt.Errorf("axis: must be a scalar constant")
	}
	parts := inShapes[:len(ins)-1]
	ref := parts[0]
	if len(ref) != 4 || (axis[0] != 3 && axis[0] != -1) {
		return fmt.Errorf("only concatenation of NHWC tensors along channels is supported (axis %v, shape %v)", axis[0], ref)
	}
	widths := make([]int, len(parts))
	total := 0
	for i, p := range parts {
		if len(p) != 4 || p[0] != ref[0] || p[1] != ref[1] || p[2] != ref[2] {
			return fmt.Errorf("input %d has shape %v, input 0 %v", i, p, ref)
		}
		widths[i] = p[3]
		total += p[3]
	}
	hw := ref[1] * ref[2]
	g.addStep(n, ins[:len(ins)-1], shape{1, ref[1], ref[2], total}, func(in [][]float32, out []float32) {
		parallel(hw, func(lo, hi int) {
			for p := lo; p < hi; p++ {
				off := p * total
				for i, c := range widths {
					copy(out[off:off+c], in[i][p*c:(p+1)*c])
					off += c
				}
			}
		})
	})
	return nil
}

package detect

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/xmr-project/xmr/tfjs"
)

// The network is run as a small graph executor over the nodes of the TF.js
// graph: each node the requested outputs depend on is compiled once, at Load,
// into a step bound to its weights by name, with every shape checked and every
// activation's size known; Run then executes the steps in order.
//
// Two rewrites make it fast without changing what is computed: the four
// nodes of a hard-swish (x * c * relu6(x + 3)) become one step, and an
// activation that follows a convolution is applied as the convolution's
// epilogue.

// shape is a static tensor shape; activations are [1, H, W, C].
type shape []int

func (s shape) size() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// act is an activation applied in place.
type act struct {
	kind string  // "", "relu", "relu6", "sigmoid", "hswish"
	add  float32 // hswish: the constant added (3)
	mul  float32 // hswish: the scale (1/6 as stored)
}

// step is one compiled node.
type step struct {
	name string
	op   string
	in   []int // value slots read
	out  int   // value slot written
	run  func(ins [][]float32, out []float32)
}

// graph is a compiled network.
type graph struct {
	shapes  []shape     // per value slot
	consts  [][]float32 // per value slot: data of a constant, nil for an activation
	slot    map[string]int
	steps   []step
	input   int
	outputs map[string]int
	free    [][]int // free[i]: slots whose last reader is step i
	pool    sync.Pool
}

type gnode struct {
	tfjs.Node
	fused act // activation folded into this node
}

// compile builds the steps computing outputs from the graph's single
// placeholder of the given shape.
func compile(m *tfjs.Model, inputShape shape, outputs []string) (*graph, error) {
	byName := make(map[string]*gnode, len(m.Nodes))
	for i := range m.Nodes {
		byName[m.Nodes[i].Name] = &gnode{Node: m.Nodes[i]}
	}
	for _, o := range outputs {
		if byName[o] == nil {
			return nil, fmt.Errorf("output %q is not a node of the graph", o)
		}
	}
	// consumers counts the readers of each node among the nodes the outputs
	// depend on.
	consumers := func() map[string]int {
		c := make(map[string]int)
		seen := make(map[string]bool)
		var walk func(name string)
		walk = func(name string) {
			if seen[name] {
				return
			}
			seen[name] = true
			n := byName[name]
			if n == nil {
				return
			}
			for _, in := range n.Inputs {
				c[tfjs.InputNode(in)]++
				walk(tfjs.InputNode(in))
			}
		}
		for _, o := range outputs {
			c[o]++
			walk(o)
		}
		return c
	}
	fuseHardSwish(m, byName)
	fuseActivations(byName, consumers())

	g := &graph{slot: make(map[string]int), outputs: make(map[string]int)}
	state := make(map[string]int) // 0 unvisited, 1 visiting, 2 done
	var visit func(name string) error
	visit = func(name string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("node %q is part of a cycle", name)
		case 2:
			return nil
		}
		state[name] = 1
		n := byName[name]
		if n == nil {
			return fmt.Errorf("node %q is missing", name)
		}
		for _, in := range n.Inputs {
			if in[0] == '^' {
				continue
			}
			if tfjs.InputIndex(in) != 0 {
				return fmt.Errorf("node %q reads output %q; only single-output nodes are supported", name, in)
			}
			if err := visit(tfjs.InputNode(in)); err != nil {
				return err
			}
		}
		if err := g.add(n, m, inputShape); err != nil {
			return fmt.Errorf("node %q (%s): %w", name, n.Op, err)
		}
		state[name] = 2
		return nil
	}
	for _, o := range outputs {
		if err := visit(o); err != nil {
			return nil, err
		}
		g.outputs[o] = g.slot[o]
	}
	// Liveness: free each activation slot after its last reader.
	last := make(map[int]int)
	for i, s := range g.steps {
		for _, v := range s.in {
			last[v] = i
		}
	}
	keep := make(map[int]bool)
	for _, v := range g.outputs {
		keep[v] = true
	}
	g.free = make([][]int, len(g.steps))
	for v, i := range last {
		if g.consts[v] == nil && !keep[v] && v != g.input {
			g.free[i] = append(g.free[i], v)
		}
	}
	if _, ok := g.slot[placeholderName(m)]; !ok {
		return nil, fmt.Errorf("the outputs do not depend on the input")
	}
	return g, nil
}

func placeholderName(m *tfjs.Model) string {
	for _, n := range m.Nodes {
		if n.Op == "Placeholder" {
			return n.Name
		}
	}
	return ""
}

func (g *graph) newSlot(name string, s shape, data []float32) int {
	g.shapes = append(g.shapes, s)
	g.consts = append(g.consts, data)
	g.slot[name] = len(g.shapes) - 1
	return len(g.shapes) - 1
}

// fuseHardSwish replaces y = (c*x) * relu6(x + a) by one node named y.
func fuseHardSwish(m *tfjs.Model, byName map[string]*gnode) {
	scalar := func(ref string) (float32, bool) {
		n := byName[tfjs.InputNode(ref)]
		if n == nil || n.Op != "Const" {
			return 0, false
		}
		t := m.Weights[n.Name]
		if t == nil || t.DType != "float32" || len(t.F32) != 1 {
			return 0, false
		}
		return t.F32[0], true
	}
	for _, n := range byName {
		if n.Op != "Mul" || len(n.Inputs) != 2 {
			continue
		}
		for k := 0; k < 2; k++ {
			scaled := byName[tfjs.InputNode(n.Inputs[k])]
			r6 := byName[tfjs.InputNode(n.Inputs[1-k])]
			if scaled == nil || r6 == nil || scaled.Op != "Mul" || r6.Op != "Relu6" || len(scaled.Inputs) != 2 || len(r6.Inputs) != 1 {
				continue
			}
			add := byName[tfjs.InputNode(r6.Inputs[0])]
			if add == nil || add.Op != "Add" || len(add.Inputs) != 2 {
				continue
			}
			var x string
			var c, a float32
			var ok bool
			if c, ok = scalar(scaled.Inputs[0]); ok {
				x = scaled.Inputs[1]
			} else if c, ok = scalar(scaled.Inputs[1]); ok {
				x = scaled.Inputs[0]
			} else {
				continue
			}
			if a, ok = scalar(add.Inputs[1]); !ok || add.Inputs[0] != x {
				if a, ok = scalar(add.Inputs[0]); !ok || add.Inputs[1] != x {
					continue
				}
			}
			n.Op = "_HardSwish"
			n.Inputs = []string{x}
			n.fused = act{kind: "hswish", add: a, mul: c}
			break
		}
	}
}

var convOps = map[string]bool{"_FusedConv2D": true, "Conv2D": true, "DepthwiseConv2dNative": true, "FusedDepthwiseConv2dNative": true}

// actOf returns the activation of a graph op (or of an op fused into a
// convolution): Relu, Relu6 or Sigmoid.
func actOf(op string) (act, bool) {
	switch op {
	case "Relu":
		return act{kind: "relu"}, true
	case "Relu6":
		return act{kind: "relu6"}, true
	case "Sigmoid":
		return act{kind: "sigmoid"}, true
	}
	return act{}, false
}

// fuseActivations folds a Relu, Relu6, Sigmoid or hard-swish into the convolution it
// follows when that convolution has no other reader. The fused node takes the
// activation's name.
func fuseActivations(byName map[string]*gnode, consumers map[string]int) {
	for name, n := range byName {
		a, ok := actOf(n.Op)
		if n.Op == "_HardSwish" {
			a, ok = n.fused, true
		}
		if !ok {
			continue
		}
		if len(n.Inputs) != 1 {
			continue
		}
		src := byName[tfjs.InputNode(n.Inputs[0])]
		if src == nil || !convOps[src.Op] || src.fused.kind != "" || consumers[src.Name] != 1 {
			continue
		}
		fused := *src
		fused.Name = name
		fused.fused = a
		byName[name] = &fused
	}
}

// run executes the graph on one input, returning the requested outputs by
// name; each is a fresh slice the caller owns.
func (g *graph) run(ctx context.Context, input []float32, want func(name string) bool) (map[string][]float32, error) {
	if len(input) != g.shapes[g.input].size() {
		return nil, fmt.Errorf("input has %d values, want %d", len(input), g.shapes[g.input].size())
	}
	vals := make([][]float32, len(g.shapes))
	copy(vals, g.consts)
	vals[g.input] = input
	ar, _ := g.pool.Get().(*arena)
	if ar == nil {
		ar = &arena{free: make(map[int][][]float32)}
	}
	defer g.pool.Put(ar)
	ins := make([][]float32, 0, 4)
	for i, s := range g.steps {
		if i%8 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		ins = ins[:0]
		for _, v := range s.in {
			ins = append(ins, vals[v])
		}
		if vals[s.out] == nil {
			vals[s.out] = ar.get(g.shapes[s.out].size())
		}
		s.run(ins, vals[s.out])
		for _, v := range g.free[i] {
			ar.put(vals[v])
			vals[v] = nil
		}
	}
	out := make(map[string][]float32, len(g.outputs))
	// The outputs' buffers are handed to the caller, not recycled.
	handed := make(map[int][]float32)
	for name, v := range g.outputs {
		if !want(name) {
			continue
		}
		if b, ok := handed[v]; ok {
			out[name] = slices.Clone(b)
			continue
		}
		b := vals[v]
		if g.consts[v] != nil || v == g.input {
			b = slices.Clone(b)
		} else {
			vals[v] = nil
		}
		handed[v] = b
		out[name] = b
	}
	for v, b := range vals {
		if b != nil && g.consts[v] == nil && v != g.input {
			ar.put(b)
			vals[v] = nil
		}
	}
	return out, nil
}

// recycle hands buffers that run returned back to the arenas, for later
// runs.
func (g *graph) recycle(bufs ...[]float32) {
	ar, _ := g.pool.Get().(*arena)
	if ar == nil {
		ar = &arena{free: make(map[int][][]float32)}
	}
	for _, b := range bufs {
		if b != nil {
			ar.put(b)
		}
	}
	g.pool.Put(ar)
}

// arena recycles activation buffers between steps and between runs.
type arena struct{ free map[int][][]float32 }

func (a *arena) get(n int) []float32 {
	l := a.free[n]
	if len(l) == 0 {
		return make([]float32, n)
	}
	b := l[len(l)-1]
	a.free[n] = l[:len(l)-1]
	return b
}

func (a *arena) put(b []float32) { a.free[len(b)] = append(a.free[len(b)], b) }

// parallel runs f over [0, n) split into one contiguous range per CPU.
func parallel(n int, f func(lo, hi int)) {
	p := min(runtime.GOMAXPROCS(0), n)
	if p <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	step := (n + p - 1) / p
	for lo := 0; lo < n; lo += step {
		hi := min(lo+step, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	wg.Wait()
}

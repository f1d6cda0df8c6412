package tensor

import "math/rand/v2"

// Tape records operations for reverse-mode differentiation. A Tape is used by
// one goroutine at a time. A nil *Tape records nothing (no-grad mode).
type Tape struct {
	nodes []node
	pool  *bufPool  // shared with the tapes forked from this one
	live  []*Tensor // tensors whose buffers return to the pool on Reset
	// Training enables dropout. NewTape sets it; inference uses a nil tape.
	Training bool
	// Rand drives dropout. NewTape seeds it with a fixed seed; set it (for
	// example per step from the run's seed) for reproducible training.
	Rand *rand.Rand
	// async runs weight gradients during BackwardAndReset (see async.go).
	async *asyncRunner
	// joined is the tape this one was forked from once join has taken
	// this one's record over: the one its backward closures act on.
	joined *Tape
}

type node struct {
	out      *Tensor
	backward func(g []float32)
}

// NewTape returns an empty tape in training mode.
func NewTape() *Tape {
	return &Tape{Training: true, Rand: rand.New(rand.NewPCG(0x786d72, 1))}
}

// Seed resets the dropout generator to a stream determined by seed and
// stream (e.g. the run seed and the step number).
func (tp *Tape) Seed(seed, stream uint64) { tp.Rand = rand.New(rand.NewPCG(seed, stream)) }

// Len returns the number of recorded operations.
func (tp *Tape) Len() int {
	if tp == nil {
		return 0
	}
	return len(tp.nodes)
}

// needs reports whether an op over these inputs must be recorded.
func (tp *Tape) needs(ins ...*Tensor) bool {
	if tp == nil {
		return false
	}
	for _, t := range ins {
		if t != nil && t.requiresGrad {
			return true
		}
	}
	return false
}

// record adds an op producing out; backward receives out's gradient and must
// accumulate into the inputs' gradients (use grad()).
func (tp *Tape) record(out *Tensor, backward func(g []float32)) {
	out.requiresGrad = true
	tp.nodes = append(tp.nodes, node{out: out, backward: backward})
}

// alloc returns a buffer of n floats with unspecified contents.
func (tp *Tape) alloc(n int) []float32 {
	if tp == nil {
		return make([]float32, n)
	}
	return tp.bufs().get(n)
}

// bufs returns the pool the tape's buffers come from.
func (tp *Tape) bufs() *bufPool {
	if tp.pool == nil {
		tp.pool = &bufPool{}
	}
	return tp.pool
}

// target returns the tape that now holds this one's record: tp, or the
// tape it was joined into.
func (tp *Tape) target() *Tape {
	for tp != nil && tp.joined != nil {
		tp = tp.joined
	}
	return tp
}

// allocZero returns a zeroed buffer of n floats.
func (tp *Tape) allocZero(n int) []float32 {
	if tp == nil {
		return make([]float32, n)
	}
	b := tp.alloc(n)
	clear(b)
	return b
}

// newTensor makes a tensor with an uninitialised buffer owned by the tape.
func (tp *Tape) newTensor(shape []int) *Tensor {
	tp = tp.target()
	t := &Tensor{Shape: append([]int(nil), shape...), Data: tp.alloc(prod(shape))}
	if tp != nil {
		t.owner = tp
		tp.live = append(tp.live, t)
	}
	return t
}

// newZero makes a zeroed tensor owned by the tape.
func (tp *Tape) newZero(shape []int) *Tensor {
	t := tp.newTensor(shape)
	clear(t.Data)
	return t
}

// view makes a tensor sharing data's buffer (owned by whoever owns data).
// Its gradient buffer, if any, is the tape's.
func (tp *Tape) view(data []float32, shape []int) *Tensor {
	tp = tp.target()
	t := &Tensor{Shape: append([]int(nil), shape...), Data: data, isView: true}
	if tp != nil {
		t.owner = tp
		tp.live = append(tp.live, t)
	}
	return t
}

// grad returns t's gradient buffer, allocating a zeroed one on first use.
// Intermediate tensors take it from the tape's pool; leaves from the heap, so
// that parameter gradients survive Reset.
func (tp *Tape) grad(t *Tensor) []float32 {
	tp = tp.target()
	if tp != nil && tp.async != nil {
		tp.async.waitFor(t)
	}
	if t.Grad == nil {
		if t.owner == tp && tp != nil && len(tp.nodes) > 0 {
			t.Grad = tp.allocZero(len(t.Data))
			t.gradOwned = true
		} else {
			t.Grad = make([]float32, len(t.Data))
		}
	}
	return t.Grad
}

// gradIf returns t's gradient buffer as grad does, or nil when t does not
// require a gradient: the backward closures skip the nil ones.
func (tp *Tape) gradIf(t *Tensor) []float32 {
	if !t.requiresGrad {
		return nil
	}
	return tp.grad(t)
}

// Backward computes the gradient of loss (a one-element tensor) with
// respect to every tensor recorded on the tape and every leaf that requires
// gradients; leaves' gradients accumulate across calls until ZeroGrad.
func (tp *Tape) Backward(loss *Tensor) {
	checkLoss(loss)
	tp.BackwardWithGrad(loss, []float32{1})
}

// BackwardWithGrad back-propagates the given output gradient from out.
func (tp *Tape) BackwardWithGrad(out *Tensor, g []float32) { tp.backward(out, g, false) }

// BackwardAndReset is Backward followed by Reset, with the peak memory of
// the forward pass alone: as soon as an op's backward has run, its output's
// gradient and (unless the output is a view) its values go back to the
// pool, where the gradients of the earlier ops find them. Backward then
// Reset holds every intermediate value and every intermediate gradient at
// once, twice the activations; a training step needs only the first.
// Tensors produced on the tape must not be used afterwards, as after Reset
// (read the loss before calling it). With OpenBLAS on one thread per call
// and two or more cores, the weight gradients of large Linear layers are
// computed by a worker goroutine beside the rest of the pass (async.go),
// with the same results bit for bit; they are all in place when it
// returns.
func (tp *Tape) BackwardAndReset(loss *Tensor) {
	checkLoss(loss)
	tp.backward(loss, []float32{1}, true)
	tp.Reset()
}

// checkLoss panics unless loss has one element.
func checkLoss(loss *Tensor) {
	if len(loss.Data) != 1 {
		panic(shapeErr("Backward", "loss must have one element, has shape %v", loss.Shape))
	}
}

// backward walks the tape in reverse from out with out's gradient g,
// releasing each op's buffers after its backward when release is set.
func (tp *Tape) backward(out *Tensor, g []float32, release bool) {
	if tp == nil {
		panic(shapeErr("Backward", "no tape: the forward pass ran in no-grad mode"))
	}
	if len(g) != len(out.Data) {
		panic(shapeErr("Backward", "gradient of %d values for output of shape %v", len(g), out.Shape))
	}
	og := tp.grad(out)
	for i, v := range g {
		og[i] += v
	}
	if release && asyncEnabled() {
		tp.async = startAsync()
		defer func() {
			r := tp.async
			tp.async = nil
			for _, b := range r.finish() {
				tp.bufs().put(b)
			}
		}()
	}
	for i := len(tp.nodes) - 1; i >= 0; i-- {
		n := tp.nodes[i]
		if n.out.Grad != nil {
			n.backward(n.out.Grad)
		}
		if release {
			tp.release(n.out)
		}
		if tp.async != nil {
			for _, b := range tp.async.reap() {
				tp.bufs().put(b)
			}
		}
	}
}

// PoisonReleased makes the tape fill every buffer it takes back (in
// BackwardAndReset, Reset and an op's scratch space) with NaN, so that an
// op that reads a value after its release shows it in its results. For
// tests.
var PoisonReleased bool

// release returns t's gradient and, unless t is a view, its values to the
// pool; t stays in live with nil buffers, which Reset skips.
func (tp *Tape) release(t *Tensor) {
	if t.owner != tp {
		return
	}
	if t.gradOwned && t.Grad != nil {
		tp.put(t.Grad)
		t.Grad, t.gradOwned = nil, false
	}
	if !t.isView && t.Data != nil {
		tp.put(t.Data)
		t.Data = nil
	}
}

// put returns a buffer to the pool, or, while a weight-gradient task
// reads it, to the list the pool takes back from when the task is done.
func (tp *Tape) put(b []float32) {
	tp = tp.target()
	if tp.async != nil && tp.async.pinned(b) {
		tp.async.held = append(tp.async.held, b)
		return
	}
	tp.bufs().put(b)
}

// Reset forgets the recorded operations and returns the buffers of every
// tensor produced on the tape to its pool. Those tensors must not be used
// afterwards; parameters and their gradients are untouched.
func (tp *Tape) Reset() {
	if tp == nil {
		return
	}
	for _, t := range tp.live {
		if t.Data != nil && !t.isView {
			tp.put(t.Data)
		}
		if t.gradOwned && t.Grad != nil {
			tp.put(t.Grad)
		}
		t.Data, t.Grad, t.owner = nil, nil, nil
	}
	clear(tp.live)
	tp.live = tp.live[:0]
	clear(tp.nodes)
	tp.nodes = tp.nodes[:0]
}

// Detach returns a tensor sharing t's data that does not require gradients.
func (tp *Tape) Detach(t *Tensor) *Tensor { return tp.view(t.Data, t.Shape) }

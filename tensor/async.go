package tensor

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/xmr-project/xmr/blas"
)

// Weight gradients off the critical path.
//
// In a backward pass the gradient of a layer's input (dX = dY W) feeds the
// layers before it, but the gradient of its weight (dW = dY^T X) feeds
// nothing until the optimiser: it can run at any time before the pass
// ends. BackwardAndReset, when OpenBLAS runs one thread per call on two or
// more cores, queues each large weight-gradient product of Linear as a
// task for a worker goroutine and goes on down the tape: the two products
// of a layer, equal in work, run side by side, one on each core, where a
// pass that splits every product in two waits for the slower half each
// time (a sixth of a paper-size step on a cloud host whose two virtual
// CPUs run at different speeds from moment to moment). While a task is
// queued or running, the main goroutine's kernels keep to the other cores
// (cores); when the worker is idle they split as before.
//
// Buffers a queued task reads (the output gradient, the layer's input) are
// pinned: the tape hands them back to its pool only after the task has
// run. Tasks that accumulate into the same gradient run in the order they
// were queued, and a leaf's gradient buffer is waited for (grad) before
// anything else writes it. Every large product, the worker's and the
// main goroutine's while the worker is busy, is cut into the blocks that
// blas.Sgemm would compute side by side, computed in turn
// (blas.SgemmInTurn): some kernels (OpenBLAS's Haswell ones) round
// differently when a product is cut differently. So every sum is that of
// the serial pass, bit for bit, whenever the tasks end.

// asyncMinWork is the least m*n*k of a product worth a task of its own
// (smaller ones run at once); a variable for tests.
var asyncMinWork = 1 << 24

// asyncMaxPending is how many weight-gradient tasks may be queued or
// running before the main goroutine computes new ones itself: a bound on
// the pinned memory.
const asyncMaxPending = 4

// busyWorkers counts the weight-gradient tasks queued and not yet done:
// while there are any the worker has a core, which the kernels of this
// package leave to it (see cores). Queueing counts the task at once, so
// that a kernel started right after it does not spread over the core the
// worker is about to take.
var busyWorkers atomic.Int32

// cores returns how many goroutines a kernel may use now: GOMAXPROCS, less
// one while a weight-gradient task is queued or running.
func cores() int {
	p := runtime.GOMAXPROCS(0)
	if busyWorkers.Load() > 0 {
		p--
	}
	return max(p, 1)
}

// asyncEnabled reports whether a backward pass should defer weight
// gradients: one-thread OpenBLAS calls on two or more cores. A variable
// for tests.
var asyncEnabled = oneThreadBLAS

// asyncTasks counts the weight-gradient tasks run, for tests.
var asyncTasks atomic.Int64

// Task states.
const (
	taskQueued = iota
	taskRunning
	taskDone
)

// asyncTask is one product to compute.
type asyncTask struct {
	run    func()
	target *Tensor       // the leaf whose gradient it accumulates into
	pins   [][]float32   // buffers it reads
	state  int           // under the runner's mu
	done   chan struct{} // closed when it has run
	failed any           // what run panicked with, if it did
}

// asyncRunner is the worker of one backward pass and its queues.
type asyncRunner struct {
	mu      sync.Mutex
	cond    *sync.Cond   // a task was queued or finished, or the pass ended
	queue   []*asyncTask // weight gradients, in order
	running []*asyncTask // weight gradients being computed
	closed  bool
	exited  chan struct{}

	// Touched by the main goroutine only.
	pending []*asyncTask // weight gradients queued, not yet reaped
	held    [][]float32  // released buffers still pinned by a task
}

// startAsync starts the worker.
func startAsync() *asyncRunner {
	r := &asyncRunner{exited: make(chan struct{})}
	r.cond = sync.NewCond(&r.mu)
	go r.work()
	return r
}

// work is the worker's loop.
func (r *asyncRunner) work() {
	defer close(r.exited)
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if t := r.nextLocked(); t != nil {
			r.runLocked(t)
			continue
		}
		if r.closed {
			return
		}
		r.cond.Wait()
	}
}

// nextLocked takes the first queued task that no earlier task, queued or
// running, shares a gradient with (so that sums into one gradient keep
// their order), or returns nil.
func (r *asyncRunner) nextLocked() *asyncTask {
	for i, t := range r.queue {
		blocked := false
		for _, u := range r.running {
			blocked = blocked || u.target == t.target
		}
		for _, u := range r.queue[:i] {
			blocked = blocked || u.target == t.target
		}
		if !blocked {
			r.queue = slices.Delete(r.queue, i, i+1)
			return t
		}
	}
	return nil
}

// runLocked runs t with mu released, and marks it done.
func (r *asyncRunner) runLocked(t *asyncTask) {
	t.state = taskRunning
	r.running = append(r.running, t)
	r.mu.Unlock()
	func() {
		defer func() { t.failed = recover() }()
		t.run()
	}()
	r.mu.Lock()
	t.state = taskDone
	r.running = slices.DeleteFunc(r.running, func(u *asyncTask) bool { return u == t })
	asyncTasks.Add(1)
	busyWorkers.Add(-1)
	close(t.done)
	r.cond.Broadcast()
}

// submit queues run, which accumulates into target's gradient and reads
// pins. It reports false (and queues nothing) when asyncMaxPending tasks
// are queued or running.
func (r *asyncRunner) submit(run func(), target *Tensor, pins ...[]float32) bool {
	r.reapTasks()
	if len(r.pending) >= asyncMaxPending {
		return false
	}
	t := &asyncTask{run: run, target: target, pins: pins, done: make(chan struct{})}
	r.pending = append(r.pending, t)
	busyWorkers.Add(1)
	r.mu.Lock()
	r.queue = append(r.queue, t)
	r.cond.Broadcast()
	r.mu.Unlock()
	return true
}

// reapTasks forgets the finished tasks; a task's panic goes on here, on
// the main goroutine, where the caller's recover (tensor.Try) sees it.
func (r *asyncRunner) reapTasks() {
	var failed any
	r.pending = slices.DeleteFunc(r.pending, func(t *asyncTask) bool {
		select {
		case <-t.done:
			if t.failed != nil && failed == nil {
				failed = t.failed
			}
			return true
		default:
			return false
		}
	})
	if failed != nil {
		panic(failed)
	}
}

// reap forgets the finished tasks and returns the held buffers that no
// pending task reads any more.
func (r *asyncRunner) reap() [][]float32 {
	r.reapTasks()
	var free [][]float32
	r.held = slices.DeleteFunc(r.held, func(b []float32) bool {
		if r.pinned(b) {
			return false
		}
		free = append(free, b)
		return true
	})
	return free
}

// pinned reports whether a pending task reads memory of b.
func (r *asyncRunner) pinned(b []float32) bool {
	if len(r.pending) == 0 || cap(b) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	hi := lo + uintptr(cap(b))*4
	for _, t := range r.pending {
		for _, p := range t.pins {
			if cap(p) == 0 {
				continue
			}
			plo := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
			if plo < hi && lo < plo+uintptr(len(p))*4 {
				return true
			}
		}
	}
	return false
}

// waitFor waits until no pending task accumulates into t's gradient.
func (r *asyncRunner) waitFor(t *Tensor) {
	for _, p := range r.pending {
		if p.target == t {
			<-p.done
		}
	}
}

// finish runs or waits for every queued task, stops the worker and
// returns the buffers the tasks held.
func (r *asyncRunner) finish() [][]float32 {
	r.mu.Lock()
	for {
		if t := r.nextLocked(); t != nil {
			r.runLocked(t)
			continue
		}
		if len(r.queue) == 0 && len(r.running) == 0 {
			break
		}
		r.cond.Wait()
	}
	r.closed = true
	r.cond.Broadcast()
	r.mu.Unlock()
	<-r.exited
	return r.reap() // panics if a task did
}

// deferGEMM computes gc += op(A) op(B), gc being the gradient of target,
// as a task of the worker when one runs, target is a leaf (not produced on
// the tape, whose backward would read its gradient) and the product is
// large; else at once (gemm). a and b are pinned until it has run.
func (tp *Tape) deferGEMM(target *Tensor, transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, gc []float32, ldc int) {
	tp = tp.target()
	if r := tp.async; r != nil && target.owner != tp && m*n*k >= asyncMinWork {
		run := func() { blas.SgemmInTurn(transA, transB, m, n, k, 1, a, lda, b, ldb, 1, gc, ldc) }
		if r.submit(run, target, a, b) {
			return
		}
	}
	gemm(transA, transB, m, n, k, 1, a, lda, b, ldb, 1, gc, ldc)
}

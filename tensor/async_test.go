package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAsyncWeightGradients runs a backward pass with every weight gradient
// of Linear handed to the worker (however small), released buffers
// poisoned and at most asyncMaxPending tasks waiting, and checks the
// gradients against Backward's bit for bit. The network reuses one weight
// in two layers (two tasks accumulate into one gradient) and another in a
// Linear and a MatMul (the MatMul's backward writes that gradient on the
// main goroutine while a task may be pending on it), and feeds layers with
// views (Reshape), whose buffers belong to other tensors. At width 388 the
// products are large enough for blas.Sgemm to split them, at a row that is
// not a multiple of 12, where OpenBLAS's Haswell kernels round differently
// from one uncut call (scripts/test runs this test with them too).
func TestAsyncWeightGradients(t *testing.T) {
	for _, width := range []int{12, 388} {
		t.Run(fmt.Sprintf("width %d", width), func(t *testing.T) { testAsyncWeightGradients(t, width) })
	}
}

func testAsyncWeightGradients(t *testing.T, width int) {
	rng := rand.New(rand.NewPCG(7, 8))
	x := RandN(rng, 3, 5, width)
	var ws, bs []*Tensor
	for range 6 {
		ws = append(ws, RandN(rng, width, width).SetRequiresGrad(true))
		bs = append(bs, RandN(rng, width).SetRequiresGrad(true))
	}
	params := append(append([]*Tensor(nil), ws...), bs...)
	forward := func(tp *Tape) *Tensor {
		h := tp.LinearReLU(x, ws[0], bs[0])
		h = tp.LinearGELU(h, ws[1], bs[1])
		h = tp.Linear(tp.Reshape(h, 15, width), ws[2], nil) // a view as input
		h = tp.Tanh(tp.Linear(h, ws[1], bs[2]))             // ws[1] again
		h = tp.Linear(h, ws[3], bs[3])
		h = tp.Add(h, tp.MatMul(h, ws[3], false, true)) // ws[3] in a MatMul too
		for range 6 {                                   // more tasks than may wait
			h = tp.Sigmoid(tp.Linear(h, ws[4], bs[4]))
		}
		h = tp.Linear(h, ws[5], bs[5])
		return tp.SumAll(tp.Mul(h, h))
	}
	run := func(async bool) [][]float32 {
		for _, p := range params {
			p.ZeroGrad()
		}
		tp := NewTape()
		loss := forward(tp)
		if async {
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
	before := asyncTasks.Load()
	for round := 0; round < 20; round++ { // tasks finish at different moments each round
		got := run(true)
		for i := range want {
			for j := range want[i] {
				if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
					t.Fatalf("round %d, parameter %d value %d: gradient %g, want %g", round, i, j, got[i][j], want[i][j])
				}
			}
		}
	}
	if n := asyncTasks.Load() - before; n < 20 {
		t.Errorf("%d tasks ran in 20 passes: the weight gradients did not go to the worker", n)
	}
}

// TestAsyncPinned checks the overlap test that keeps a pending task's
// buffers out of the pool.
func TestAsyncPinned(t *testing.T) {
	buf := make([]float32, 100)
	r := &asyncRunner{pending: []*asyncTask{{pins: [][]float32{buf[10:20]}, done: make(chan struct{})}}}
	for _, c := range []struct {
		b    []float32
		want bool
	}{
		{buf, true},
		{buf[:10], true}, // capacity reaches into the pin
		{buf[:10:10], false},
		{buf[19:], true},
		{buf[20:], false},
		{make([]float32, 10), false},
		{nil, false},
	} {
		if got := r.pinned(c.b); got != c.want {
			t.Errorf("slice at %d of cap %d: pinned %v, want %v", cap(buf)-cap(c.b), cap(c.b), got, c.want)
		}
	}
	close(r.pending[0].done)
	r.held = [][]float32{buf}
	if free := r.reap(); len(free) != 1 || len(r.pending) != 0 || len(r.held) != 0 {
		t.Errorf("after the task: freed %d, %d pending, %d held", len(free), len(r.pending), len(r.held))
	}
}

// TestAsyncPanic checks that a task's panic reaches the main goroutine
// (where Try recovers a ShapeError) instead of ending the process, and that
// the worker finishes the other tasks.
func TestAsyncPanic(t *testing.T) {
	r := startAsync()
	ran := false
	target := New(1)
	if !r.submit(func() { panic(shapeErr("Test", "task failed")) }, target) || !r.submit(func() { ran = true }, New(1)) {
		t.Fatal("submit refused a task")
	}
	err := Try(func() { r.finish() })
	if err == nil || !ran {
		t.Fatalf("finish gave %v; the second task ran: %v", err, ran)
	}
	t.Log(err)
	if n := busyWorkers.Load(); n != 0 {
		t.Errorf("%d tasks still counted as busy", n)
	}
}

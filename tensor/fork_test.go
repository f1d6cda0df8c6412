package tensor

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestBoth checks that two branches recorded side by side (Both) give the
// loss and gradients, bit for bit, of the same branches one after the
// other, with dropout in both, released buffers poisoned and the weight
// gradients on the worker; and that a panic in either branch reaches the
// caller, after the fork has ended.
func TestBoth(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const width = 40
	xa, xb := RandN(rng, 6, width), RandN(rng, 5, width)
	wa, wb, wc := RandN(rng, width, width).SetRequiresGrad(true), RandN(rng, width, width).SetRequiresGrad(true), RandN(rng, width, width).SetRequiresGrad(true)
	params := []*Tensor{wa, wb, wc}
	branch := func(x, w *Tensor) func(tp *Tape) *Tensor {
		return func(tp *Tape) *Tensor {
			h := tp.Dropout(tp.LinearGELU(x, w, nil), 0.3)
			return tp.LayerNorm(tp.Linear(h, wc, nil), nil, nil, 1e-5) // wc in both branches
		}
	}
	run := func(side bool) (float32, [][]float32) {
		for _, p := range params {
			p.ZeroGrad()
		}
		saved, enabled, minWork := bothEnabled, asyncEnabled, asyncMinWork
		bothEnabled = func() bool { return side }
		if side { // and every weight gradient on the worker
			asyncEnabled, asyncMinWork = func() bool { return true }, 0
		}
		defer func() { bothEnabled, asyncEnabled, asyncMinWork = saved, enabled, minWork }()
		tp := NewTape()
		tp.Seed(3, 4)
		var a, b *Tensor
		tp.Both(func(tp *Tape) { a = branch(xa, wa)(tp) }, func(tp *Tape) { b = branch(xb, wb)(tp) })
		loss := tp.Add(tp.SumAll(tp.Mul(a, a)), tp.SumAll(b))
		l := loss.Data[0]
		PoisonReleased = true
		defer func() { PoisonReleased = false }()
		tp.BackwardAndReset(loss)
		var grads [][]float32
		for _, p := range params {
			grads = append(grads, append([]float32(nil), p.Grad...))
		}
		return l, grads
	}
	wantLoss, want := run(false)
	for round := 0; round < 10; round++ {
		gotLoss, got := run(true)
		if math.Float32bits(gotLoss) != math.Float32bits(wantLoss) {
			t.Fatalf("round %d: loss %g side by side, %g in turn", round, gotLoss, wantLoss)
		}
		for i := range want {
			for j := range want[i] {
				if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
					t.Fatalf("round %d, weight %d value %d: gradient %g side by side, %g in turn", round, i, j, got[i][j], want[i][j])
				}
			}
		}
	}
	saved := bothEnabled // the panics side by side, whatever the GEMM
	bothEnabled = func() bool { return true }
	defer func() { bothEnabled = saved }()
	err := Try(func() {
		NewTape().Both(func(*Tape) {}, func(tp *Tape) { tp.MatMul(xa, xb, false, false) })
	})
	if err == nil || !strings.Contains(err.Error(), "MatMul") {
		t.Errorf("a shape error in the forked branch gave %v", err)
	}
	forkDone := false
	err = Try(func() {
		NewTape().Both(func(tp *Tape) { tp.MatMul(xa, xb, false, false) }, func(*Tape) {
			time.Sleep(20 * time.Millisecond)
			forkDone = true
		})
	})
	if err == nil || !forkDone {
		t.Errorf("a shape error in the first branch gave %v; the fork had ended: %v", err, forkDone)
	}
	if n := busyWorkers.Load(); n != 0 {
		t.Errorf("%d cores still reserved after Both", n)
	}
}

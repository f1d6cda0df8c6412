package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestBackwardAndReset checks that BackwardAndReset gives Backward's
// gradients bit for bit, with released buffers poisoned, and that it ends
// with fewer buffers in the pool: the gradients of a deep chain reuse the
// values and gradients of the ops whose backward has run, where Backward
// holds all of them until Reset.
func TestBackwardAndReset(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const depth, width = 8, 16
	x := RandN(rng, 4, width)
	var ws []*Tensor
	for range depth {
		ws = append(ws, RandN(rng, width, width).SetRequiresGrad(true))
	}
	run := func(release bool) (grads [][]float32, pooled int) {
		for _, w := range ws {
			w.ZeroGrad()
		}
		tp := NewTape()
		h := x
		for _, w := range ws {
			h = tp.Tanh(tp.MatMul(h, w, false, false))
		}
		loss := tp.SumAll(tp.Mul(h, h))
		if release {
			PoisonReleased = true
			defer func() { PoisonReleased = false }()
			tp.BackwardAndReset(loss)
		} else {
			tp.Backward(loss)
			tp.Reset()
		}
		for _, w := range ws {
			grads = append(grads, append([]float32(nil), w.Grad...))
		}
		return grads, freeCount(tp.bufs())
	}
	want, kept := run(false)
	got, released := run(true)
	for i := range want {
		for j := range want[i] {
			if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
				t.Fatalf("weight %d value %d: gradient %g, want %g", i, j, got[i][j], want[i][j])
			}
		}
	}
	// Backward: 2 values and 2 gradients per layer, plus the loss's 3
	// tensors and gradients. Released: the gradient of each op can take
	// the buffer of the op after it.
	if released >= kept*3/4 {
		t.Errorf("BackwardAndReset left %d buffers in the pool, Backward %d: want far fewer", released, kept)
	}
	t.Logf("buffers allocated for the step: %d with release, %d without", released, kept)
}

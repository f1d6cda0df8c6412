package tensor

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// Two branches of a forward pass side by side.
//
// A model's image and text encoders share nothing until the loss: Both
// records one on the tape and the other on a forked tape in another
// goroutine, each on one core (their products run as one call each, where
// a product split over two goroutines waits for its slower half and packs
// its shared operand twice); when one branch ends, the other's products
// split over both cores again. Join then appends the fork's record after
// the tape's own, a valid order for the backward pass since neither
// branch reads the other. Dropout in the fork draws from a generator
// seeded from the tape's, so a step's result does not depend on which
// branch ends first.

// bothEnabled reports whether Both runs its branches side by side:
// one-thread OpenBLAS calls on two or more cores. A variable for tests.
var bothEnabled = oneThreadBLAS

// Both runs first on tp and second on a tape forked from it, then joins
// the fork's record to tp's: side by side when the products run one thread
// per call on two or more cores, else one after the other, with the same
// results either way. The two must not read each other's results. A panic
// in second goes on in the caller's goroutine. On a nil tape (no
// gradients) it runs first then second.
func (tp *Tape) Both(first, second func(tp *Tape)) {
	if tp == nil {
		first(tp)
		second(tp)
		return
	}
	fork := tp.fork()
	if !bothEnabled() {
		first(tp)
		second(fork)
		tp.join(fork)
		return
	}
	// Each branch has one core until the first ends (see cores).
	busyWorkers.Add(1)
	var once sync.Once
	release := func() { once.Do(func() { busyWorkers.Add(-1) }) }
	var failed atomic.Value
	var wg sync.WaitGroup
	wg.Go(func() {
		defer release()
		defer func() {
			if r := recover(); r != nil {
				failed.Store(&r)
			}
		}()
		second(fork)
	})
	func() {
		defer wg.Wait() // also when first panics: the fork ends before Both
		defer release()
		first(tp)
	}()
	if r := failed.Load(); r != nil {
		panic(*r.(*any))
	}
	tp.join(fork)
}

// fork returns a tape sharing tp's pool, with a dropout generator seeded
// from tp's.
func (tp *Tape) fork() *Tape {
	return &Tape{Training: tp.Training, Rand: rand.New(rand.NewPCG(tp.Rand.Uint64(), tp.Rand.Uint64())), pool: tp.bufs()}
}

// join appends f's record to tp's: its ops run in tp's backward pass after
// tp's own (before them in the reverse walk), its buffers return to the
// pool on tp's Reset, and its backward closures act on tp.
func (tp *Tape) join(f *Tape) {
	for _, t := range f.live {
		if t.owner == f {
			t.owner = tp
		}
		tp.live = append(tp.live, t)
	}
	tp.nodes = append(tp.nodes, f.nodes...)
	f.nodes, f.live = nil, nil
	f.joined = tp
}

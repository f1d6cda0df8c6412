package index

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
)

// This file holds the parallel loops of searches and builds: items cut
// into blocks of about so many vectors, or ranges of so many, run on
// every core, each goroutine claiming its next task itself; and the
// scratch buffers they grow.

// scoreBlocks scores every item of offsets (as Embeddings.Offsets) through
// forBlocks: each goroutine's function, from newScorer, writes the scores
// of items [lo, hi) to out[0 : hi-lo].
func scoreBlocks(ctx context.Context, offsets []int, maxVectors int, newScorer func() func(lo, hi int, out []float32)) ([]float32, error) {
	out := make([]float32, len(offsets)-1)
	err := forBlocks(ctx, offsets, maxVectors, func() func(lo, hi int) {
		score := newScorer()
		return func(lo, hi int) { score(lo, hi, out[lo:hi]) }
	})
	return out, err
}

// scoreWith is scoreBlocks with a scratch S of its own for each
// goroutine, which score fills in as it scores items [lo, hi) into
// out[0 : hi-lo].
func scoreWith[S any](ctx context.Context, offsets []int, maxVectors int, score func(sc *S, lo, hi int, out []float32)) ([]float32, error) {
	return scoreBlocks(ctx, offsets, maxVectors, func() func(lo, hi int, out []float32) {
		sc := new(S)
		return func(lo, hi int, out []float32) { score(sc, lo, hi, out) }
	})
}

// forBlocks cuts the items of offsets (as Embeddings.Offsets) into blocks
// of about maxVectors vectors (at least one item each) and runs them on
// every core: newWorker makes each goroutine's function, which scores
// items [lo, hi).
func forBlocks(ctx context.Context, offsets []int, maxVectors int, newWorker func() func(lo, hi int)) error {
	n := len(offsets) - 1
	next := 0
	return runClaimed(ctx, n, func() (lo, hi int) {
		lo, hi = next, next
		if lo < n {
			hi = lo + 1
			for hi < n && offsets[hi+1]-offsets[lo] <= maxVectors {
				hi++
			}
		}
		next = hi
		return lo, hi
	}, newWorker)
}

// forRanges runs [0, n) on every core in ranges of step: newWorker makes
// each goroutine's function, which handles [lo, hi).
func forRanges(ctx context.Context, n, step int, newWorker func() func(lo, hi int)) error {
	next := 0
	return runClaimed(ctx, (n+step-1)/step, func() (lo, hi int) {
		lo = min(next, n)
		next = min(lo+step, n)
		return lo, next
	}, newWorker)
}

// parallel runs f(0), ..., f(n-1) on every core.
func parallel(n int, f func(i int)) {
	forRanges(context.Background(), n, 1, func() func(lo, hi int) {
		return func(lo, _ int) { f(lo) }
	})
}

// runClaimed runs up to tasks tasks on every core: each goroutine (from
// newWorker) claims its next range itself by calling claim, under a mutex
// held for a few instructions, until claim returns an empty range or ctx
// is done. (A hand-over through a channel would park and wake goroutines,
// which cost more than a small block's work.)
func runClaimed(ctx context.Context, tasks int, claim func() (lo, hi int), newWorker func() func(lo, hi int)) error {
	var mu sync.Mutex
	done := ctx.Done()
	var (
		wg       sync.WaitGroup
		canceled atomic.Bool
	)
	for range min(runtime.GOMAXPROCS(0), max(tasks, 1)) {
		wg.Add(1)
		work := newWorker()
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					canceled.Store(true)
					return
				default:
				}
				mu.Lock()
				lo, hi := claim()
				mu.Unlock()
				if lo == hi {
					return
				}
				work(lo, hi)
			}
		}()
	}
	wg.Wait()
	if canceled.Load() {
		return ctx.Err()
	}
	return nil
}

// grow returns buf with length n, reallocated when its capacity is short.
func grow[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

// eachSegment runs f(i, segs[i]) for every segment, at most GOMAXPROCS at
// once, starting no more once ctx is cancelled; it returns ctx's error.
func eachSegment(ctx context.Context, segs []*segment, f func(i int, seg *segment)) error {
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for si, seg := range segs {
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(si, seg)
		}()
	}
	wg.Wait()
	return ctx.Err()
}

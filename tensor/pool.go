package tensor

import (
	"math"
	"slices"
	"sync"
)

// bufPool keeps the float32 buffers of a tape between steps. A request
// takes a free buffer of exactly its length when there is one, else the
// smallest free one at most a quarter longer (cut to the length asked),
// else a new one of exactly that length. Exact matches serve a training
// loop whose shapes never change without a byte of waste; the quarter lets
// batches whose captions differ in length (and so every text tensor in
// size) reuse each other's buffers instead of each length keeping its own.
type bufPool struct {
	mu    sync.Mutex          // a forked tape shares its parent's pool
	free  map[int][][]float32 // by capacity
	sizes []int               // the keys of free, ascending
}

// get returns a buffer of n floats with unspecified contents.
func (p *bufPool) get(n int) []float32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.free[n]; len(l) > 0 {
		return p.take(n)[:n]
	}
	i, _ := slices.BinarySearch(p.sizes, n)
	for ; i < len(p.sizes) && p.sizes[i] <= n+n/4; i++ {
		if c := p.sizes[i]; len(p.free[c]) > 0 {
			return p.take(c)[:n]
		}
	}
	return make([]float32, n)
}

// take pops a free buffer of capacity c.
func (p *bufPool) take(c int) []float32 {
	l := p.free[c]
	b := l[len(l)-1]
	l[len(l)-1] = nil
	p.free[c] = l[:len(l)-1]
	return b
}

// put returns b to the pool, filled with NaN when PoisonReleased is set.
func (p *bufPool) put(b []float32) {
	b = b[:cap(b)]
	if PoisonReleased {
		nan := float32(math.NaN())
		for i := range b {
			b[i] = nan
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c := len(b)
	if p.free == nil {
		p.free = map[int][][]float32{}
	}
	if _, ok := p.free[c]; !ok {
		i, _ := slices.BinarySearch(p.sizes, c)
		p.sizes = slices.Insert(p.sizes, i, c)
	}
	p.free[c] = append(p.free[c], b)
}

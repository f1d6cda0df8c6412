package tensor

import (
	"math"
	"testing"
)

// TestBufPool checks which free buffer a request gets: one of its exact
// length first, else the smallest at most a quarter longer, else a new
// one; and that a buffer handed back is whole again (its capacity).
func TestBufPool(t *testing.T) {
	var p bufPool
	a := p.get(100)
	if len(a) != 100 || cap(a) != 100 {
		t.Fatalf("new buffer: len %d cap %d, want 100 100", len(a), cap(a))
	}
	p.put(a[:10]) // the pool keeps the whole buffer
	b := p.get(100)
	if &b[0] != &a[0] || len(b) != 100 {
		t.Fatal("a buffer of the exact length was not reused")
	}
	big, small := make([]float32, 125), make([]float32, 110)
	p.put(big)
	p.put(small)
	c := p.get(100) // 110 and 125 both fit within a quarter: the smaller
	if &c[0] != &small[0] || len(c) != 100 || cap(c) != 110 {
		t.Fatalf("got cap %d, want the 110 buffer cut to 100", cap(c))
	}
	if d := p.get(99); &d[0] == &big[0] {
		t.Error("a buffer more than a quarter longer (125 for 99) was reused")
	}
	if e := p.get(120); &e[0] != &big[0] {
		t.Error("the 125 buffer was not reused for 120")
	}
	if n := freeCount(&p); n != 0 {
		t.Errorf("%d buffers left, want 0", n)
	}
	for i := 1; i < len(p.sizes); i++ {
		if p.sizes[i-1] >= p.sizes[i] {
			t.Fatalf("sizes not ascending: %v", p.sizes)
		}
	}
	PoisonReleased = true
	defer func() { PoisonReleased = false }()
	p.put(b[:1])
	if f := p.get(100); !math.IsNaN(float64(f[99])) {
		t.Error("a poisoned buffer is not NaN past the length it was handed back with")
	}
}

// freeCount returns the number of free buffers in p.
func freeCount(p *bufPool) int {
	n := 0
	for _, l := range p.free {
		n += len(l)
	}
	return n
}

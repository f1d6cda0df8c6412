package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// bit returns 1 for a kept element and 0 for a dropped one.
func (m dropMask) bit(i int) uint64 { return (m[i>>6] >> (i & 63)) & 1 }

// dropMaskRef is newDropMask's definition written plainly: one comparison
// of each 16-bit lane of each draw with the threshold.
func dropMaskRef(seed uint64, n int, p float32) dropMask {
	m := make(dropMask, (n+63)/64)
	thr := uint64(math.Round(float64(p) * 65536))
	for w := range m {
		for q := 0; q < 16; q++ {
			r := splitmix64(seed + uint64(w*16+q)*0x9e3779b97f4a7c15)
			for j := 0; j < 4; j++ {
				if (r>>(16*j))&0xffff >= thr {
					m[w] |= 1 << (4*q + j)
				}
			}
		}
	}
	return m
}

// TestDropMask checks the four-lanes-at-once mask against the plain
// definition, at the edges of p (every element kept, none kept) and of
// the threshold's resolution, and that the kept fraction is 1 - p.
func TestDropMask(t *testing.T) {
	for _, p := range []float32{1.0 / 65536, 0.1, 0.25, 0.5, 0.9, 65535.0 / 65536, 0.9999999} {
		for _, n := range []int{1, 63, 64, 65, 5000, 1 << 16} {
			tp := NewTape()
			tp.Rand = rand.New(rand.NewPCG(uint64(n), 7))
			seed := rand.New(rand.NewPCG(uint64(n), 7)).Uint64()
			got := tp.newDropMask(n, p)
			want := dropMaskRef(seed, n, p)
			for w := range want {
				if got[w] != want[w] {
					t.Fatalf("p %v n %d: word %d is %#x, want %#x", p, n, w, got[w], want[w])
				}
			}
			if n == 1<<16 {
				kept := 0
				for i := 0; i < n; i++ {
					kept += int(got.bit(i))
				}
				if f, want := float64(kept)/float64(n), 1-float64(p); math.Abs(f-want) > 0.01 {
					t.Errorf("p %v: kept %.4f of the elements, want %.4f", p, f, want)
				}
			}
		}
	}
}

// TestDropMaskKernels checks the word-at-a-time kernels against the
// element-by-element definition, on ranges that start and end inside a
// word of the mask.
func TestDropMaskKernels(t *testing.T) {
	const n = 1000
	tp := NewTape()
	m := tp.newDropMask(n, 0.3)
	rng := rand.New(rand.NewPCG(3, 3))
	x, y, d0 := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i], d0[i] = rng.Float32(), rng.Float32(), rng.Float32()
	}
	sc := [2]float32{0, 1 / 0.7}
	for _, r := range [][2]int{{0, n}, {0, 64}, {5, 6}, {63, 65}, {70, 999}, {128, 192}} {
		lo, hi := r[0], r[1]
		mul := make([]float32, hi-lo)
		mulAdd := append([]float32(nil), d0[lo:hi]...)
		addMul := make([]float32, hi-lo)
		m.mulTo(mul, x[lo:hi], lo, sc)
		m.mulAddTo(mulAdd, x[lo:hi], lo, sc)
		m.addMulTo(addMul, y[lo:hi], x[lo:hi], lo, sc)
		for j := range mul {
			s := sc[m.bit(lo+j)]
			if mul[j] != x[lo+j]*s || mulAdd[j] != d0[lo+j]+x[lo+j]*s || addMul[j] != y[lo+j]+x[lo+j]*s {
				t.Fatalf("[%d, %d) element %d (kept %d): mulTo %v, mulAddTo %v, addMulTo %v", lo, hi, lo+j, m.bit(lo+j), mul[j], mulAdd[j], addMul[j])
			}
		}
	}
}

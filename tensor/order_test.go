package tensor

import (
	"math"
	"testing"
)

// TestOrderViolation holds the kernel (blocks of four rows and the rest)
// to the definition, and the op's output to the kernel.
func TestOrderViolation(t *testing.T) {
	const m, n, k = 7, 5, 9
	a, b := rnd(1, m, k), rnd(2, n, k)
	got := (*Tape)(nil).OrderViolation(a, b)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var want float64
			for d := 0; d < k; d++ {
				v := math.Max(0, float64(a.Data[i*k+d])-float64(b.Data[j*k+d]))
				want += v * v
			}
			if g := float64(got.Data[i*n+j]); math.Abs(g-want) > 1e-5*math.Max(1, want) {
				t.Fatalf("violation of a[%d] against b[%d]: %v, want %v", i, j, g, want)
			}
		}
	}
	// Identical rows, and rows below each other, do not violate.
	x := FromData([]float32{0.5, 0.2, 0.1, 0.1}, 2, 2)
	if v := (*Tape)(nil).OrderViolation(x, x).Data; v[0] != 0 || v[3] != 0 || v[2] != 0 || math.Abs(float64(v[1])-0.17) > 1e-6 {
		t.Fatalf("violations %v, want 0, 0.17 (0.4^2 + 0.1^2), 0, 0", v)
	}
}

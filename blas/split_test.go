package blas

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestOpenBLASSplitMatchesNaive checks the products that are split across
// goroutines (by rows and by columns, every transpose) against a naive
// loop, on sizes that are not multiples of the block sizes.
func TestOpenBLASSplitMatchesNaive(t *testing.T) {
	ob, err := LoadOpenBLAS()
	if err != nil {
		t.Skipf("OpenBLAS not installed (the CI script installs it): %v", err)
	}
	defer ob.SetSplit(ob.SetSplit(3))
	rng := rand.New(rand.NewPCG(1, 1))
	shapes := [][3]int{{301, 257, 129}, {5, 1031, 600}, {64, 700, 100}}
	for _, sh := range shapes {
		m, n, k := sh[0], sh[1], sh[2]
		if 2*m*n*k < minSplitFlops {
			t.Fatalf("shape %v too small to be split", sh)
		}
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			ta, tb := tr[0], tr[1]
			a := make([]float32, m*k)
			b := make([]float32, k*n)
			c := make([]float32, m*n)
			for i := range a {
				a[i] = float32(rng.NormFloat64())
			}
			for i := range b {
				b[i] = float32(rng.NormFloat64())
			}
			for i := range c {
				c[i] = float32(rng.NormFloat64())
			}
			want := append([]float32(nil), c...)
			lda, ldb := k, n
			if ta {
				lda = m
			}
			if tb {
				ldb = k
			}
			at := func(i, p int) float32 {
				if ta {
					return a[p*lda+i]
				}
				return a[i*lda+p]
			}
			bt := func(p, j int) float32 {
				if tb {
					return b[j*ldb+p]
				}
				return b[p*ldb+j]
			}
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					var s float64
					for p := 0; p < k; p++ {
						s += float64(at(i, p)) * float64(bt(p, j))
					}
					want[i*n+j] = float32(1.5*s + 0.5*float64(want[i*n+j]))
				}
			}
			ob.Sgemm(ta, tb, m, n, k, 1.5, a, lda, b, ldb, 0.5, c, n)
			for i := range c {
				if math.Abs(float64(c[i]-want[i])) > 1e-3*(1+math.Abs(float64(want[i]))) {
					t.Fatalf("shape %v trans %v: C[%d] = %v, want %v", sh, tr, i, c[i], want[i])
				}
			}
		}
	}
}

// TestSgemmInTurnSameBits checks that SgemmInTurn computes Sgemm's blocks:
// the same bits, for row and column splits. With the kernels of some CPUs
// (OpenBLAS's Haswell ones, run here by scripts/test) a product cut
// elsewhere, or not cut, rounds differently, and the training step's
// results would depend on when another goroutine's work ends.
func TestSgemmInTurnSameBits(t *testing.T) {
	ob, err := LoadOpenBLAS()
	if err != nil {
		t.Skipf("OpenBLAS not installed (the CI script installs it): %v", err)
	}
	defer Use(Use(ob))
	defer ob.SetSplit(ob.SetSplit(2))
	rng := rand.New(rand.NewPCG(2, 2))
	cases := []struct {
		name    string
		ta, tb  bool
		m, n, k int
	}{
		{"rows", false, false, 280, 192, 300},
		{"rows, B transposed", false, true, 301, 130, 257},
		{"columns", false, false, 40, 1030, 300},
		{"columns, A transposed", true, false, 40, 700, 301},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := make([]float32, c.m*c.k)
			b := make([]float32, c.k*c.n)
			for i := range a {
				a[i] = float32(rng.NormFloat64())
			}
			for i := range b {
				b[i] = float32(rng.NormFloat64())
			}
			lda, ldb := c.k, c.n
			if c.ta {
				lda = c.m
			}
			if c.tb {
				ldb = c.k
			}
			whole := make([]float32, c.m*c.n)
			split := make([]float32, c.m*c.n)
			inTurn := make([]float32, c.m*c.n)
			SgemmSerial(c.ta, c.tb, c.m, c.n, c.k, 1, a, lda, b, ldb, 0, whole, c.n)
			Sgemm(c.ta, c.tb, c.m, c.n, c.k, 1, a, lda, b, ldb, 0, split, c.n)
			SgemmInTurn(c.ta, c.tb, c.m, c.n, c.k, 1, a, lda, b, ldb, 0, inTurn, c.n)
			cut := 0
			for i := range split {
				if math.Float32bits(inTurn[i]) != math.Float32bits(split[i]) {
					t.Fatalf("C[%d]: %v in turn, %v side by side", i, inTurn[i], split[i])
				}
				if split[i] != whole[i] {
					cut++
				}
			}
			t.Logf("%d of %d elements differ from one uncut call with these kernels", cut, len(split))
		})
	}
}

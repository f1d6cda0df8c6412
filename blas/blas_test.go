package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// naive computes C = alpha*op(A)*op(B) + beta*C in float64 with the plain
// triple loop.
func naive(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			v := float64(alpha) * s
			if beta != 0 {
				v += float64(beta) * float64(c[i*ldc+j])
			}
			out[i*n+j] = v
		}
	}
	return out
}

func randMat(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.Float64()*2 - 1)
	}
	return x
}

// impls returns the implementations to test: the pure-Go one always,
// OpenBLAS when it loads.
func impls(t *testing.T) []Impl {
	out := []Impl{Go{}}
	if ob, err := LoadOpenBLAS(); err == nil {
		out = append(out, ob)
	} else {
		t.Logf("OpenBLAS not tested: %v", err)
	}
	return out
}

// TestSgemmAgainstNaive covers transposes, odd and skinny sizes, padded
// strides, alpha and beta (including beta = 0 over NaN garbage).
func TestSgemmAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	sizes := [][3]int{{1, 1, 1}, {1, 7, 1}, {3, 5, 2}, {7, 1, 9}, {17, 33, 65}, {64, 64, 64}, {12, 130, 31}, {129, 3, 70}, {2, 300, 5}}
	scalars := [][2]float32{{1, 0}, {0.5, 1}, {-2, 0.25}}
	for _, impl := range impls(t) {
		for _, s := range sizes {
			m, n, k := s[0], s[1], s[2]
			for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
				for _, ab := range scalars {
					ta, tb := tr[0], tr[1]
					ar, ac := m, k
					if ta {
						ar, ac = k, m
					}
					br, bc := k, n
					if tb {
						br, bc = n, k
					}
					lda, ldb, ldc := ac+1, bc+2, n+3 // padded strides
					a, b := randMat(rng, (ar-1)*lda+ac), randMat(rng, (br-1)*ldb+bc)
					c := randMat(rng, (m-1)*ldc+n)
					if ab[1] == 0 {
						for i := range c {
							c[i] = float32(math.NaN())
						}
					}
					want := naive(ta, tb, m, n, k, ab[0], a, lda, b, ldb, ab[1], c, ldc)
					before := append([]float32(nil), c...)
					impl.Sgemm(ta, tb, m, n, k, ab[0], a, lda, b, ldb, ab[1], c, ldc)
					name := fmt.Sprintf("%s m=%d n=%d k=%d tA=%v tB=%v alpha=%v beta=%v", impl.Name(), m, n, k, ta, tb, ab[0], ab[1])
					for i := range m {
						for j := range ldc {
							if i*ldc+j >= len(c) {
								break
							}
							got := c[i*ldc+j]
							if j >= n { // padding must be untouched
								if math.Float32bits(got) != math.Float32bits(before[i*ldc+j]) {
									t.Fatalf("%s: padding C[%d,%d] changed", name, i, j)
								}
								continue
							}
							w := want[i*n+j]
							if math.Abs(float64(got)-w) > 1e-4*(1+math.Abs(w))*math.Sqrt(float64(k)) {
								t.Fatalf("%s: C[%d,%d] = %v, want %v", name, i, j, got, w)
							}
						}
					}
				}
			}
		}
	}
}

func TestSgemmDegenerate(t *testing.T) {
	for _, impl := range impls(t) {
		// k = 0: C = beta*C.
		c := []float32{1, 2, 3, 4}
		impl.Sgemm(false, false, 2, 2, 0, 1, nil, 1, nil, 2, 0.5, c, 2)
		if fmt.Sprint(c) != "[0.5 1 1.5 2]" {
			t.Errorf("%s k=0 beta=0.5: %v", impl.Name(), c)
		}
		c = []float32{float32(math.NaN()), 2, 3, 4}
		impl.Sgemm(false, false, 2, 2, 0, 1, nil, 1, nil, 2, 0, c, 2)
		if fmt.Sprint(c) != "[0 0 0 0]" {
			t.Errorf("%s k=0 beta=0: %v", impl.Name(), c)
		}
		// m = 0 or n = 0: nothing happens.
		impl.Sgemm(false, false, 0, 2, 3, 1, nil, 3, make([]float32, 6), 2, 0, nil, 2)
	}
}

// TestSgemmUse runs the package-level Sgemm on the implementation selected
// with Use and checks that Use returns the previous one.
func TestSgemmUse(t *testing.T) {
	for _, impl := range impls(t) {
		prev := Use(impl)
		if Current() != impl {
			t.Fatalf("Current() = %v after Use(%v)", Current(), impl)
		}
		a := []float32{1, 2, 3, 4, 5, 6} // 2x3
		b := []float32{1, 0, 0, 1, 1, 1} // 3x2
		c := make([]float32, 4)
		Sgemm(false, false, 2, 2, 3, 1, a, 3, b, 2, 0, c, 2)
		if fmt.Sprint(c) != "[4 5 10 11]" {
			t.Errorf("%s: %v", impl.Name(), c)
		}
		if Use(prev) != impl {
			t.Fatal("Use did not return the previous implementation")
		}
	}
	if d := Describe(); d == "" {
		t.Error("Describe is empty")
	}
}

func TestSgemmChecksLengths(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "matrix B: 3x2 with stride 2 needs 6 elements, have 5") {
			t.Fatalf("panic %v", r)
		}
	}()
	Sgemm(false, false, 2, 2, 3, 1, make([]float32, 6), 3, make([]float32, 5), 2, 0, make([]float32, 4), 2)
}

// BenchmarkSgemm measures the implementation in use on a square and a
// skinny product; "xmr bench gemm" is the full comparison.
func BenchmarkSgemm(b *testing.B) {
	for _, s := range [][3]int{{256, 256, 256}, {12, 1024, 1024}} {
		m, k, n := s[0], s[1], s[2]
		b.Run(fmt.Sprintf("%dx%dx%d", m, k, n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			a, bb, c := randMat(rng, m*k), randMat(rng, k*n), make([]float32, m*n)
			for range b.N {
				Sgemm(false, false, m, n, k, 1, a, k, bb, n, 0, c, n)
			}
			b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// TestFallback checks what Fallback says on the implementations in use:
// the pure-Go GEMM with its reason (XMR_BLAS, or OpenBLAS not found, as
// this process started; or chosen by Use), and OpenBLAS as no fallback.
func TestFallback(t *testing.T) {
	start := Current()
	defer Use(start)
	if _, isGo := start.(Go); isGo {
		why, ok := Fallback()
		want := "libopenblas.so.0"
		if v := os.Getenv("XMR_BLAS"); v == "go" || v == "pure" || v == "gonum" {
			want = "XMR_BLAS=" + v
		}
		if !ok || !strings.Contains(why, want) {
			t.Errorf("the pure-Go GEMM at start: Fallback() = %q, %v; want true and a reason naming %s", why, ok, want)
		}
	}
	Use(Go{})
	if why, ok := Fallback(); !ok || why == "" {
		t.Errorf("after Use(Go{}): Fallback() = %q, %v; want true and a reason", why, ok)
	}
	if _, isOB := start.(*OpenBLAS); !isOB {
		return
	}
	Use(start)
	if why, ok := Fallback(); ok {
		t.Errorf("with OpenBLAS: Fallback() = %q, true; want false", why)
	}
}

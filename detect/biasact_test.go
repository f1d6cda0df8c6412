package detect

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestBiasAct checks the activation kernel against the definition, one
// value at a time: every mode, with and without a bias, widths with and
// without a tail of fewer than 8 columns, in place and not. Every mode but
// the sigmoid must be exact; the sigmoid within 1e-6 relative of float64.
func TestBiasAct(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	acts := []act{{}, {kind: "relu"}, {kind: "relu6"}, {kind: "hswish", add: 3, mul: 1.0 / 6}, {kind: "sigmoid"}}
	for _, a := range acts {
		for _, C := range []int{1, 4, 7, 8, 18, 64, 80, 83} {
			for _, withBias := range []bool{false, true} {
				for _, inPlace := range []bool{false, true} {
					rows := 1 + rng.IntN(9)
					src := make([]float32, rows*C)
					for i := range src {
						src[i] = float32(rng.NormFloat64() * 6)
					}
					src[0] = 200 // the sigmoid's clamp
					if len(src) > 1 {
						src[1] = -200
					}
					var bias []float32
					if withBias {
						bias = make([]float32, C)
						for j := range bias {
							bias[j] = float32(rng.NormFloat64())
						}
					}
					want := make([]float32, len(src))
					for i, v := range src {
						if bias != nil {
							v += bias[i%C]
						}
						want[i] = a.one(v)
					}
					dst := make([]float32, len(src))
					if inPlace {
						copy(dst, src)
						biasAct(dst, dst, bias, C, a)
					} else {
						biasAct(dst, src, bias, C, a)
					}
					for i := range want {
						g, w := dst[i], want[i]
						bad := g != w
						if a.kind == "sigmoid" {
							bad = math.Abs(float64(g-w)) > 1e-6*math.Max(math.Abs(float64(w)), 1e-30) && math.Abs(float64(g-w)) > 1e-37
						}
						if bad {
							t.Fatalf("%q C=%d bias=%v inPlace=%v: value %d (row %d col %d) = %v, want %v", a.kind, C, withBias, inPlace, i, i/C, i%C, g, w)
						}
					}
				}
			}
		}
	}
}

// TestScaleCols checks the per-channel product against the definition,
// exactly, over widths with and without a tail.
func TestScaleCols(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, C := range []int{1, 5, 8, 18, 64, 83} {
		rows := 3
		src := make([]float32, rows*C)
		y := make([]float32, C)
		for i := range src {
			src[i] = float32(rng.NormFloat64())
		}
		for j := range y {
			y[j] = float32(rng.NormFloat64())
		}
		dst := make([]float32, len(src))
		scaleCols(dst, src, y, C)
		for i, v := range src {
			if want := v * y[i%C]; dst[i] != want {
				t.Fatalf("C=%d: [%d] = %v, want %v", C, i, dst[i], want)
			}
		}
	}
}

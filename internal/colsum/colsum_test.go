package colsum

import (
	"math"
	"math/rand/v2"
	"testing"
)

// scalar is the loop the kernel replaces.
func scalar(acc []float64, x []float32, rows, C int) {
	for r := range rows {
		for j, v := range x[r*C : r*C+C] {
			acc[j] += float64(v)
		}
	}
}

// TestAddEqualsTheLoop: the sums equal the scalar loop's bit for bit, for
// widths that fill the kernel's blocks of 16 and 4 and leave columns over,
// and row counts around a tile.
func TestAddEqualsTheLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, C := range []int{1, 3, 4, 7, 16, 17, 20, 36, 128, 130} {
		for _, rows := range []int{1, 2, 63, 64, 65, 300} {
			x := make([]float32, rows*C)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(9)-4)))
			}
			got, want := make([]float64, C), make([]float64, C)
			for j := range got {
				got[j] = float64(j) / 3 // sums are added to what acc holds
				want[j] = got[j]
			}
			Add(got, x, rows, C)
			scalar(want, x, rows, C)
			for j := range want {
				if math.Float64bits(got[j]) != math.Float64bits(want[j]) {
					t.Fatalf("C %d, %d rows: column %d sums to %v, the loop %v", C, rows, j, got[j], want[j])
				}
			}
		}
	}
}

func TestMean(t *testing.T) {
	x := []float32{1, 10, 3, 20, 5, 30} // 3 rows of 2
	out := make([]float32, 2)
	Mean(out, x, 3, 2)
	if out[0] != 3 || out[1] != 20 {
		t.Fatalf("means %v, want [3 20]", out)
	}
}

// BenchmarkAdd sums a 128 x 128 map of 128 channels (the detector head's
// Mean): "kernel" through Add, "loop" the scalar loop.
func BenchmarkAdd(b *testing.B) {
	const rows, C = 128 * 128, 128
	x := make([]float32, rows*C)
	for i := range x {
		x[i] = float32(i%97) / 7
	}
	acc := make([]float64, C)
	b.Run("kernel", func(b *testing.B) {
		for b.Loop() {
			Add(acc, x, rows, C)
		}
	})
	b.Run("loop", func(b *testing.B) {
		for b.Loop() {
			scalar(acc, x, rows, C)
		}
	})
}

package index

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/xmr-project/xmr/model"
)

// TestTopSet checks topSet against model.TopK: the same items, ties and
// NaNs included.
func TestTopSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	random := make([]float32, 5000)
	for i := range random {
		random[i] = rng.Float32()
	}
	ties := make([]float32, 300)
	for i := range ties {
		ties[i] = float32(rng.IntN(4))
	}
	nan := []float32{1, float32(math.NaN()), 3, float32(math.Inf(-1)), 2, float32(math.NaN())}
	for _, tc := range []struct {
		name   string
		scores []float32
		ks     []int
	}{
		{"random", random, []int{0, 1, 2, 10, 999, 4999, 5000, 6000}},
		{"ties", ties, []int{1, 7, 75, 150, 299}},
		{"NaN", nan, []int{1, 3, 4, 5, 6}},
		{"empty", nil, []int{0, 3}},
	} {
		for _, k := range tc.ks {
			got := topSet(tc.scores, k)
			slices.Sort(got)
			var want []int
			for _, h := range model.TopK(tc.scores, k) {
				want = append(want, h.Index)
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("%s, k = %d: topSet %v, model.TopK %v", tc.name, k, got, want)
			}
		}
	}
}

func BenchmarkTopSet(b *testing.B) {
	rng := rand.New(rand.NewPCG(8, 9))
	scores := make([]float32, 200000)
	for i := range scores {
		scores[i] = rng.Float32()
	}
	b.Run("topSet", func(b *testing.B) {
		for b.Loop() {
			topSet(scores, 24000)
		}
	})
	b.Run("model.TopK", func(b *testing.B) {
		for b.Loop() {
			model.TopK(scores, 24000)
		}
	})
}

package train

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/tensor"
)

func TestDropWords(t *testing.T) {
	const caption = "a black dog runs through the tall green grass near a wooden fence"
	words := strings.Fields(caption)
	cases := []struct {
		name    string
		p       float64
		minFrac float64 // of the words dropped, over many draws
		maxFrac float64
	}{
		{"none", 0, 0, 0},
		{"tenth", 0.1, 0.07, 0.13},
		{"half", 0.5, 0.45, 0.55},
		{"nearly all", 0.99, 0.9, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			dropped, total := 0, 0
			for range 2000 {
				got := strings.Fields(dropWords(rng, caption, c.p))
				if len(got) == 0 {
					t.Fatalf("p %v: every word dropped", c.p)
				}
				// What stays is a subsequence of the caption, in order.
				k := 0
				for _, w := range got {
					for k < len(words) && words[k] != w {
						k++
					}
					if k == len(words) {
						t.Fatalf("p %v: %q is not a subsequence of the caption", c.p, got)
					}
					k++
				}
				dropped += len(words) - len(got)
				total += len(words)
			}
			if f := float64(dropped) / float64(total); f < c.minFrac || f > c.maxFrac {
				t.Errorf("p %v: dropped %.3f of the words; want %.2f to %.2f", c.p, f, c.minFrac, c.maxFrac)
			}
		})
	}
	if got := dropWords(rand.New(rand.NewPCG(1, 2)), "", 0.5); got != "" {
		t.Errorf("empty caption: got %q", got)
	}
}

func TestDropRegions(t *testing.T) {
	// Three images of 5 slots: 5 real regions; 2 real with padding
	// between them (a mask need not put its real regions first); 1.
	const b, r = 3, 5
	base := []float32{1, 1, 1, 1, 1, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0}
	for _, p := range []float64{0, 0.3, 0.9} {
		rng := rand.New(rand.NewPCG(3, 4))
		dropped, real := 0, 0
		for range 1000 {
			v := tensor.FromData(append([]float32(nil), base...), b, r)
			dropRegions(rng, v, p)
			for i := 0; i < b; i++ {
				kept := 0
				for j := 0; j < r; j++ {
					got, was := v.Data[i*r+j], base[i*r+j]
					if was == 0 && got != 0 {
						t.Fatalf("p %v: padding slot %d of image %d made real", p, j, i)
					}
					if got != 0 {
						kept++
					}
					if was != 0 {
						real++
						if got == 0 {
							dropped++
						}
					}
				}
				if kept == 0 {
					t.Fatalf("p %v: image %d lost every region", p, i)
				}
			}
		}
		// Each image of n real regions loses n*p of them on average, less
		// the one brought back when all n were drawn (probability p^n).
		want := 0.0
		for _, n := range []int{5, 2, 1} {
			want += float64(n)*p - math.Pow(p, float64(n))
		}
		want /= 8
		if f := float64(dropped) / float64(real); math.Abs(f-want) > 0.02 {
			t.Errorf("p %v: dropped %.3f of the real regions; want %.3f", p, f, want)
		}
	}
}

func TestTrainBatchIsAFunctionOfTheIteration(t *testing.T) {
	_, s := smallConfigs(t)
	m := smallModel(t, tinyConfig(t, "teran-mrsw-small.yaml"), s)
	tc := TrainingConfig{Seed: 7, WordDrop: 0.3, RegionDrop: 0.3}
	caps := []int{0, 1, 2, 3}
	a, b := trainBatch(m, s, caps, tc, 5, nil), trainBatch(m, s, caps, tc, 5, nil)
	if !slices.Equal(a.Texts.IDs, b.Texts.IDs) || !slices.Equal(a.Images.Valid.Data, b.Images.Valid.Data) {
		t.Error("the same iteration gave two batches: a resumed run would not repeat the first")
	}
	c := trainBatch(m, s, caps, tc, 6, nil)
	if slices.Equal(a.Texts.IDs, c.Texts.IDs) && slices.Equal(a.Images.Valid.Data, c.Images.Valid.Data) {
		t.Error("iterations 5 and 6 dropped the same words and regions")
	}
	plain := BatchOf(m, s, caps)
	off := trainBatch(m, s, caps, TrainingConfig{Seed: 7}, 5, nil)
	if !slices.Equal(plain.Texts.IDs, off.Texts.IDs) || !slices.Equal(plain.Images.Valid.Data, off.Images.Valid.Data) {
		t.Error("with no drop the batch differs from BatchOf's")
	}
}

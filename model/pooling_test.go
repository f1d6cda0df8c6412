package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/xmr-project/xmr/tensor"
)

func embedded(rng *rand.Rand, n, l, e int, mask []float32) *Embedded {
	v := tensor.RandN(rng, n, l, e)
	var tp *tensor.Tape
	v = tp.L2Normalize(v, 1e-12)
	return &Embedded{Vecs: v, Mask: tensor.FromData(mask, n, l)}
}

// naivePool computes the pooled score of image b and caption c from the
// definitions, with plain loops.
func naivePool(img, txt *Embedded, b, c int, mode string) float64 {
	l1, e := img.Vecs.Shape[1], img.Vecs.Shape[2]
	l2 := txt.Vecs.Shape[1]
	dot := func(r, w int) float64 {
		var s float64
		for k := 0; k < e; k++ {
			s += float64(img.Vecs.Data[(b*l1+r)*e+k]) * float64(txt.Vecs.Data[(c*l2+w)*e+k])
		}
		return s
	}
	rm := func(r int) bool { return img.Mask.Data[b*l1+r] != 0 }
	wm := func(w int) bool { return txt.Mask.Data[c*l2+w] != 0 }
	mrsw, mwsr, words := 0.0, 0.0, 0
	for w := 0; w < l2; w++ {
		if !wm(w) {
			continue
		}
		words++
		best := math.Inf(-1)
		for r := 0; r < l1; r++ {
			if rm(r) {
				best = math.Max(best, dot(r, w))
			}
		}
		mrsw += best
	}
	for r := 0; r < l1; r++ {
		if !rm(r) {
			continue
		}
		best := math.Inf(-1)
		for w := 0; w < l2; w++ {
			if wm(w) {
				best = math.Max(best, dot(r, w))
			}
		}
		mwsr += best
	}
	switch mode {
	case "MwSr":
		return mwsr
	case "Symm":
		return mrsw + mwsr
	case "MrAvgw":
		return mrsw / float64(words)
	}
	return mrsw
}

func TestAlignmentPoolingMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// 2 images of 4 slots (slot 0 and one padded slot masked), 3 captions of 5 tokens.
	img := embedded(rng, 2, 4, 6, []float32{0, 1, 1, 1, 0, 1, 1, 0})
	txt := embedded(rng, 3, 5, 6, []float32{0, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 0, 0, 0})
	for _, mode := range []string{"MrSw", "MwSr", "Symm", "MrAvgw"} {
		t.Run(mode, func(t *testing.T) {
			s := AlignmentSimilarity(nil, img, txt, mode)
			for b := 0; b < 2; b++ {
				for c := 0; c < 3; c++ {
					want := naivePool(img, txt, b, c, mode)
					if got := float64(s.Data[b*3+c]); math.Abs(got-want) > 1e-5 {
						t.Errorf("S[%d,%d] = %v, want %v", b, c, got, want)
					}
				}
			}
		})
	}
}

func TestPaddingCannotWinOrAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	img := embedded(rng, 1, 3, 4, []float32{0, 1, 0})
	txt := embedded(rng, 1, 3, 4, []float32{0, 1, 0})
	before := AlignmentSimilarity(nil, img, txt, "Symm").Data[0]
	// Make the padded region and word identical to the real ones' best
	// match: they would win every max if masks were ignored.
	copy(img.Vecs.Data[8:12], txt.Vecs.Data[4:8])
	copy(txt.Vecs.Data[8:12], img.Vecs.Data[4:8])
	copy(img.Vecs.Data[0:4], txt.Vecs.Data[4:8])
	after := AlignmentSimilarity(nil, img, txt, "Symm").Data[0]
	if before != after {
		t.Fatalf("masked entries changed the score: %v -> %v", before, after)
	}
}

func TestPoolingGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	iv := tensor.RandN(rng, 2, 3, 4)
	tv := tensor.RandN(rng, 2, 4, 4)
	imask := tensor.FromData([]float32{0, 1, 1, 0, 1, 0}, 2, 3)
	tmask := tensor.FromData([]float32{0, 1, 1, 0, 0, 1, 1, 1}, 2, 4)
	for _, mode := range []string{"MrSw", "MwSr", "Symm", "MrAvgw"} {
		t.Run(mode, func(t *testing.T) {
			f := func(tp *tensor.Tape) *tensor.Tensor {
				img := &Embedded{Vecs: tp.L2Normalize(iv, 1e-12), Mask: imask}
				txt := &Embedded{Vecs: tp.L2Normalize(tv, 1e-12), Mask: tmask}
				return AlignmentSimilarity(tp, img, txt, mode)
			}
			if err := tensor.GradCheck(f, []*tensor.Tensor{iv, tv}, tensor.GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestContrastiveLossValues(t *testing.T) {
	s := tensor.FromData([]float32{
		0.9, 0.5, 0.1,
		0.8, 0.6, 0.2,
		0.0, 0.7, 0.3,
	}, 3, 3)
	// Captions vs image i (rows): [m + s(i,j) - s(i,i)]+, j != i, margin 0.2.
	// row 0: 0.5-0.9+0.2=-0.2 -> 0; 0.1-0.9+0.2 -> 0        => max 0, sum 0
	// row 1: 0.8-0.6+0.2=0.4; 0.2-0.6+0.2=-0.2 -> 0         => max 0.4, sum 0.4
	// row 2: 0.0-0.3+0.2=-0.1 -> 0; 0.7-0.3+0.2=0.6         => max 0.6, sum 0.6
	// Images vs caption j (columns): [m + s(i,j) - s(j,j)]+, i != j.
	// col 0: 0.8-0.9+0.2=0.1; 0.0-0.9+0.2 -> 0              => max 0.1, sum 0.1
	// col 1: 0.5-0.6+0.2=0.1; 0.7-0.6+0.2=0.3               => max 0.3, sum 0.4
	// col 2: 0.1-0.3+0.2=0.0; 0.2-0.3+0.2=0.1               => max 0.1, sum 0.1
	cases := []struct {
		maxViol bool
		want    float64
	}{
		{true, 0 + 0.4 + 0.6 + 0.1 + 0.3 + 0.1},
		{false, 0 + 0.4 + 0.6 + 0.1 + 0.4 + 0.1},
	}
	for _, c := range cases {
		got := ContrastiveLoss(nil, s, 0.2, c.maxViol).Item()
		if math.Abs(float64(got)-c.want) > 1e-5 {
			t.Errorf("maxViolation=%v: loss %v, want %v", c.maxViol, got, c.want)
		}
	}
}

func TestLossGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	s := tensor.RandN(rng, 4, 4)
	for _, mv := range []bool{true, false} {
		f := func(tp *tensor.Tape) *tensor.Tensor { return ContrastiveLoss(tp, s, 0.2, mv) }
		if err := tensor.GradCheck(f, []*tensor.Tensor{s}, tensor.GradCheckOptions{Eps: 1e-3}); err != nil {
			t.Fatalf("maxViolation=%v: %v", mv, err)
		}
	}
	lv := tensor.FromData([]float32{0.3, -0.2}, 2)
	a, b := tensor.FromData([]float32{1.5}), tensor.FromData([]float32{0.7})
	f := func(tp *tensor.Tape) *tensor.Tensor { return UncertaintyWeighted(tp, lv, a, b) }
	if err := tensor.GradCheck(f, []*tensor.Tensor{lv, a, b}, tensor.GradCheckOptions{}); err != nil {
		t.Fatal(err)
	}
	// Value: 0.5*(e^-0.3*1.5 + 0.3) + 0.5*(e^0.2*0.7 - 0.2)
	want := 0.5*(math.Exp(-0.3)*1.5+0.3) + 0.5*(math.Exp(0.2)*0.7-0.2)
	if got := UncertaintyWeighted(nil, lv, a, b).Item(); math.Abs(float64(got)-want) > 1e-5 {
		t.Fatalf("uncertainty-weighted loss %v, want %v", got, want)
	}
}

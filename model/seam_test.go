package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/xmr-project/xmr/tensor"
)

// TestAttentionPenaltyValues checks ||A^T A - I||_F^2 on hand-made
// attention weights (C, T, h): hops on distinct words cost nothing, two
// hops on one word cost the two off-diagonal ones, and the sum runs over
// the captions.
func TestAttentionPenaltyValues(t *testing.T) {
	cases := []struct {
		name string
		att  []float32 // (1, 3 words, 2 hops), word-major
		want float32
	}{
		{"distinct words", []float32{1, 0, 0, 0, 0, 1}, 0},
		{"same word", []float32{1, 1, 0, 0, 0, 0}, 2},
		// Each hop spread evenly over two words: A^T A = [[.5 .5] [.5 .5]],
		// minus I: four entries of magnitude 0.5.
		{"spread", []float32{0.5, 0.5, 0.5, 0.5, 0, 0}, 1},
	}
	for _, c := range cases {
		got := attentionPenalty(nil, tensor.FromData(c.att, 1, 3, 2)).Item()
		if math.Abs(float64(got-c.want)) > 1e-6 {
			t.Errorf("%s: penalty %v, want %v", c.name, got, c.want)
		}
	}
	two := append(append([]float32(nil), cases[1].att...), cases[2].att...)
	if got := attentionPenalty(nil, tensor.FromData(two, 2, 3, 2)).Item(); math.Abs(float64(got-3)) > 1e-6 {
		t.Errorf("two captions: penalty %v, want the sum 3", got)
	}
}

// TestSelfAttentionMasksPadding checks that every hop's weights over a
// caption's real words sum to 1 and that padded words get none: the
// output of a caption does not change when the padding does.
func TestSelfAttentionMasksPadding(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	a := newSelfAttention(rng, 5, 4, 3)
	x := tensor.RandN(rng, 2, 4, 5)
	valid := tensor.FromData([]float32{1, 1, 0, 0, 1, 1, 1, 1}, 2, 4)
	m1, _ := a.forward(nil, x, valid, false)
	for i := 10; i < 20; i++ { // the padded words of caption 0
		x.Data[i] += 100
	}
	m2, _ := a.forward(nil, x, valid, false)
	for k := 0; k < 15; k++ {
		if m1.Data[k] != m2.Data[k] {
			t.Fatalf("caption 0 changed with its padding: M[%d] %v -> %v", k, m1.Data[k], m2.Data[k])
		}
	}
	// With features all ones, M = A^T H holds each hop's total weight.
	ones := tensor.Full(1, 2, 4, 5)
	m, _ := a.forward(nil, ones, valid, false)
	for k, v := range m.Data {
		if math.Abs(float64(v)-1) > 1e-5 {
			t.Fatalf("hop weights sum to %v (entry %d), want 1", v, k)
		}
	}
}

// TestAttentionPenaltyGradients checks the gradient of each variant's
// penalty (Encoded.Penalty, lambda included) with respect to every text
// parameter it depends on against finite differences, and that without a
// tape or with lambda 0 no penalty is computed.
func TestAttentionPenaltyGradients(t *testing.T) {
	for _, variant := range seamVariants {
		t.Run(variant, func(t *testing.T) {
			m := tinyModel(t, tinySEAM(variant)).(*SEAM)
			tx := TextBatch(m, tinyCaptions)
			if enc := m.EncodeTexts(nil, tx); enc.Penalty != nil {
				t.Fatal("inference computed a penalty")
			}
			var params []*tensor.Tensor
			for _, p := range m.Params() {
				if p.T != m.ImgProj.W && p.T != m.TxtProj.W { // the projections come after the attention
					params = append(params, p.T)
				}
			}
			f := func(tp *tensor.Tape) *tensor.Tensor { return m.EncodeTexts(tp, tx).Penalty }
			if err := tensor.GradCheck(f, params, tensor.GradCheckOptions{MaxPerInput: 6, Eps: 1e-3, ATol: 1e-2, RTol: 5e-2}); err != nil {
				t.Fatal(err)
			}
			m.cfg.TextModel.AttentionPenalty = 0
			tp := tensor.NewTape()
			defer tp.Reset()
			if enc := m.EncodeTexts(tp, tx); enc.Penalty != nil {
				t.Fatal("lambda 0 computed a penalty")
			}
		})
	}
}

// TestSEAMImages checks the image encoder: non-negative unit vectors, and
// region features encoded as the global feature that is their mean over
// the valid regions.
func TestSEAMImages(t *testing.T) {
	m := tinyModel(t, tinySEAM("seam-e"))
	rng := rand.New(rand.NewPCG(5, 5))
	imgs := newTinyImages(rng)
	regions := m.EncodeImages(nil, ImageBatch(imgs, []int{0, 1, 2}))
	mean := meanRegions(ImageBatch(imgs, []int{0, 1, 2}))
	global := m.EncodeImages(nil, Images{Feat: tensor.FromData(mean.Data, 3, 1, 6)})
	for i, v := range regions.Global.Data {
		if v < 0 || math.Abs(float64(v-global.Global.Data[i])) > 1e-6 {
			t.Fatalf("entry %d: %v from regions, %v from their mean (want equal and non-negative)", i, v, global.Global.Data[i])
		}
	}
	for i := 0; i < 3; i++ {
		var n float64
		for _, v := range regions.Global.Data[i*8 : (i+1)*8] {
			n += float64(v) * float64(v)
		}
		if math.Abs(n-1) > 1e-5 {
			t.Errorf("image %d: squared norm %v, want 1", i, n)
		}
	}
	// Image 1 has 2 valid regions of 4: the mean is over those two.
	for k := 0; k < 6; k++ {
		want := (imgs.feat[24+k] + imgs.feat[30+k]) / 2
		if math.Abs(float64(mean.Data[6+k]-want)) > 1e-6 {
			t.Fatalf("mean feature %d of image 1: %v, want %v", k, mean.Data[6+k], want)
		}
	}
}

// TestSEAMParamsMatchPaper builds SEAM-E and SEAM-C at the paper's size
// (d = p = 300, f = 100, E = 1024) and checks the parameter counts of
// Table 2 where they do not depend on the vocabulary or the image
// features, which the paper does not give: each SEAM-E hop adds 307,500
// (300 inputs of W_t and a row of W2), each SEAM-C hop 512,900 (500 inputs
// of W_t, three rows of W2), and SEAM-C (h = 5) has 300,300 fewer than
// SEAM-E (h = 10).
func TestSEAMParamsMatchPaper(t *testing.T) {
	count := func(variant string, hops int) int {
		m := tinyModel(t, func(c *Config) {
			tinySEAM(variant)(c)
			c.TextModel.EmbedDim, c.TextModel.AttentionUnits, c.TextModel.Filters, c.TextModel.Hops = 300, 300, 100, hops
			c.Model.EmbedSize, c.ImageModel.FeatDim = 1024, 1536
		})
		n := 0
		for _, p := range m.Params() {
			n += p.T.Numel()
		}
		return n
	}
	e10, e15 := count("seam-e", 10), count("seam-e", 15)
	c5, c7 := count("seam-c", 5), count("seam-c", 7)
	if d := e15 - e10; d != 8_111_524-6_574_024 {
		t.Errorf("SEAM-E h=15 - h=10: %d parameters, Table 2: 1,537,500", d)
	}
	if d := c7 - c5; d != 7_299_524-6_273_724 {
		t.Errorf("SEAM-C h=7 - h=5: %d parameters, Table 2: 1,025,800", d)
	}
	if d := c5 - e10; d != 6_273_724-6_574_024 {
		t.Errorf("SEAM-C h=5 - SEAM-E h=10: %d parameters, Table 2: -300,300", d)
	}
}

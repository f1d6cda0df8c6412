package model

import (
	"math"
	"testing"

	"github.com/xmr-project/xmr/tensor"
)

// TestOfficialInit checks that the models whose word embeddings are learned
// from scratch start them as their official code does, from U(-0.1, 0.1)
// rather than N(0, 1), and that VSE++'s image projection starts with
// Xavier's uniform weights and a zero bias: a start far from this learns
// its words much more slowly (init.go).
func TestOfficialInit(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"seam-e", tinySEAM("seam-e")},
		{"seam-c", tinySEAM("seam-c")},
		{"seam-g", tinySEAM("seam-g")},
		{"vsepp", tinyVSEPP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tinyModel(t, func(c *Config) {
				tc.edit(c)
				c.TextModel.EmbedDim = 64 // enough entries for the spread to show
				c.ImageModel.FeatDim = 32
			})
			var emb *tensor.Tensor
			switch m := m.(type) {
			case *SEAM:
				emb = m.Embed.W
			case *VSEPP:
				emb = m.Embed.W
				in, out := m.ImgProj.In(), m.ImgProj.Out()
				checkUniform(t, "image projection weight", m.ImgProj.W.Data, math.Sqrt(6/float64(in+out)))
				for i, v := range m.ImgProj.B.Data {
					if v != 0 {
						t.Fatalf("image projection bias[%d] = %g, want 0", i, v)
					}
				}
			default:
				t.Fatalf("model %T", m)
			}
			checkUniform(t, "word embeddings", emb.Data, wordEmbeddingBound)
		})
	}
}

// checkUniform fails unless xs lie within [-bound, bound] and spread over it
// as a uniform draw does (standard deviation bound/sqrt(3), within 25%).
func checkUniform(t *testing.T, what string, xs []float32, bound float64) {
	t.Helper()
	var ss float64
	for i, v := range xs {
		if math.Abs(float64(v)) > bound {
			t.Fatalf("%s[%d] = %g, outside [-%g, %g]", what, i, v, bound, bound)
		}
		ss += float64(v) * float64(v)
	}
	sd, want := math.Sqrt(ss/float64(len(xs))), bound/math.Sqrt(3)
	if len(xs) < 100 {
		t.Fatalf("%s: only %d values", what, len(xs))
	}
	if math.Abs(sd-want) > 0.25*want {
		t.Fatalf("%s: standard deviation %.4f over %d values, want about %.4f (uniform in ±%g)", what, sd, len(xs), want, bound)
	}
}

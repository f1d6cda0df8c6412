package train

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/tensor"
)

// TestEncodersIndependent checks, for every built-in small config, that a
// training batch's image and text encodings do not depend on which encoder
// runs first: a step runs them side by side (encode), so either may end
// first. Images then captions and captions then images, on two models
// built alike (dropout off, weights moved since the banks were built),
// must give the same encodings bit for bit and, once the step ends, the
// same model state (MEMBER's banks included).
func TestEncodersIndependent(t *testing.T) {
	names, split := smallConfigs(t)
	for _, name := range names {
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			cfg := tinyConfig(t, name)
			cfg.ImageModel.FeatDim = split.Images.D
			if cfg.Model.Name == "vsepp" {
				cfg.TextModel.Hidden = cfg.Model.EmbedSize
			}
			run := func(imagesFirst bool) (img, txt *model.Encoded, fingerprint string) {
				m := smallModel(t, cfg, split)
				// As after a step: weights other than those the banks
				// were built with, so that a bank write changes the bank.
				rng := rand.New(rand.NewPCG(3, 3))
				for _, p := range m.Params() {
					for i := range p.T.Data {
						p.T.Data[i] += 0.05 * float32(rng.NormFloat64())
					}
				}
				b := BatchOf(m, split, []int{0, 7, 14, 21, 28, 35})
				tp := tensor.NewTape()
				tp.Training = false
				if imagesFirst {
					img = m.EncodeImages(tp, b.Images)
					txt = m.EncodeTexts(tp, b.Texts)
				} else {
					txt = m.EncodeTexts(tp, b.Texts)
					img = m.EncodeImages(tp, b.Images)
				}
				if mem, ok := m.(model.Memorizer); ok {
					mem.EndStep(true)
				}
				return img, txt, model.Fingerprint(m)
			}
			i1, t1, f1 := run(true)
			i2, t2, f2 := run(false)
			same := func(a, b *tensor.Tensor) bool {
				return (a == nil) == (b == nil) && (a == nil || slices.Equal(a.Data, b.Data))
			}
			if !same(i1.Global, i2.Global) || !same(i1.Vecs, i2.Vecs) {
				t.Error("the image encodings depend on which encoder ran first")
			}
			if !same(t1.Global, t2.Global) || !same(t1.Vecs, t2.Vecs) {
				t.Error("the text encodings depend on which encoder ran first")
			}
			if f1 != f2 {
				t.Error("the model's state after the step depends on which encoder ran first")
			}
		})
	}
}

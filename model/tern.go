package model

import (
	"math/rand/v2"

	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/tensor"
)

// TERN is the Transformer Encoder Reasoning Network (Messina et al.,
// "Transformer Reasoning Network for Image-Text Matching and Retrieval"):
// TERAN's two pipelines (teran.go), where the image's slot 0 is a learned
// I-CLS vector and the caption's [CLS] token is the T-CLS; after the final
// (shared) layers, image and caption are compared by the cosine of their
// CLS vectors (Scoring Global).
//
// The region and word vectors are kept too: "TERN MrSw/MwSr Test" scores a
// TERN with an alignment pooling (xmr eval --pooling MrSw), and TERN w.
// Align trains them with an alignment loss beside the matching loss.
type TERN struct {
	*TERAN
	ImgCLS *tensor.Tensor // (Hidden) the learned I-CLS slot
}

// newTERN builds TERN with fresh weights.
func newTERN(cfg Config, tok Tokenizer, seed uint64) (Model, error) {
	rng := rand.New(rand.NewPCG(seed, 0x7465726e))
	// The I-CLS slot draws from a stream of its own, so that TERAN and TERN
	// built with the same seed start from the same pipelines.
	t, err := buildTERAN(cfg, tok, rng)
	if err != nil {
		return nil, err
	}
	cls := tensor.RandN(rand.New(rand.NewPCG(seed, 0x636c73)), cfg.ImageModel.Hidden).SetRequiresGrad(true)
	for i := range cls.Data {
		cls.Data[i] *= 0.02
	}
	return &TERN{TERAN: t, ImgCLS: cls}, nil
}

// Name returns "tern".
func (m *TERN) Name() string { return "tern" }

// Scoring returns Global: the cosine of I-CLS and T-CLS.
func (m *TERN) Scoring() Scoring { return Global }

// Params lists TERAN's parameters and the I-CLS slot.
func (m *TERN) Params() []nn.Named { return m.params(m.ImgCLS) }

// EncodeImages runs the visual pipeline with the learned I-CLS in slot 0,
// whose output is the global vector.
func (m *TERN) EncodeImages(tp *tensor.Tape, im Images) *Encoded {
	b, h := im.Feat.Shape[0], m.cfg.ImageModel.Hidden
	slot0 := tp.Add(tensor.New(b, 1, h), tp.Reshape(m.ImgCLS, 1, 1, h)) // (B, 1, H)
	x, mask, pos := m.visual(tp, im, slot0)
	return &Encoded{Vecs: x, Mask: mask, Pos: pos, Global: slotZero(tp, x)}
}

// EncodeTexts runs the textual pipeline; the output at [CLS] is the
// global vector.
func (m *TERN) EncodeTexts(tp *tensor.Tape, tx Texts) *Encoded {
	x := m.textual(tp, tx)
	return &Encoded{Vecs: x, Mask: tx.Align, Pos: alignedWords(tx), Global: slotZero(tp, x)}
}

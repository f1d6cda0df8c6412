package model

import (
	"math/rand/v2"

	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/tensor"
)

// VSEPP is VSE++ (Faghri et al., "VSE++: Improving Visual-Semantic
// Embeddings with Hard Negatives"), the textbook baseline of image-text
// matching: a caption is the last state of a GRU over its word
// embeddings, an image a linear map of its global CNN feature, both
// L2-normalised and compared by their cosine (Scoring Global), trained with
// the hinge loss on the hardest negatives.
//
// Image encoder (EncoderImagePrecomp):
//
//	global feature (B, D) -> Linear D->E (B, E) -> L2-normalised
//
// Text encoder (EncoderText):
//
//	word ids (C, T) -> embeddings (C, T, d) -> GRU of E units -> state after the last word (C, E) -> L2-normalised
//
// Region features (B, R, D) are averaged over each image's valid regions
// first, as for SEAM. xmr carries it as the peer that the real-data
// benchmark (xmr bench learn) measures the papers' models against.
type VSEPP struct {
	cfg        Config
	tok        Tokenizer
	featNormed // image-model.feature-norm

	ImgProj *nn.Linear    // fc: (E, D)
	Embed   *nn.Embedding // word embeddings (V, d)
	GRU     *nn.GRU       // d -> E
}

// newVSEPP builds VSE++ with fresh weights, initialised as its official
// code does: the image projection by Xavier's uniform draw with a zero bias,
// the word embeddings from U(-0.1, 0.1), the GRU as PyTorch's.
func newVSEPP(cfg Config, tok Tokenizer, seed uint64) (Model, error) {
	rng := rand.New(rand.NewPCG(seed, 0x76736570))
	tc, e := cfg.TextModel, cfg.Model.EmbedSize
	return &VSEPP{
		cfg:        cfg,
		tok:        tok,
		featNormed: featNormed{newFeatNorm(cfg.ImageModel)},
		ImgProj:    xavierLinear(rng, cfg.ImageModel.FeatDim, e, true),
		Embed:      uniformEmbedding(rng, tc.VocabSize, tc.EmbedDim),
		GRU:        nn.NewGRU(rng, tc.EmbedDim, e, 1, false),
	}, nil
}

// validateVSEPP checks VSE++'s part of a config (Validate has checked what
// every model shares).
func (c Config) validateVSEPP(p *problems) {
	tc := c.TextModel
	p.oneOf("text-model.name", tc.Name, []string{"gru"})
	p.oneOf("image-model.name", c.ImageModel.Name, []string{"global"})
	if tc.Pretrain != "" {
		p.bad("text-model.pretrain", "vsepp learns its word embeddings; it reads no BERT (have %q)", tc.Pretrain)
	}
	if c.Model.Similarity != "" {
		p.bad("model.similarity", "vsepp scores by the cosine of its embeddings; leave it empty (have %q)", c.Model.Similarity)
	}
	p.between("text-model.embed-dim", tc.EmbedDim, 1, MaxWidth)
	if tc.Hidden != 0 && tc.Hidden != c.Model.EmbedSize {
		p.bad("text-model.hidden", "vsepp's GRU state is the caption embedding: %d must equal model.embed-size %d (or be left out)", tc.Hidden, c.Model.EmbedSize)
	}
}

// vseppParams is NumParams for VSE++, built the way newVSEPP builds it.
func (c Config) vseppParams() float64 {
	f := func(v int) float64 { return float64(v) }
	e, d := f(c.Model.EmbedSize), f(c.TextModel.EmbedDim)
	return f(c.ImageModel.FeatDim)*e + e + f(c.TextModel.VocabSize)*d + 3*e*d + 3*e*e + 6*e
}

// Name returns "vsepp".
func (m *VSEPP) Name() string { return "vsepp" }

// Config returns the model's config.
func (m *VSEPP) Config() Config { return m.cfg }

// Tokenizer returns the word tokenizer.
func (m *VSEPP) Tokenizer() Tokenizer { return m.tok }

// Scoring returns Global: the cosine of the two embeddings.
func (m *VSEPP) Scoring() Scoring { return Global }

// Params lists the parameters with the names of the VSE++ state_dict.
func (m *VSEPP) Params() []nn.Named {
	ps := append(m.norm.params(), nn.Prefix("img_enc.fc", m.ImgProj.Params())...)
	ps = append(ps, nn.Prefix("txt_enc.embed", m.Embed.Params())...)
	return append(ps, nn.Prefix("txt_enc.rnn", m.GRU.Params())...)
}

// EncodeImages maps each image's global feature (or the mean of its valid
// regions) to a unit vector.
func (m *VSEPP) EncodeImages(tp *tensor.Tape, im Images) *Encoded {
	x := meanRegions(m.norm.apply(tp, im))                                   // (B, D)
	return &Encoded{Global: tp.L2Normalize(m.ImgProj.Forward(tp, x), 1e-12)} // (B, E)
}

// EncodeTexts runs the GRU over each caption's real tokens and keeps its
// state after the last one.
func (m *VSEPP) EncodeTexts(tp *tensor.Tape, tx Texts) *Encoded {
	c, t := tx.Valid.Shape[0], tx.Valid.Shape[1]
	h := m.Embed.Forward(tp, tx.IDs, c, t)      // (C, T, d)
	_, last := m.GRU.Forward(tp, h, tx.Lengths) // (C, E)
	return &Encoded{Global: tp.L2Normalize(last, 1e-12)}
}

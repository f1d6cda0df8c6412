package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/tensor"
)

// SEAM is Self-attentive Embeddings for Aligning Modalities (Wehrmann et
// al., "Fast Self-Attentive Multimodal Retrieval"): a caption becomes one
// vector through structured self-attention over its words (no recurrence
// in SEAM-E and SEAM-C, hence fast), an image one vector through a linear
// map of a global CNN feature; both are non-negative and unit-norm, and
// compared as order embeddings (Scoring Order) or by their cosine
// (model.similarity: global).
//
// Image encoder (eq. 4):
//
//	global feature C(i) (B, D) -> W_i, Linear D->E without bias (B, E) -> |.| -> L2-normalised
//
// Region features (B, R, D) are averaged over each image's valid regions
// first, so that SEAM also reads TERAN's data (R = 1 is the global case).
//
// Text encoder, by variant (text-model.name):
//
//	seam-e (sec. 2.2): word ids (C, T) -> embeddings H (C, T, d) -> attention -> (C, h*d)
//	seam-c (sec. 2.3): H, and Conv1d kernels 2 and 3 (f filters, ReLU) over the
//	        zero-padded H, (C, T, f) each; one attention per map, concatenated (C, h*(d+2f))
//	seam-g (sec. 2.4): H -> GRU of k units (C, T, k) -> attention -> (C, h*k)
//	-> W_t, Linear ->E without bias (C, E) -> |.| -> L2-normalised
//
// The attention's penalty ||A^T A - I||_F^2, weighted by lambda
// (text-model.attention-penalty), is returned in Encoded.Penalty and added
// to the training loss (L_f = L_c + lambda P, sec. 2.6).
//
// Where the paper leaves a choice open: both embeddings are scaled to unit
// norm before the order similarity (sec. 2.6: "we first scale both to
// have unit norm"); the convolutions are followed by a ReLU (the paper
// names no activation; Kim's convolutions, which SEAM-C adapts, use one);
// the penalty is summed over the batch's captions, as eq. 5 sums the
// hinges. The sizes agree with Table 2's parameter counts
// (TestSEAMParamsMatchPaper).
type SEAM struct {
	cfg        Config
	tok        Tokenizer
	featNormed // image-model.feature-norm

	ImgProj *nn.Linear       // W_i: (E, D)
	Embed   *nn.Embedding    // word embeddings (V, d)
	Convs   []*nn.Conv1d     // SEAM-C: kernels 2 and 3
	GRU     *nn.GRU          // SEAM-G
	Attn    []*selfAttention // one per feature map: [H], [H, conv2, conv3] or [GRU]
	TxtProj *nn.Linear       // W_t: (E, sum of h*z)
}

// seamVariants lists SEAM's text encoders, the valid text-model.name
// values of model seam.
var seamVariants = []string{"seam-e", "seam-c", "seam-g"}

// seamKernels are SEAM-C's convolution widths: bigrams and trigrams.
var seamKernels = []int{2, 3}

// newSEAM builds SEAM with fresh weights.
func newSEAM(cfg Config, tok Tokenizer, seed uint64) (Model, error) {
	rng := rand.New(rand.NewPCG(seed, 0x7365616d))
	tc, e := cfg.TextModel, cfg.Model.EmbedSize
	m := &SEAM{cfg: cfg, tok: tok, featNormed: featNormed{newFeatNorm(cfg.ImageModel)}}
	m.ImgProj = nn.NewLinear(rng, cfg.ImageModel.FeatDim, e, false)
	// The word embeddings from U(-0.1, 0.1), as SEAM's code draws them.
	m.Embed = uniformEmbedding(rng, tc.VocabSize, tc.EmbedDim)
	widths := []int{tc.EmbedDim} // z of each attention module's input
	switch tc.Name {
	case "seam-c":
		for _, k := range seamKernels {
			m.Convs = append(m.Convs, nn.NewConv1d(rng, tc.EmbedDim, tc.Filters, k, 1))
			widths = append(widths, tc.Filters)
		}
	case "seam-g":
		m.GRU = nn.NewGRU(rng, tc.EmbedDim, tc.Hidden, 1, false)
		widths = []int{tc.Hidden}
	}
	total := 0
	for _, z := range widths {
		m.Attn = append(m.Attn, newSelfAttention(rng, z, tc.AttentionUnits, tc.Hops))
		total += tc.Hops * z
	}
	m.TxtProj = nn.NewLinear(rng, total, e, false)
	return m, nil
}

// validateSEAM checks SEAM's part of a config (Validate has checked what
// every model shares).
func (c Config) validateSEAM(p *problems) {
	tc := c.TextModel
	p.oneOf("text-model.name", tc.Name, seamVariants)
	p.oneOf("image-model.name", c.ImageModel.Name, []string{"global"})
	if s := c.Model.Similarity; s != Order && s != Global {
		p.bad("model.similarity", "%q is not one of %s, %s", s, Order, Global)
	}
	if tc.Pretrain != "" {
		p.bad("text-model.pretrain", "seam learns its word embeddings; it reads no BERT (have %q)", tc.Pretrain)
	}
	p.between("text-model.embed-dim", tc.EmbedDim, 1, MaxWidth)
	p.between("text-model.hops", tc.Hops, 1, MaxHeads)
	p.between("text-model.attention-units", tc.AttentionUnits, 1, MaxWidth)
	switch tc.Name {
	case "seam-c":
		p.between("text-model.filters", tc.Filters, 1, MaxWidth)
	case "seam-g":
		p.between("text-model.hidden", tc.Hidden, 1, MaxWidth)
	}
	if !(tc.AttentionPenalty >= 0) || math.IsInf(float64(tc.AttentionPenalty), 1) {
		p.bad("text-model.attention-penalty", "must be finite and not negative, is %g", tc.AttentionPenalty)
	}
}

// seamParams is NumParams for SEAM, built the way newSEAM builds it.
func (c Config) seamParams() float64 {
	f := func(v int) float64 { return float64(v) }
	tc := c.TextModel
	e, d := f(c.Model.EmbedSize), f(tc.EmbedDim)
	n := f(c.ImageModel.FeatDim)*e + f(tc.VocabSize)*d
	widths := []float64{d}
	switch tc.Name {
	case "seam-c":
		for _, k := range seamKernels {
			n += d*f(tc.Filters)*f(k) + f(tc.Filters)
			widths = append(widths, f(tc.Filters))
		}
	case "seam-g":
		h := f(tc.Hidden)
		n += 3*h*d + 3*h*h + 6*h
		widths = []float64{h}
	}
	for _, z := range widths {
		n += z*f(tc.AttentionUnits) + f(tc.AttentionUnits)*f(tc.Hops) + f(tc.Hops)*z*e
	}
	return n
}

// Name returns "seam".
func (m *SEAM) Name() string { return "seam" }

// Config returns the model's config.
func (m *SEAM) Config() Config { return m.cfg }

// Tokenizer returns the word tokenizer.
func (m *SEAM) Tokenizer() Tokenizer { return m.tok }

// Scoring returns model.similarity: Order (the paper's) or Global.
func (m *SEAM) Scoring() Scoring { return m.cfg.Model.Similarity }

// Params lists the image projection, then the text encoder in the order
// data flows through it.
func (m *SEAM) Params() []nn.Named {
	ps := append(m.norm.params(), nn.Prefix("img_enc.fc", m.ImgProj.Params())...)
	ps = append(ps, nn.Prefix("txt_enc.embed", m.Embed.Params())...)
	for i, c := range m.Convs {
		ps = append(ps, nn.Prefix(fmt.Sprintf("txt_enc.conv%d", seamKernels[i]), c.Params())...)
	}
	if m.GRU != nil {
		ps = append(ps, nn.Prefix("txt_enc.rnn", m.GRU.Params())...)
	}
	for i, a := range m.Attn {
		ps = append(ps, nn.Prefix(fmt.Sprintf("txt_enc.attention.%d", i), a.params())...)
	}
	return append(ps, nn.Prefix("txt_enc.fc", m.TxtProj.Params())...)
}

// EncodeImages maps each image's global feature (or the mean of its valid
// regions) to a non-negative unit vector.
func (m *SEAM) EncodeImages(tp *tensor.Tape, im Images) *Encoded {
	x := meanRegions(m.norm.apply(tp, im))                       // (B, D)
	f := tp.L2Normalize(tp.Abs(m.ImgProj.Forward(tp, x)), 1e-12) // (B, E): |W_i C(i)|, unit norm
	return &Encoded{Global: f}
}

// meanRegions returns the mean of every image's valid region features (B,
// D): the features themselves for global data (R = 1), zeros for an image
// without regions. The features are data, so no gradient flows.
func meanRegions(im Images) *tensor.Tensor {
	b, r, d := im.Feat.Shape[0], im.Feat.Shape[1], im.Feat.Shape[2]
	out := tensor.New(b, d)
	for i := 0; i < b; i++ {
		row := out.Data[i*d : (i+1)*d]
		n := 0
		for j := 0; j < r; j++ {
			if im.Valid != nil && im.Valid.Data[i*r+j] == 0 {
				continue
			}
			n++
			for k, v := range im.Feat.Data[(i*r+j)*d : (i*r+j+1)*d] {
				row[k] += v
			}
		}
		if n > 1 {
			inv := 1 / float32(n)
			for k := range row {
				row[k] *= inv
			}
		}
	}
	return out
}

// EncodeTexts runs the variant's feature maps and attention modules over
// the real tokens (start and end tokens included), and with a tape returns
// the weighted attention penalty.
func (m *SEAM) EncodeTexts(tp *tensor.Tape, tx Texts) *Encoded {
	c, t := tx.Valid.Shape[0], tx.Valid.Shape[1]
	h := m.Embed.Forward(tp, tx.IDs, c, t) // (C, T, d)
	var maps []*tensor.Tensor
	switch {
	case m.GRU != nil:
		g, _ := m.GRU.Forward(tp, h, tx.Lengths) // (C, T, k), zero past each caption
		maps = []*tensor.Tensor{g}
	case len(m.Convs) > 0:
		// Zero padding: the words past a caption's end are zeros, so that a
		// caption's features do not depend on its batch.
		hz := tp.MaskRows(h, tx.Valid) // (C, T, d)
		maps = []*tensor.Tensor{h}
		for _, conv := range m.Convs {
			y := conv.Forward(tp, hz)          // (C, T+3-K, f)
			y = tp.ReLU(tp.Narrow(y, 1, 0, t)) // (C, T, f): step s covers words s-1 .. s+K-2
			maps = append(maps, y)
		}
	default:
		maps = []*tensor.Tensor{h}
	}
	penalize := tp != nil && m.cfg.TextModel.AttentionPenalty > 0
	outs := make([]*tensor.Tensor, len(maps))
	var penalty *tensor.Tensor
	for i, x := range maps {
		var p *tensor.Tensor
		outs[i], p = m.Attn[i].forward(tp, x, tx.Valid, penalize) // (C, h*z), scalar
		if penalize {
			penalty = sumOrFirst(tp, penalty, p)
		}
	}
	s := outs[0]
	if len(outs) > 1 {
		s = tp.Concat(1, outs...) // (C, sum of h*z)
	}
	f := tp.L2Normalize(tp.Abs(m.TxtProj.Forward(tp, s)), 1e-12) // (C, E): |W_t S|, unit norm
	enc := &Encoded{Global: f}
	if penalize {
		enc.Penalty = tp.Scale(penalty, m.cfg.TextModel.AttentionPenalty)
	}
	return enc
}

// sumOrFirst returns acc + x, or x when acc is nil.
func sumOrFirst(tp *tensor.Tape, acc, x *tensor.Tensor) *tensor.Tensor {
	if acc == nil {
		return x
	}
	return tp.Add(acc, x)
}

// selfAttention is the structured self-attention of Lin et al. on which
// SEAM builds (sec. 2.1): h hops, each a distribution over the words.
type selfAttention struct {
	W1 *nn.Linear // (p, z), no bias
	W2 *nn.Linear // (h, p), no bias
}

func newSelfAttention(rng *rand.Rand, z, units, hops int) *selfAttention {
	return &selfAttention{W1: nn.NewLinear(rng, z, units, false), W2: nn.NewLinear(rng, units, hops, false)}
}

func (a *selfAttention) params() []nn.Named {
	return append(nn.Prefix("ws1", a.W1.Params()), nn.Prefix("ws2", a.W2.Params())...)
}

// forward attends over the real words (valid (C, T)) of features x (C, T,
// z) and returns M flattened, (C, h*z), and with penalize the penalty
// summed over the captions, a scalar (else nil).
func (a *selfAttention) forward(tp *tensor.Tape, x, valid *tensor.Tensor, penalize bool) (m, penalty *tensor.Tensor) {
	c, t, z := x.Shape[0], x.Shape[1], x.Shape[2]
	hops := a.W2.Out()
	v := tp.Tanh(a.W1.Forward(tp, x))                                               // V = tanh(H W1): (C, T, p)
	att := tp.Softmax(a.W2.Forward(tp, v), 1, tensor.FromData(valid.Data, c, t, 1)) // A = softmax over words of V W2: (C, T, h)
	m = tp.Reshape(tp.MatMul(att, x, true, false), c, hops*z)                       // M = A^T H: (C, h, z), flattened
	if penalize {
		penalty = attentionPenalty(tp, att)
	}
	return m, penalty
}

// attentionPenalty returns the sum over captions of ||A^T A - I||_F^2 for
// attention weights att (C, T, h): the Gram matrix of the hops (h, h) is
// pushed towards the identity, so that each hop focuses on few words and
// the hops differ (the paper's A A^T, with A stored as h x n there).
func attentionPenalty(tp *tensor.Tape, att *tensor.Tensor) *tensor.Tensor {
	hops := att.Shape[2]
	eye := tensor.New(hops, hops)
	for i := 0; i < hops; i++ {
		eye.Data[i*hops+i] = 1
	}
	d := tp.Sub(tp.MatMul(att, att, true, false), eye) // A^T A - I: (C, h, h)
	return tp.SumAll(tp.Mul(d, d))
}

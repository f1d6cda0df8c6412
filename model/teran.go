package model

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/tensor"
)

// Model is TERAN or TERN: a visual and a textual pipeline, each ending in
// transformer layers at the common embedding size, compared by a
// region-word alignment (TERAN) or by their I-CLS and T-CLS vectors (TERN).
//
// Visual pipeline (TERAN paper, Fig. 2; REFERENCE.md):
//
//	regions (B, R, 2048) ++ box code (B, R, 5) -> Linear-ReLU-Linear (B, R, 2048)
//	-> [slot 0 | regions] (B, 1+R, 2048) -> 4 transformer layers (key-padding mask)
//	-> Linear 2048->1024 -> 2 transformer layers -> L2-normalised vectors
//
// Textual pipeline: BERT (or GRU/LSTM/transformer) words (C, T, 768)
// -> Linear 768->1024 -> 2 transformer layers (shared with the visual ones
// in the shared-W variant) -> L2-normalised vectors.
type Model struct {
	Cfg Config

	PosMap1, PosMap2 *nn.Linear             // box-conditioned region features
	ImgCLS           *tensor.Tensor         // learned I-CLS slot (TERN); TERAN's slot 0 is zeros
	ImgEnc           *nn.TransformerEncoder // visual reasoning layers
	Text             TextEncoder            // BERT or a word encoder
	ImgProj, CapProj *nn.Linear             // to the common space
	ImgFinal         *nn.TransformerEncoder // final layers, image side
	TxtFinal         *nn.TransformerEncoder // final layers, text side (== ImgFinal when shared)
	// LogVars are the learned log-variances of the uncertainty weighting
	// (Kendall et al.) of TERN w. Align: matching, alignment.
	LogVars *tensor.Tensor
	// Tok tokenises captions for this model's text encoder.
	Tok Tokenizer
}

// New builds a model with fresh weights (BERT weights are read when
// cfg.TextModel.Pretrain is set).
func New(cfg Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Training.Seed, 0x7465726e))
	im, mc := cfg.ImageModel, cfg.Model
	m := &Model{Cfg: cfg}
	inDim := im.FeatDim
	if im.PosEncoding == "concat-and-process" {
		inDim += 5
	}
	m.PosMap1 = nn.NewLinear(rng, inDim, im.Hidden, true)
	m.PosMap2 = nn.NewLinear(rng, im.Hidden, im.Hidden, true)
	if mc.Name == "tern" {
		m.ImgCLS = tensor.RandN(rng, im.Hidden).SetRequiresGrad(true)
		for i := range m.ImgCLS.Data {
			m.ImgCLS.Data[i] *= 0.02
		}
	}
	m.ImgEnc = nn.NewTransformerEncoder(rng, im.TransformerLayers, im.Hidden, im.Heads, im.FF, im.Dropout, nn.ReLU)
	txt, err := newTextEncoder(rng, cfg.TextModel)
	if err != nil {
		return nil, fmt.Errorf("text model: %w", err)
	}
	m.Text = txt
	if bt, ok := txt.(bertText); ok && cfg.TextModel.Pretrain != "" {
		// Record the sizes of the BERT actually loaded, so that the config
		// stored in checkpoints rebuilds it without the BERT directory.
		tm := &m.Cfg.TextModel
		tm.VocabSize, tm.WordDim, tm.Heads = bt.Cfg.VocabSize, bt.Cfg.HiddenSize, bt.Cfg.NumAttentionHeads
		tm.FF, tm.MaxPositions, tm.ExtractionHiddenLayer = bt.Cfg.IntermediateSize, bt.Cfg.MaxPositionEmbeddings, len(bt.Layers)
	}
	m.ImgProj = nn.NewLinear(rng, im.Hidden, mc.EmbedSize, true)
	m.CapProj = nn.NewLinear(rng, txt.OutDim(), mc.EmbedSize, true)
	m.ImgFinal = nn.NewTransformerEncoder(rng, mc.Layers, mc.EmbedSize, mc.Heads, mc.FF, mc.Dropout, nn.ReLU)
	m.TxtFinal = m.ImgFinal
	if !mc.SharedTransformer {
		m.TxtFinal = nn.NewTransformerEncoder(rng, mc.Layers, mc.EmbedSize, mc.Heads, mc.FF, mc.Dropout, nn.ReLU)
	}
	if cfg.Training.LossType == "matching+alignment" {
		m.LogVars = tensor.New(2).SetRequiresGrad(true)
	}
	return m, nil
}

// Params lists every parameter once, with names following the official
// TERAN state_dict (img_txt_enc.*).
func (m *Model) Params() []nn.Named {
	ps := nn.Prefix("img_txt_enc.img_enc.pos_encoding_image.map.0", m.PosMap1.Params())
	ps = append(ps, nn.Prefix("img_txt_enc.img_enc.pos_encoding_image.map.2", m.PosMap2.Params())...)
	if m.ImgCLS != nil {
		ps = append(ps, nn.Named{Name: "img_txt_enc.img_enc.cls", T: m.ImgCLS})
	}
	ps = append(ps, nn.Prefix("img_txt_enc.img_enc.transformer_encoder", m.ImgEnc.Params())...)
	textName := bertPrefix
	if _, ok := m.Text.(bertText); !ok {
		textName = "img_txt_enc.txt_enc"
	}
	ps = append(ps, nn.Prefix(textName, m.Text.Params())...)
	ps = append(ps, nn.Prefix("img_txt_enc.img_proj", m.ImgProj.Params())...)
	ps = append(ps, nn.Prefix("img_txt_enc.cap_proj", m.CapProj.Params())...)
	ps = append(ps, nn.Prefix("img_txt_enc.transformer_encoder_1", m.ImgFinal.Params())...)
	if m.TxtFinal != m.ImgFinal {
		ps = append(ps, nn.Prefix("img_txt_enc.transformer_encoder_2", m.TxtFinal.Params())...)
	}
	if m.LogVars != nil {
		ps = append(ps, nn.Named{Name: "loss.log_vars", T: m.LogVars})
	}
	return ps
}

// bertPrefix names BERT's parameters in the official state_dict.
const bertPrefix = "img_txt_enc.txt_enc.bert_model"

// IsBERTParam reports whether a parameter name belongs to BERT (for its
// separate learning rate).
func IsBERTParam(name string) bool {
	return strings.HasPrefix(name, bertPrefix+".")
}

// Images is a batch of images for the visual pipeline.
type Images struct {
	Feat  *tensor.Tensor // (B, R, FeatDim) region features
	Boxes *tensor.Tensor // (B, R, 5) box codes [x1, y1, x2, y2, area]; nil without pos-encoding
	Valid *tensor.Tensor // (B, R) 1 = real region, 0 = padding
}

// Texts is a batch of tokenised captions for the textual pipeline.
type Texts struct {
	IDs     []int32        // (C, T) row-major token ids; position 0 is [CLS] / <start>
	Valid   *tensor.Tensor // (C, T) 1 = real token
	Align   *tensor.Tensor // (C, T) 1 = word that takes part in the alignment
	Lengths []int          // real tokens per caption
}

// Embedded is the output of one pipeline: contextual vectors in the common
// space.
type Embedded struct {
	Vecs *tensor.Tensor // (N, L, E), each vector L2-normalised
	Mask *tensor.Tensor // (N, L) 1 = region/word that takes part in the alignment
	CLS  *tensor.Tensor // (N, E) the global I-CLS / T-CLS vector (position 0)
}

// EncodeImages runs the visual pipeline.
func (m *Model) EncodeImages(tp *tensor.Tape, im Images) *Embedded {
	b, r := im.Feat.Shape[0], im.Feat.Shape[1]
	h := m.Cfg.ImageModel.Hidden
	x := im.Feat
	if im.Boxes != nil && m.Cfg.ImageModel.PosEncoding == "concat-and-process" {
		x = tp.Concat(2, x, im.Boxes) // (B, R, D+5)
	}
	x = m.PosMap2.Forward(tp, tp.ReLU(m.PosMap1.Forward(tp, x))) // (B, R, H)
	var slot0 *tensor.Tensor
	if m.ImgCLS != nil {
		slot0 = tp.Add(tensor.New(b, 1, h), tp.Reshape(m.ImgCLS, 1, 1, h)) // (B, 1, H) learned I-CLS
	} else {
		slot0 = tensor.New(b, 1, h) // (B, 1, H) zeros
	}
	x = tp.Concat(1, slot0, x) // (B, 1+R, H)
	valid := tensor.New(b, 1+r)
	mask := tensor.New(b, 1+r)
	for i := 0; i < b; i++ {
		valid.Data[i*(1+r)] = 1
		for j := 0; j < r; j++ {
			v := float32(1)
			if im.Valid != nil {
				v = im.Valid.Data[i*r+j]
			}
			valid.Data[i*(1+r)+1+j] = v
			mask.Data[i*(1+r)+1+j] = v // slot 0 never aligns
		}
	}
	x = m.ImgEnc.Forward(tp, x, valid)                          // (B, 1+R, H)
	x = m.ImgFinal.Forward(tp, m.ImgProj.Forward(tp, x), valid) // (B, 1+R, E)
	return m.embedded(tp, x, mask)
}

// EncodeTexts runs the textual pipeline.
func (m *Model) EncodeTexts(tp *tensor.Tape, tx Texts) *Embedded {
	x := m.Text.Forward(tp, tx.IDs, tx.Valid, tx.Lengths)          // (C, T, W)
	x = m.TxtFinal.Forward(tp, m.CapProj.Forward(tp, x), tx.Valid) // (C, T, E)
	return m.embedded(tp, x, tx.Align)
}

func (m *Model) embedded(tp *tensor.Tape, x, mask *tensor.Tensor) *Embedded {
	n, e := x.Shape[0], x.Shape[2]
	v := tp.L2Normalize(x, 1e-12)                  // (N, L, E)
	cls := tp.Reshape(tp.Narrow(v, 1, 0, 1), n, e) // (N, E): position 0
	return &Embedded{Vecs: v, Mask: mask, CLS: cls}
}

// Similarity scores every image against every caption: (B, C). TERN
// compares the CLS vectors (cosine); TERAN pools the region-word alignment
// matrices with the configured pooling.
func (m *Model) Similarity(tp *tensor.Tape, img, txt *Embedded) *tensor.Tensor {
	if m.Cfg.Model.Name == "tern" {
		return GlobalSimilarity(tp, img, txt)
	}
	return AlignmentSimilarity(tp, img, txt, m.Cfg.Training.AlignmentMode)
}

// GlobalSimilarity is TERN's score: the cosine of I-CLS and T-CLS, (B, C).
func GlobalSimilarity(tp *tensor.Tape, img, txt *Embedded) *tensor.Tensor {
	return tp.MatMul(img.CLS, txt.CLS, false, true)
}

// Alignments returns the region-word alignment matrices of every image
// against every caption, A[b, r, c, w] = <region r of image b, word w of
// caption c>, shape (B, L1, C, L2): one matrix product of all regions by all
// words.
func Alignments(tp *tensor.Tape, img, txt *Embedded) *tensor.Tensor {
	b, l1, e := img.Vecs.Shape[0], img.Vecs.Shape[1], img.Vecs.Shape[2]
	c, l2 := txt.Vecs.Shape[0], txt.Vecs.Shape[1]
	a := tp.MatMul(tp.Reshape(img.Vecs, b*l1, e), tp.Reshape(txt.Vecs, c*l2, e), false, true) // (B*L1, C*L2)
	return tp.Reshape(a, b, l1, c, l2)
}

// AlignmentSimilarity pools the alignment matrices into image-caption
// scores (B, C) (TERAN eq. 3-4). Masked regions cannot win a max and masked
// words add nothing to a sum:
//
//	MrSw   = sum over words of the max over regions
//	MwSr   = sum over regions of the max over words
//	Symm   = MrSw + MwSr
//	MrAvgw = MrSw / number of words
func AlignmentSimilarity(tp *tensor.Tape, img, txt *Embedded, mode string) *tensor.Tensor {
	a := Alignments(tp, img, txt) // (B, L1, C, L2)
	b, l1, c, l2 := a.Shape[0], a.Shape[1], a.Shape[2], a.Shape[3]
	regMask := tensor.FromData(img.Mask.Data, b, l1, 1, 1)
	wordMask := tensor.FromData(txt.Mask.Data, 1, 1, c, l2)
	mrsw := func() *tensor.Tensor {
		mx, _ := tp.Max(a, 1, false, regMask)                                         // (B, C, L2)
		return tp.Sum(tp.Mul(mx, tensor.FromData(txt.Mask.Data, 1, c, l2)), false, 2) // (B, C)
	}
	mwsr := func() *tensor.Tensor {
		mx, _ := tp.Max(a, 3, false, wordMask)                                        // (B, L1, C)
		return tp.Sum(tp.Mul(mx, tensor.FromData(img.Mask.Data, b, l1, 1)), false, 1) // (B, C)
	}
	switch mode {
	case "MwSr":
		return mwsr()
	case "Symm":
		return tp.Add(mrsw(), mwsr())
	case "MrAvgw":
		cnt := tensor.New(1, c)
		for j := 0; j < c; j++ {
			var n float32
			for w := 0; w < l2; w++ {
				n += txt.Mask.Data[j*l2+w]
			}
			cnt.Data[j] = max(n, 1)
		}
		return tp.Div(mrsw(), cnt)
	default: // MrSw
		return mrsw()
	}
}

// Loss is the training objective for a batch of B matching (image, caption)
// pairs: image i matches caption i. iter is the training iteration (for
// the max-violation warm-up).
func (m *Model) Loss(tp *tensor.Tape, img, txt *Embedded, iter int) *tensor.Tensor {
	tc := m.Cfg.Training
	mv := tc.MaxViolation && iter >= tc.MaxViolationAfter
	switch tc.LossType {
	case "matching":
		return ContrastiveLoss(tp, GlobalSimilarity(tp, img, txt), tc.Margin, mv)
	case "matching+alignment":
		lm := ContrastiveLoss(tp, GlobalSimilarity(tp, img, txt), tc.Margin, mv)
		la := ContrastiveLoss(tp, AlignmentSimilarity(tp, img, txt, tc.AlignmentMode), tc.Margin, mv)
		return UncertaintyWeighted(tp, m.LogVars, lm, la)
	default:
		return ContrastiveLoss(tp, AlignmentSimilarity(tp, img, txt, tc.AlignmentMode), tc.Margin, mv)
	}
}

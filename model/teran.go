package model

import (
	"fmt"
	"math/rand/v2"

	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/tensor"
)

// TERAN is the Transformer Encoder Reasoning and Alignment Network (Messina
// et al., "Fine-grained Visual Textual Alignment for Cross-Modal Retrieval
// using Transformer Encoders"): a visual and a textual pipeline, each
// ending in transformer layers at the common embedding size, whose region
// and word vectors are compared by pooling their alignment matrix (MrSw by
// default, see Config.Pooling and score.go).
//
// Visual pipeline (Fig. 2; the layer sizes of the official TERAN code):
//
//	regions (B, R, 2048) ++ box code (B, R, 5) -> Linear-ReLU-Linear (B, R, 2048)
//	-> [slot 0 | regions] (B, 1+R, 2048) -> 4 transformer layers (key-padding mask)
//	-> Linear 2048->1024 -> 2 transformer layers -> L2-normalised vectors
//
// Textual pipeline: BERT (or GRU/LSTM/transformer) words (C, T, 768)
// -> Linear 768->1024 -> 2 transformer layers (shared with the visual ones
// in the shared-W variant) -> L2-normalised vectors.
//
// TERAN's slot 0 is zeros and never takes part in the alignment; TERN
// (tern.go) reuses both pipelines with a learned slot 0.
type TERAN struct {
	cfg        Config
	tok        Tokenizer
	featNormed // image-model.feature-norm

	PosMap1, PosMap2 *nn.Linear             // box-conditioned region features (eq. 2)
	ImgEnc           *nn.TransformerEncoder // visual reasoning layers
	Text             TextEncoder            // BERT or a word encoder
	ImgProj, CapProj *nn.Linear             // to the common space
	ImgFinal         *nn.TransformerEncoder // final layers, image side
	TxtFinal         *nn.TransformerEncoder // final layers, text side (== ImgFinal when shared)
}

// newTERAN builds TERAN with fresh weights.
func newTERAN(cfg Config, tok Tokenizer, seed uint64) (Model, error) {
	return buildTERAN(cfg, tok, rand.New(rand.NewPCG(seed, 0x7465726e)))
}

// buildTERAN builds both pipelines, drawing weights from rng.
func buildTERAN(cfg Config, tok Tokenizer, rng *rand.Rand) (*TERAN, error) {
	im, jc := cfg.ImageModel, cfg.Model
	m := &TERAN{cfg: cfg, tok: tok, featNormed: featNormed{newFeatNorm(cfg.ImageModel)}}
	inDim := im.FeatDim
	if im.PosEncoding == "concat-and-process" {
		inDim += 5
	}
	m.PosMap1 = nn.NewLinear(rng, inDim, im.Hidden, true)
	m.PosMap2 = nn.NewLinear(rng, im.Hidden, im.Hidden, true)
	m.ImgEnc = nn.NewTransformerEncoder(rng, im.TransformerLayers, im.Hidden, im.Heads, im.FF, im.Dropout, nn.ReLU)
	txt, err := newTextEncoder(rng, cfg.TextModel)
	if err != nil {
		return nil, fmt.Errorf("text model: %w", err)
	}
	m.Text = txt
	if bt, ok := txt.(bertText); ok && cfg.TextModel.Pretrain != "" {
		// Record the sizes of the BERT actually loaded, so that the config
		// stored in checkpoints rebuilds it without the BERT directory.
		tm := &m.cfg.TextModel
		tm.VocabSize, tm.WordDim, tm.Heads = bt.Cfg.VocabSize, bt.Cfg.HiddenSize, bt.Cfg.NumAttentionHeads
		tm.FF, tm.MaxPositions, tm.ExtractionHiddenLayer = bt.Cfg.IntermediateSize, bt.Cfg.MaxPositionEmbeddings, len(bt.Layers)
	}
	m.ImgProj = nn.NewLinear(rng, im.Hidden, jc.EmbedSize, true)
	m.CapProj = nn.NewLinear(rng, txt.OutDim(), jc.EmbedSize, true)
	m.ImgFinal = nn.NewTransformerEncoder(rng, jc.Layers, jc.EmbedSize, jc.Heads, jc.FF, jc.Dropout, nn.ReLU)
	m.TxtFinal = m.ImgFinal
	if !jc.SharedTransformer {
		m.TxtFinal = nn.NewTransformerEncoder(rng, jc.Layers, jc.EmbedSize, jc.Heads, jc.FF, jc.Dropout, nn.ReLU)
	}
	return m, nil
}

// Name returns "teran".
func (m *TERAN) Name() string { return "teran" }

// Config returns the model's config.
func (m *TERAN) Config() Config { return m.cfg }

// Tokenizer returns the caption tokenizer.
func (m *TERAN) Tokenizer() Tokenizer { return m.tok }

// Scoring returns the configured alignment pooling (MrSw by default).
func (m *TERAN) Scoring() Scoring { return m.cfg.Pooling }

// Params lists every parameter once, with names following the official
// TERAN state_dict (img_txt_enc.*).
func (m *TERAN) Params() []nn.Named { return m.params(nil) }

// params lists the parameters with TERN's I-CLS slot, when not nil, in its
// place in the visual pipeline.
func (m *TERAN) params(imgCLS *tensor.Tensor) []nn.Named {
	ps := m.norm.params()
	ps = append(ps, nn.Prefix("img_txt_enc.img_enc.pos_encoding_image.map.0", m.PosMap1.Params())...)
	ps = append(ps, nn.Prefix("img_txt_enc.img_enc.pos_encoding_image.map.2", m.PosMap2.Params())...)
	if imgCLS != nil {
		ps = append(ps, nn.Named{Name: "img_txt_enc.img_enc.cls", T: imgCLS})
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
	return ps
}

// bertPrefix names BERT's parameters in the official state_dict.
const bertPrefix = "img_txt_enc.txt_enc.bert_model"

// EncodeImages runs the visual pipeline with slot 0 as the config says
// (ImageConfig.Slot0: zeros, or the box MLP's output for a zero region);
// the global vector is the normalised mean of the region vectors.
func (m *TERAN) EncodeImages(tp *tensor.Tape, im Images) *Encoded {
	b, h := im.Feat.Shape[0], m.cfg.ImageModel.Hidden
	slot0 := tensor.New(b, 1, h) // (B, 1, H)
	if m.cfg.ImageModel.Slot0 == "zero-region" {
		// A zero feature with a zero box code: map.0 gives its bias alone.
		z := m.PosMap2.Forward(tp, tp.ReLU(tp.Reshape(m.PosMap1.B, 1, 1, h))) // (1, 1, H)
		slot0 = tp.Add(slot0, z)                                              // (B, 1, H)
	}
	x, mask, pos := m.visual(tp, im, slot0)
	return meanGlobal(tp, x, mask, pos)
}

// EncodeTexts runs the textual pipeline; the global vector is the
// normalised mean of the word vectors.
func (m *TERAN) EncodeTexts(tp *tensor.Tape, tx Texts) *Encoded {
	x := m.textual(tp, tx)
	return meanGlobal(tp, x, tx.Align, alignedWords(tx))
}

// visual is the visual pipeline with the given slot 0 (B, 1, Hidden): it
// returns the normalised vectors (B, 1+R, E), the alignment mask (slot 0
// and padding excluded) and the region index of each slot.
func (m *TERAN) visual(tp *tensor.Tape, im Images, slot0 *tensor.Tensor) (x, mask *tensor.Tensor, pos []int32) {
	b, r := im.Feat.Shape[0], im.Feat.Shape[1]
	im = m.norm.apply(tp, im)
	x = im.Feat
	if m.cfg.ImageModel.PosEncoding == "concat-and-process" {
		boxes := im.Boxes
		if boxes == nil {
			boxes = tensor.New(b, r, 5)
		}
		x = tp.Concat(2, x, boxes) // (B, R, D+5)
	}
	x = m.PosMap2.Forward(tp, tp.ReLU(m.PosMap1.Forward(tp, x))) // (B, R, H)
	x = tp.Concat(1, slot0, x)                                   // (B, 1+R, H)
	valid := tensor.New(b, 1+r)
	mask = tensor.New(b, 1+r)
	pos = make([]int32, b*(1+r))
	for i := 0; i < b; i++ {
		valid.Data[i*(1+r)] = 1
		pos[i*(1+r)] = -1 // slot 0 never aligns
		for j := 0; j < r; j++ {
			v := float32(1)
			if im.Valid != nil {
				v = im.Valid.Data[i*r+j]
			}
			valid.Data[i*(1+r)+1+j] = v
			mask.Data[i*(1+r)+1+j] = v
			pos[i*(1+r)+1+j] = int32(j)
			if v == 0 {
				pos[i*(1+r)+1+j] = -1
			}
		}
	}
	x = m.ImgEnc.Forward(tp, x, valid)                          // (B, 1+R, H)
	x = m.ImgFinal.Forward(tp, m.ImgProj.Forward(tp, x), valid) // (B, 1+R, E)
	return tp.L2Normalize(x, 1e-12), mask, pos
}

// textual is the textual pipeline: normalised word vectors (C, T, E).
func (m *TERAN) textual(tp *tensor.Tape, tx Texts) *tensor.Tensor {
	x := m.Text.Forward(tp, tx.IDs, tx.Valid, tx.Lengths)          // (C, T, W)
	x = m.TxtFinal.Forward(tp, m.CapProj.Forward(tp, x), tx.Valid) // (C, T, E)
	return tp.L2Normalize(x, 1e-12)
}

// alignedWords returns the caption word index of every token that takes
// part in the alignment, -1 elsewhere.
func alignedWords(tx Texts) []int32 {
	pos := make([]int32, len(tx.Words))
	for i, w := range tx.Words {
		pos[i] = -1
		if tx.Align.Data[i] != 0 {
			pos[i] = w
		}
	}
	return pos
}

// meanGlobal wraps vectors x (N, L, E) with their mask, taking as global
// vector the normalised mean of the masked vectors.
func meanGlobal(tp *tensor.Tape, x, mask *tensor.Tensor, pos []int32) *Encoded {
	n, l := x.Shape[0], x.Shape[1]
	m3 := tensor.FromData(mask.Data, n, l, 1)
	sum := tp.Sum(tp.Mul(x, m3), false, 1) // (N, E)
	return &Encoded{Vecs: x, Mask: mask, Pos: pos, Global: tp.L2Normalize(sum, 1e-12)}
}

// slotZero returns the vectors at position 0 (N, E): the I-CLS/T-CLS
// vectors of TERN.
func slotZero(tp *tensor.Tape, x *tensor.Tensor) *tensor.Tensor {
	n, e := x.Shape[0], x.Shape[2]
	return tp.Reshape(tp.Narrow(x, 1, 0, 1), n, e)
}

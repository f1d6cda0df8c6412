package model

import (
	"context"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/tensor"
	"github.com/xmr-project/xmr/text"
)

// ImagesOf gathers images idx of regions into a model input batch: features
// (B, R, D), box codes (B, R, 5) and the valid-region mask (B, R).
func ImagesOf(reg *data.Regions, idx []int) Images {
	b, r, d := len(idx), reg.R, reg.D
	feat := tensor.New(b, r, d)
	boxes := tensor.New(b, r, 5)
	valid := tensor.New(b, r)
	for k, i := range idx {
		copy(feat.Data[k*r*d:(k+1)*r*d], reg.Image(i))
		n := reg.NumRegions(i)
		for j := 0; j < n; j++ {
			valid.Data[k*r+j] = 1
			bc := reg.Box5(i, j)
			copy(boxes.Data[(k*r+j)*5:], bc[:])
		}
	}
	return Images{Feat: feat, Boxes: boxes, Valid: valid}
}

// TextsOf tokenises captions into a model input batch, and returns the
// tokenizer's batch too (for mapping tokens back to words).
func (m *Model) TextsOf(captions []string) (Texts, *text.Batch) {
	b := m.Tok.EncodeBatch(captions, text.EncodeOptions{MaxLen: m.Cfg.Dataset.MaxCaptionTokens})
	return Texts{
		IDs:     b.IDs,
		Valid:   tensor.FromData(b.FloatMask(), b.B, b.T),
		Align:   tensor.FromData(alignMask(m.Tok, b, m.Cfg.Model.ExcludeStopwords), b.B, b.T),
		Lengths: b.Lens,
	}, b
}

// EncodeBatchSize is how many images or captions inference encodes at once.
const EncodeBatchSize = 128

// EncodeRegions encodes every image of reg without a tape into a Bank.
func (m *Model) EncodeRegions(ctx context.Context, reg *data.Regions) (*Bank, error) {
	bank := &Bank{}
	for lo := 0; lo < reg.N; lo += EncodeBatchSize {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		idx := make([]int, 0, EncodeBatchSize)
		for i := lo; i < min(lo+EncodeBatchSize, reg.N); i++ {
			idx = append(idx, i)
		}
		var err error
		var e *Embedded
		if err = tensor.Try(func() { e = m.EncodeImages(nil, ImagesOf(reg, idx)) }); err != nil {
			return nil, err
		}
		bank.Append(BankOf(e))
	}
	return bank, nil
}

// EncodeCaptions encodes captions without a tape into a Bank; it also
// returns the tokenizer batches (EncodeBatchSize captions each), which map
// tokens back to caption words.
func (m *Model) EncodeCaptions(ctx context.Context, captions []string) (*Bank, []*text.Batch, error) {
	bank := &Bank{}
	var batches []*text.Batch
	for lo := 0; lo < len(captions); lo += EncodeBatchSize {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		tx, tb := m.TextsOf(captions[lo:min(lo+EncodeBatchSize, len(captions))])
		var e *Embedded
		if err := tensor.Try(func() { e = m.EncodeTexts(nil, tx) }); err != nil {
			return nil, nil, err
		}
		bank.Append(BankOf(e))
		batches = append(batches, tb)
	}
	return bank, batches, nil
}

// ScoreMode is the scoring that Similarity uses at inference: "global" for
// TERN, the alignment pooling for TERAN.
func (m *Model) ScoreMode() string {
	if m.Cfg.Model.Name == "tern" {
		return "global"
	}
	return m.Cfg.Training.AlignmentMode
}

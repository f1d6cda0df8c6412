package eval

import (
	"fmt"

	"github.com/xmr-project/xmr/model"
)

// QueryBank is a bank of queries that are not about the split, such as
// captions and images of the training split: how high an item scores for
// them measures how much of a "hub" it is, an item that many queries
// rank high whatever they say. EvaluateModels subtracts each item's
// offset under the bank (model.BankOffset, an inverted softmax) from its
// fused scores (docs/eval.md).
type QueryBank struct {
	// Captions are the bank's captions: every image's offset, which
	// text-to-image ranking subtracts, comes from its scores for them.
	Captions []string
	// Images are the bank's images as each model reads them (one a model,
	// as ModelOptions.Images): every caption's offset, which
	// image-to-text ranking subtracts, comes from its scores for them.
	// Empty: the captions keep their scores.
	Images []model.ImageSource
	// Beta is the inverse temperature per unit of standardised score
	// (model.DefaultBankBeta when 0): the fused scores are divided by the
	// weights' sum first.
	Beta float64
}

// beta returns b.Beta, or the default.
func (b *QueryBank) beta() float64 {
	if b.Beta > 0 {
		return b.Beta
	}
	return model.DefaultBankBeta
}

// check refuses a bank that cannot go with n models.
func (b *QueryBank) check(models int, weights []float32) error {
	if len(b.Captions) == 0 && len(b.Images) == 0 {
		return fmt.Errorf("evaluate: the query bank is empty")
	}
	if len(b.Images) > 0 && len(b.Images) != models {
		return fmt.Errorf("evaluate: the query bank's images are read by %d models, want one a model (%d)", len(b.Images), models)
	}
	for k, src := range b.Images {
		if src == nil || src.Len() == 0 {
			return fmt.Errorf("evaluate: model %d's bank images: none", k+1)
		}
		if src.Len() != b.Images[0].Len() {
			return fmt.Errorf("evaluate: model %d reads %d bank images, model 1 %d: want the same images", k+1, src.Len(), b.Images[0].Len())
		}
	}
	if weights == nil && models > 1 {
		return fmt.Errorf("evaluate: a query bank normalises a fusion (weights) or one model, not an average of %d", models)
	}
	if !(b.Beta >= 0) {
		return fmt.Errorf("evaluate: query bank beta %v: want > 0", b.Beta)
	}
	return nil
}

// ApplyBank subtracts a query bank's offsets from the fusion f of models
// with these weights: caps (one a model: the split's images x the bank's
// captions) gives each image's offset, subtracted from its row of
// f.ByCaption, and ims (one a model: the bank's images x the split's
// captions) each caption's, subtracted from its column of f.ByImage;
// either may be nil. The bank's scores are fused as the split's are
// (Fuse), and beta is per unit of standardised score: the offsets take
// beta over the weights' sum.
func ApplyBank(f *Fused, caps, ims []*Matrix, weights []float32, beta float64) error {
	var sum float64
	for _, w := range weights {
		sum += float64(w)
	}
	var fc, fi *Fused
	var err error
	if len(caps) > 0 && caps[0] != nil {
		if fc, err = Fuse(caps, weights); err != nil {
			return fmt.Errorf("query bank's captions: %w", err)
		}
	}
	if len(ims) > 0 && ims[0] != nil {
		if fi, err = Fuse(ims, weights); err != nil {
			return fmt.Errorf("query bank's images: %w", err)
		}
	}
	return applyOffsets(f, fc, fi, beta/sum)
}

// applyOffsets subtracts the offsets of the fused bank scores captions
// (the split's images x the bank's captions) and images (the bank's images
// x the split's captions) from f, at inverse temperature beta per unit of
// f's scores; either may be nil.
func applyOffsets(f *Fused, captions, images *Fused, beta float64) error {
	if captions != nil {
		m := captions.ByCaption
		if m.Rows != f.ByCaption.Rows {
			return fmt.Errorf("query bank: %d images scored by the bank's captions, the split has %d", m.Rows, f.ByCaption.Rows)
		}
		for i := 0; i < m.Rows; i++ {
			off := model.BankOffset(m.Row(i), beta)
			row := f.ByCaption.Row(i)
			for j := range row {
				row[j] -= off
			}
		}
	}
	if images != nil {
		m := images.ByImage
		if m.Cols != f.ByImage.Cols {
			return fmt.Errorf("query bank: %d captions scored by the bank's images, the split has %d", m.Cols, f.ByImage.Cols)
		}
		acc := model.NewBankAccumulator(m.Cols, beta)
		for i := 0; i < m.Rows; i++ {
			acc.Add(m.Row(i))
		}
		off := acc.Offsets()
		for i := 0; i < f.ByImage.Rows; i++ {
			row := f.ByImage.Row(i)
			for j := range row {
				row[j] -= off[j]
			}
		}
	}
	return nil
}

// PickImages returns the images of src numbered idx, in that order, as an
// image source (a bank of images spread over a split, say).
func PickImages(src model.ImageSource, idx []int) model.ImageSource {
	return picked{src: src, idx: idx}
}

// picked is PickImages' source.
type picked struct {
	src model.ImageSource
	idx []int
}

func (p picked) Len() int                 { return len(p.idx) }
func (p picked) Dims() (regions, dim int) { return p.src.Dims() }
func (p picked) Image(i int) []float32    { return p.src.Image(p.idx[i]) }
func (p picked) NumRegions(i int) int     { return p.src.NumRegions(p.idx[i]) }
func (p picked) Box5(i, r int) [5]float32 { return p.src.Box5(p.idx[i], r) }

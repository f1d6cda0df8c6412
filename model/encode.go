package model

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/xmr-project/xmr/tensor"
	"github.com/xmr-project/xmr/text"
)

// ImageSource is a collection of images as region features: what the image
// encoders read. data.Regions implements it; so can an index or a user's
// own features.
type ImageSource interface {
	// Len is the number of images.
	Len() int
	// Dims returns the number of region slots per image and the width of
	// a region's features.
	Dims() (regions, dim int)
	// Image returns image i's features: regions*dim floats, slot after
	// slot.
	Image(i int) []float32
	// NumRegions returns how many of image i's slots are real regions
	// (the first ones); the rest is padding.
	NumRegions(i int) int
	// Box5 returns the spatial code [x1, y1, x2, y2, area] of region slot
	// r of image i, normalised to [0, 1]; zero when unknown.
	Box5(i, r int) [5]float32
}

// SliceImages returns images lo..hi-1 of src as an ImageSource.
func SliceImages(src ImageSource, lo, hi int) ImageSource { return imageSlice{src, lo, hi} }

// imageSlice is images lo..hi-1 of an ImageSource.
type imageSlice struct {
	src    ImageSource
	lo, hi int
}

func (s imageSlice) Len() int                 { return s.hi - s.lo }
func (s imageSlice) Dims() (int, int)         { return s.src.Dims() }
func (s imageSlice) Image(i int) []float32    { return s.src.Image(s.lo + i) }
func (s imageSlice) NumRegions(i int) int     { return s.src.NumRegions(s.lo + i) }
func (s imageSlice) Box5(i, r int) [5]float32 { return s.src.Box5(s.lo+i, r) }

// ImageBatch gathers images idx of src into an encoder batch: features
// (B, R, D), box codes (B, R, 5) and the valid-region mask (B, R).
func ImageBatch(src ImageSource, idx []int) Images {
	r, d := src.Dims()
	b := len(idx)
	feat := tensor.New(b, r, d)
	boxes := tensor.New(b, r, 5)
	valid := tensor.New(b, r)
	for k, i := range idx {
		copy(feat.Data[k*r*d:(k+1)*r*d], src.Image(i))
		for j := 0; j < src.NumRegions(i); j++ {
			valid.Data[k*r+j] = 1
			bc := src.Box5(i, j)
			copy(boxes.Data[(k*r+j)*5:], bc[:])
		}
	}
	return Images{Feat: feat, Boxes: boxes, Valid: valid}
}

// TextBatch tokenises captions with m's tokenizer into an encoder batch,
// truncated to the model's MaxCaptionTokens, with the alignment mask of the
// model's config (no start/end tokens; no stop words with
// exclude-stopwords).
func TextBatch(m Model, captions []string) Texts {
	cfg := m.Config()
	tok := m.Tokenizer()
	b := tok.EncodeBatch(captions, text.EncodeOptions{MaxLen: cfg.MaxCaptionTokens})
	return Texts{
		IDs:     b.IDs,
		Valid:   tensor.FromData(b.FloatMask(), b.B, b.T),
		Align:   tensor.FromData(alignMask(tok, b, cfg.Model.ExcludeStopwords), b.B, b.T),
		Words:   b.Words,
		Lengths: b.Lens,
	}
}

// EncodeOptions tune EncodeImages and EncodeTexts. The zero value (and nil)
// gives the defaults.
type EncodeOptions struct {
	// BatchSize is how many items are encoded at once; 0 means
	// DefaultEncodeBatch.
	BatchSize int
	// Progress, if not nil, is called after each batch with the number of
	// items done and the total.
	Progress func(done, total int)
}

// DefaultEncodeBatch is how many images or captions inference encodes at
// once by default.
const DefaultEncodeBatch = 128

func (o *EncodeOptions) batch() int {
	if o == nil || o.BatchSize <= 0 {
		return DefaultEncodeBatch
	}
	return o.BatchSize
}

func (o *EncodeOptions) progress(done, total int) {
	if o != nil && o.Progress != nil {
		o.Progress(done, total)
	}
}

// EncodeImages encodes every image of src with m, without a tape. The
// features must be as wide as the model's image-model.feat-dim.
func EncodeImages(ctx context.Context, m Model, src ImageSource, o *EncodeOptions) (*Embeddings, error) {
	_, d := src.Dims()
	if want := m.Config().ImageModel.FeatDim; d != want {
		return nil, fmt.Errorf("encode images: the %s model reads %d-d region features, the images have %d", m.Name(), want, d)
	}
	n, bs := src.Len(), o.batch()
	out := &Embeddings{}
	idx := make([]int, 0, bs)
	for lo := 0; lo < n; lo += bs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		idx = idx[:0]
		for i := lo; i < min(lo+bs, n); i++ {
			idx = append(idx, i)
		}
		var enc *Encoded
		if err := tensor.Try(func() { enc = m.EncodeImages(nil, ImageBatch(src, idx)) }); err != nil {
			return nil, fmt.Errorf("encode images %d-%d: %w", lo, lo+len(idx)-1, err)
		}
		if err := out.Append(enc.Embeddings()); err != nil {
			return nil, err
		}
		o.progress(lo+len(idx), n)
	}
	return out, nil
}

// EncodeTexts encodes captions with m, without a tape. Captions are
// batched by length (the shortest first), so that a batch pads its
// captions to a length near their own, not to the longest of any caption
// near them in the list: on Flickr8k's captions, half the tokens a batch
// in the list's order would encode are padding. The embeddings are in the
// order of captions, each caption's as a batch of its own gives it within
// rounding (padding is masked; the products' shapes differ). The captions
// are tokenised twice, once for their lengths: a few milliseconds for
// thousands of captions, against seconds to encode them.
func EncodeTexts(ctx context.Context, m Model, captions []string, o *EncodeOptions) (*Embeddings, error) {
	n, bs := len(captions), o.batch()
	order := byLength(m, captions, bs)
	sorted := &Embeddings{}
	batch := make([]string, 0, min(bs, n))
	for lo := 0; lo < n; lo += bs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hi := min(lo+bs, n)
		batch = batch[:0]
		for k := lo; k < hi; k++ {
			batch = append(batch, captions[at(order, k)])
		}
		var enc *Encoded
		if err := tensor.Try(func() { enc = m.EncodeTexts(nil, TextBatch(m, batch)) }); err != nil {
			if hi-lo == 1 {
				return nil, fmt.Errorf("encode caption %d: %w", at(order, lo), err)
			}
			return nil, fmt.Errorf("encode a batch of %d captions (caption %d among them): %w", hi-lo, at(order, lo), err)
		}
		if err := sorted.Append(enc.Embeddings()); err != nil {
			return nil, err
		}
		o.progress(hi, n)
	}
	if order == nil {
		return sorted, nil
	}
	return sorted.Unpermute(order), nil
}

// at returns order[k], or k when order is nil (the identity).
func at(order []int, k int) int {
	if order == nil {
		return k
	}
	return order[k]
}

// byLength returns the captions' indices ordered by their number of
// tokens (ties in the list's order), or nil when they fit one batch of bs
// or are in that order already.
func byLength(m Model, captions []string, bs int) []int {
	if len(captions) <= bs {
		return nil
	}
	lens := m.Tokenizer().EncodeBatch(captions, text.EncodeOptions{MaxLen: m.Config().MaxCaptionTokens}).Lens
	order := make([]int, len(captions))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(lens[a], lens[b]) })
	for i, j := range order {
		if i != j {
			return order
		}
	}
	return nil
}

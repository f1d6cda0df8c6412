package model

import (
	"context"
	"fmt"
	"strings"
)

// Compat names a scoring convention: xmr's own (CompatNone, the papers'
// definitions, see score.go) or that of another implementation, whose
// figures an imported checkpoint can then reproduce.
type Compat string

// The conventions.
const (
	// CompatNone is xmr's own scoring.
	CompatNone Compat = ""
	// CompatOfficial scores TERAN's alignment poolings as the official
	// evaluation does (mesnico/TERAN: evaluation.py's encode_data, then
	// models/loss.py's AlignmentContrastiveLoss with
	// return_similarity_mat). It differs from xmr's scoring in three ways:
	//
	//   - its mask length is the caption's length minus 3, which drops
	//     [CLS], [SEP] and also the last token before [SEP]: here each
	//     caption's last vector is left out;
	//   - encode_data pads every image to 37 slots (slot 0 and 36
	//     regions) and the masked slots of the alignment matrix are set to
	//     0 before the max over regions, so on an image of fewer than 36
	//     regions each word's term of MrSw is at least 0;
	//   - it pads every caption to 88 tokens, of which 85 are scored
	//     ([CLS] and the last two positions are cut), so on a caption of
	//     fewer than 85 scored tokens each region's max over words (MwSr,
	//     and Symm's MwSr half) is at least 0.
	//
	// MrAvgw divides MrSw by the number of scored tokens, as the official
	// MrAVGw does. The official arrays cannot hold an image of more than
	// 36 regions nor a caption of more than 88 tokens, and its mask is
	// not defined for a caption with no token ([CLS] [SEP]):
	// CheckCompat refuses those.
	CompatOfficial Compat = "official"
)

// The official TERAN evaluation's padded sizes, as CompatOfficial scores
// them.
const (
	// OfficialRegionSlots is how many region slots each image has in the
	// official evaluation: 37 slots, slot 0 cut before the alignment.
	OfficialRegionSlots = 36
	// OfficialCaptionTokens is how many tokens each caption has in the
	// official evaluation, [CLS] and [SEP] included.
	OfficialCaptionTokens = 88
	// OfficialWordSlots is how many of them are scored: all but [CLS] and
	// the last two.
	OfficialWordSlots = OfficialCaptionTokens - 3
)

// compats lists the conventions ParseCompat accepts by name.
var compats = []Compat{CompatOfficial}

// ParseCompat accepts "official" in any letter case, and "" or "none"
// for CompatNone; anything else is an error listing the valid names.
func ParseCompat(s string) (Compat, error) {
	if s == "" || strings.EqualFold(s, "none") {
		return CompatNone, nil
	}
	for _, c := range compats {
		if strings.EqualFold(s, string(c)) {
			return c, nil
		}
	}
	return "", fmt.Errorf("unknown compatibility %q (want official, or none)", s)
}

// String returns the convention's name ("none" for CompatNone).
func (c Compat) String() string {
	if c == CompatNone {
		return "none"
	}
	return string(c)
}

// CheckCompat says why images and texts cannot be scored with s under
// convention c, if they cannot. Under CompatOfficial, s must be an
// alignment pooling, every image at most OfficialRegionSlots regions,
// every caption at least one vector (two for MrAvgw, which divides by the
// scored ones) and at most OfficialCaptionTokens-2, a caption's vectors
// being its tokens between [CLS] and [SEP]. Indices in the errors count
// from the first item of images and texts.
func CheckCompat(images, texts *Embeddings, s Scoring, c Compat) error {
	switch c {
	case CompatNone:
		return nil
	case CompatOfficial:
	default:
		return fmt.Errorf("score: unknown compatibility %q", string(c))
	}
	if !s.Alignment() {
		return fmt.Errorf("score: compatibility %s applies to the alignment poolings (MrSw, MwSr, Symm, MrAvgw) of the official TERAN evaluation, not to %s scoring", c, s)
	}
	for i := 0; i < images.Len(); i++ {
		if n := images.Count(i); n > OfficialRegionSlots {
			return fmt.Errorf("score: image %d has %d regions; the official TERAN evaluation holds at most %d (it pads images to %d slots, slot 0 included)", i, n, OfficialRegionSlots, OfficialRegionSlots+1)
		}
	}
	least := 1
	if s == MrAvgw {
		least = 2
	}
	for t := 0; t < texts.Len(); t++ {
		n := texts.Count(t)
		switch {
		case n < least:
			return fmt.Errorf("score: caption %d has %d scored tokens; the official TERAN evaluation's %s needs at least %d between [CLS] and [SEP] (it drops the last one, and its mask is not defined for an empty caption)", t, n, s, least)
		case n > OfficialCaptionTokens-2:
			return fmt.Errorf("score: caption %d has %d tokens between [CLS] and [SEP]; the official TERAN evaluation holds at most %d (it pads captions to %d tokens, [CLS] and [SEP] included)", t, n, OfficialCaptionTokens-2, OfficialCaptionTokens)
		}
	}
	return nil
}

// ScoreMatrixCompat is ScoreMatrix under convention c: with CompatNone it
// is ScoreMatrix; with CompatOfficial it scores as the official TERAN
// evaluation does (see CompatOfficial), after CheckCompat.
func ScoreMatrixCompat(ctx context.Context, images, texts *Embeddings, s Scoring, c Compat) ([]float32, error) {
	if err := CheckCompat(images, texts, s, c); err != nil {
		return nil, err
	}
	return scoreMatrix(ctx, images, texts, s, c == CompatOfficial)
}

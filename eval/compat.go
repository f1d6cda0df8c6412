package eval

import (
	"fmt"
	"strings"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/text"
)

// CheckCompat says why model m, scoring with s, cannot be evaluated on
// split under convention c, if it cannot; it runs before any encoding, so
// that a refusal costs nothing. model.CompatOfficial (the official
// TERAN evaluation's scores) needs:
//
//   - a TERAN model with a BERT text model, scored with an alignment
//     pooling (the official evaluation's AlignmentContrastiveLoss);
//   - no model.exclude-stopwords: the official code drops stop words
//     token by token, xmr word by word, and xmr does not reproduce the
//     former;
//   - images of at most model.OfficialRegionSlots regions, and every
//     caption whole: at most model.OfficialCaptionTokens tokens with [CLS]
//     and [SEP] (the official arrays hold no more), and not cut by the
//     model's max-caption-tokens (the official code cuts none).
//
// The embeddings are checked again when scored (model.CheckCompat, which
// also refuses a caption with no token to score).
func CheckCompat(m model.Model, s model.Scoring, split *data.Split, c model.Compat) error {
	switch c {
	case model.CompatNone:
		return nil
	case model.CompatOfficial:
	default:
		return fmt.Errorf("unknown compatibility %q", string(c))
	}
	cfg := m.Config()
	switch {
	case m.Name() != "teran":
		return fmt.Errorf("compatibility %s reproduces the official TERAN evaluation, which scores TERAN models; this is a %s model", c, m.Name())
	case cfg.TextModel.Name != "bert":
		return fmt.Errorf("compatibility %s: the official TERAN evaluation counts BERT's tokens ([CLS] ... [SEP]); this model's text model is %s", c, cfg.TextModel.Name)
	case !s.Alignment():
		return fmt.Errorf("compatibility %s applies to the alignment poolings (MrSw, MwSr, Symm, MrAvgw) of the official TERAN evaluation, not to %s scoring", c, s)
	case cfg.Model.ExcludeStopwords:
		return fmt.Errorf("compatibility %s: the model excludes stop words (model.exclude-stopwords), which the official code does token by token and xmr word by word; xmr cannot reproduce its scores", c)
	}
	for i := 0; i < split.NumImages(); i++ {
		if n := split.Images.NumRegions(i); n > model.OfficialRegionSlots {
			return fmt.Errorf("compatibility %s: image %d (%s) of split %s has %d regions; the official TERAN evaluation holds at most %d", c, i, split.ID(i), split.Name, n, model.OfficialRegionSlots)
		}
	}
	captions := split.Captions
	const chunk = 512
	for lo := 0; lo < len(captions); lo += chunk {
		hi := min(lo+chunk, len(captions))
		b := m.Tokenizer().EncodeBatch(captions[lo:hi], text.EncodeOptions{})
		for k, n := range b.Lens {
			i := lo + k
			switch {
			case n > model.OfficialCaptionTokens:
				return fmt.Errorf("compatibility %s: caption %d (%q) has %d tokens with [CLS] and [SEP]; the official TERAN evaluation holds at most %d", c, i, short(captions[i]), n, model.OfficialCaptionTokens)
			case cfg.MaxCaptionTokens > 0 && n > cfg.MaxCaptionTokens:
				return fmt.Errorf("compatibility %s: caption %d (%q) has %d tokens with [CLS] and [SEP], and the model cuts captions at %d (max-caption-tokens); the official code cuts none", c, i, short(captions[i]), n, cfg.MaxCaptionTokens)
			}
		}
	}
	return nil
}

// short returns s cut to about 60 bytes for an error message.
func short(s string) string {
	if len(s) <= 60 {
		return s
	}
	cut := strings.LastIndexByte(s[:60], ' ')
	if cut < 20 {
		cut = 60
	}
	return s[:cut] + "..."
}

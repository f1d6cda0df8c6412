package eval

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/model"
)

// ModelOptions configure EvaluateModels.
type ModelOptions struct {
	// Options are the protocol, relevance matrices and NDCG settings;
	// CaptionsPerImage is taken from the split.
	Options
	// Scoring overrides the models' own scorings when set (e.g. "TERN MrSw
	// Test" scores a TERN with model.MrSw).
	Scoring model.Scoring
	// Grounding is the split's word-region ground truth (see
	// data.LoadGrounding); with it, a single model's word-region alignment
	// accuracy is measured (when it has region and word vectors: not SEAM).
	Grounding []data.Grounding
	// Encode tunes the encoding (batch size, progress).
	Encode *model.EncodeOptions
}

// ModelResult is what EvaluateModels measured and the material behind it.
type ModelResult struct {
	// Report holds every metric, the alignment accuracy included.
	Report *Report
	// Sims is the similarity matrix (images x captions), averaged over
	// the models of an ensemble.
	Sims *Matrix
	// Images and Texts are the last model's embeddings of the split.
	Images, Texts *model.Embeddings
}

// EvaluateModels encodes a split with each model, scores every image
// against every caption, averages the similarity matrices (an ensemble when
// there are several models) and evaluates the result with the papers'
// protocol. This is the one evaluation path of xmr: validation during
// training, xmr eval and the demo all call it.
func EvaluateModels(ctx context.Context, models []model.Model, split *data.Split, o ModelOptions) (*ModelResult, error) {
	if len(models) == 0 {
		return nil, fmt.Errorf("evaluate: no model")
	}
	res := &ModelResult{}
	var sum []float32
	for _, m := range models {
		imgs, err := model.EncodeImages(ctx, m, split.Images, o.Encode)
		if err != nil {
			return nil, fmt.Errorf("split %s: %w", split.Name, err)
		}
		txts, err := model.EncodeTexts(ctx, m, split.Captions, o.Encode)
		if err != nil {
			return nil, fmt.Errorf("split %s: %w", split.Name, err)
		}
		s := m.Scoring()
		if o.Scoring != "" {
			s = o.Scoring
		}
		sims, err := model.ScoreMatrix(ctx, imgs, txts, s)
		if err != nil {
			return nil, err
		}
		if sum == nil {
			sum = sims
		} else {
			for i, v := range sims {
				sum[i] += v
			}
		}
		res.Images, res.Texts = imgs, txts
	}
	for i := range sum {
		sum[i] /= float32(len(models))
	}
	res.Sims = &Matrix{Rows: split.NumImages(), Cols: split.NumCaptions(), Data: sum}
	opts := o.Options
	opts.CaptionsPerImage = split.CapsPerImage
	rep, err := Evaluate(res.Sims, opts)
	if err != nil {
		return nil, err
	}
	if len(o.Grounding) > 0 && len(models) == 1 && len(res.Images.Vecs) > 0 {
		acc, n, err := AlignmentAccuracy(AlignmentItems(res.Images, res.Texts, o.Grounding))
		if err != nil {
			return nil, err
		}
		rep.Alignment = &AlignmentScore{Accuracy: acc, Words: n}
	}
	res.Report = rep
	return res, nil
}

// AlignmentScore is the word-region alignment accuracy of a model on
// grounded data.
type AlignmentScore struct {
	// Accuracy is the share (in [0, 1]) of grounded words whose best
	// region is one of their correct regions.
	Accuracy float64 `json:"accuracy"`
	// Words is the number of grounded words counted.
	Words int `json:"words"`
}

// AlignmentItems builds the word-region alignment accuracy items of every
// grounded caption from the embeddings of the split's images and captions:
// each annotated word's first token must point to one of its object's
// regions.
func AlignmentItems(images, texts *model.Embeddings, grounding []data.Grounding) []AlignItem {
	var items []AlignItem
	for c, g := range grounding {
		if c >= texts.Len() || g.Image < 0 || g.Image >= images.Len() {
			continue
		}
		regions := images.ItemPos(g.Image)
		words := texts.ItemPos(c)
		it := AlignItem{Scores: model.WordAlignments(images, g.Image, texts, c), Regions: len(regions)}
		if it.Regions == 0 {
			continue
		}
		for _, w := range g.Words {
			tok := slices.Index(words, int32(w.Index))
			if tok < 0 {
				continue // truncated away, or not aligned (a stop word)
			}
			var correct []int
			for _, r := range w.Correct() {
				if k := slices.Index(regions, int32(r)); k >= 0 {
					correct = append(correct, k)
				}
			}
			if len(correct) == 0 {
				continue // its regions are not among the image's
			}
			it.Words = append(it.Words, AnnotatedWord{Token: tok, Correct: correct})
		}
		items = append(items, it)
	}
	return items
}

// LogImageInput says in the log when m reads one global feature vector per
// image (SEAM) but split holds several region features per image: the
// model then encodes the mean of each image's valid regions, which is not
// the global CNN feature of its paper.
func LogImageInput(m model.Model, split *data.Split) {
	if !m.Config().GlobalImages() || split.Global || split.Images.R <= 1 {
		return
	}
	slog.Info("image features: the model reads one global feature per image; this split has region features, so the mean of each image's valid regions stands in",
		"model", m.Name(), "split", split.Name, "regions", split.Images.R)
}

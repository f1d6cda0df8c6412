package eval

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/progress"
)

// ModelOptions configure EvaluateModels.
type ModelOptions struct {
	// Options are the protocol, relevance matrices and NDCG settings;
	// CaptionsPerImage is taken from the split.
	Options
	// Scoring overrides the models' own scorings when set (e.g. "TERN MrSw
	// Test" scores a TERN with model.MrSw).
	Scoring model.Scoring
	// Compat, when set, scores under that convention rather than xmr's:
	// model.CompatOfficial reproduces the official TERAN evaluation's
	// scores (see CheckCompat for the models and splits it accepts).
	Compat model.Compat
	// Grounding is the split's word-region ground truth (see
	// data.LoadGrounding); with it, a single model's word-region alignment
	// accuracy is measured (when it has region and word vectors: not SEAM).
	Grounding []data.Grounding
	// Encode tunes the encoding (batch size, progress).
	Encode *model.EncodeOptions
	// Weights, one a model, fuse the models' similarities (Fuse: each
	// query's scores standardised, then weighted and summed) rather than
	// averaging them.
	Weights []float32
	// Images, one a model where set (nil: the split's), is the image
	// source each model reads: the regions made by a model's own
	// fine-tuned detector, say, or a global-vector model's copy of the
	// split. Every source must hold the split's images in its order.
	Images []model.ImageSource
	// Bank, when set, normalises the fusion (Weights), or one model's
	// scores standardised as a fusion of one, with a bank of queries
	// (QueryBank).
	Bank *QueryBank
	// Progress shows progress bars (or log lines off a terminal, see
	// package progress) while the split is encoded and scored.
	Progress bool
}

// ModelResult is what EvaluateModels measured and the material behind it.
type ModelResult struct {
	// Report holds every metric, the alignment accuracy included.
	Report *Report
	// Sims is the similarity matrix (images x captions), averaged over
	// the models of an ensemble; nil for a fusion (Weights).
	Sims *Matrix
	// Fused is the fusion's similarity (Weights), else nil.
	Fused *Fused
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
	if err := checkProtocol(o.Protocol, split.NumImages(), o.foldImages, "split "+split.Name); err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	if err := data.CheckGrounding(o.Grounding, split); err != nil {
		return nil, fmt.Errorf("evaluate: grounding: %w", err)
	}
	if err := checkSources(models, split, o); err != nil {
		return nil, err
	}
	weights := o.Weights
	if o.Bank != nil {
		if err := o.Bank.check(len(models), weights); err != nil {
			return nil, err
		}
		if weights == nil {
			weights = []float32{1}
		}
	}
	if o.Compat != model.CompatNone {
		for k, m := range models {
			s := m.Scoring()
			if o.Scoring != "" {
				s = o.Scoring
			}
			if err := CheckCompat(m, s, split, o.Compat); err != nil {
				return nil, fmt.Errorf("evaluate: model %d: %w", k+1, err)
			}
		}
	}
	res := &ModelResult{}
	var sum []float32
	var each, bankCaps, bankImgs []*Matrix
	for k, m := range models {
		stage := func(s string) string {
			if len(models) > 1 {
				return fmt.Sprintf("model %d/%d: %s", k+1, len(models), s)
			}
			return s
		}
		var images model.ImageSource = split.Images
		if k < len(o.Images) && o.Images[k] != nil {
			images = o.Images[k]
		}
		imgs, err := encodeImages(ctx, m, images, o, stage("encode images"))
		if err != nil {
			return nil, fmt.Errorf("split %s: %w", split.Name, err)
		}
		txts, err := encodeTexts(ctx, m, split.Captions, o, stage("encode captions"))
		if err != nil {
			return nil, fmt.Errorf("split %s: %w", split.Name, err)
		}
		s := m.Scoring()
		if o.Scoring != "" {
			s = o.Scoring
		}
		sims, err := scoreMatrix(ctx, imgs, txts, s, o.Compat, o.Progress, stage("score"))
		if err != nil {
			return nil, err
		}
		if o.Bank != nil {
			bc, bi, err := bankScores(ctx, m, o, k, imgs, txts, s, stage)
			if err != nil {
				return nil, fmt.Errorf("split %s: query bank: %w", split.Name, err)
			}
			bankCaps, bankImgs = append(bankCaps, bc), append(bankImgs, bi)
		}
		switch {
		case weights != nil:
			each = append(each, &Matrix{Rows: split.NumImages(), Cols: split.NumCaptions(), Data: sims})
		case sum == nil:
			sum = sims
		default:
			for i, v := range sims {
				sum[i] += v
			}
		}
		res.Images, res.Texts = imgs, txts
	}
	opts := o.Options
	opts.CaptionsPerImage = split.CapsPerImage
	var rep *Report
	var err error
	if weights != nil {
		if res.Fused, err = Fuse(each, weights); err != nil {
			return nil, fmt.Errorf("evaluate: %w", err)
		}
		if o.Bank != nil {
			if err := ApplyBank(res.Fused, bankCaps, bankImgs, weights, o.Bank.beta()); err != nil {
				return nil, fmt.Errorf("evaluate: %w", err)
			}
		}
		if rep, err = EvaluateFused(res.Fused, opts); err != nil {
			return nil, err
		}
		// Each member alone, as it ranks before the fusion (and without
		// the bank): what each adds is read beside it.
		for k, s := range each {
			r, err := Evaluate(s, opts)
			if err != nil {
				return nil, fmt.Errorf("evaluate: model %d alone: %w", k+1, err)
			}
			rep.Members = append(rep.Members, r.Metrics)
		}
	} else {
		for i := range sum {
			sum[i] /= float32(len(models))
		}
		res.Sims = &Matrix{Rows: split.NumImages(), Cols: split.NumCaptions(), Data: sum}
		rep, err = Evaluate(res.Sims, opts)
	}
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

// bankScores scores model k's encodings of the split (imgs, txts) against
// the query bank: the split's images by the bank's captions, and the
// bank's images by the split's captions (nil without bank images).
func bankScores(ctx context.Context, m model.Model, o ModelOptions, k int, imgs, txts *model.Embeddings, s model.Scoring, stage func(string) string) (caps, ims *Matrix, err error) {
	b := o.Bank
	if len(b.Captions) > 0 {
		bt, err := encodeTexts(ctx, m, b.Captions, o, stage("encode the bank's captions"))
		if err != nil {
			return nil, nil, err
		}
		sc, err := scoreMatrix(ctx, imgs, bt, s, o.Compat, o.Progress, stage("score the bank's captions"))
		if err != nil {
			return nil, nil, err
		}
		caps = &Matrix{Rows: imgs.Len(), Cols: bt.Len(), Data: sc}
	}
	if len(b.Images) > 0 {
		bi, err := encodeImages(ctx, m, b.Images[k], o, stage("encode the bank's images"))
		if err != nil {
			return nil, nil, err
		}
		sc, err := scoreMatrix(ctx, bi, txts, s, o.Compat, o.Progress, stage("score the bank's images"))
		if err != nil {
			return nil, nil, err
		}
		ims = &Matrix{Rows: bi.Len(), Cols: txts.Len(), Data: sc}
	}
	return caps, ims, nil
}

// checkSources refuses weights or image sources that do not go one to one
// with the models, and a source of another length than the split.
func checkSources(models []model.Model, split *data.Split, o ModelOptions) error {
	if o.Weights != nil && len(o.Weights) != len(models) {
		return fmt.Errorf("evaluate: %d weights for %d models: want one a model", len(o.Weights), len(models))
	}
	if len(o.Images) > len(models) {
		return fmt.Errorf("evaluate: %d image sources for %d models", len(o.Images), len(models))
	}
	for k, src := range o.Images {
		if src != nil && src.Len() != split.NumImages() {
			return fmt.Errorf("evaluate: model %d's images: %d, split %s has %d", k+1, src.Len(), split.Name, split.NumImages())
		}
	}
	return nil
}

// encodeImages encodes images with m, with a progress bar named desc when
// o.Progress is set.
func encodeImages(ctx context.Context, m model.Model, images model.ImageSource, o ModelOptions, desc string) (*model.Embeddings, error) {
	eo, finish := encodeProgress(o, desc, images.Len(), "images")
	defer finish()
	return model.EncodeImages(ctx, m, images, eo)
}

// encodeTexts encodes captions with m, with a progress bar named desc when
// o.Progress is set.
func encodeTexts(ctx context.Context, m model.Model, captions []string, o ModelOptions, desc string) (*model.Embeddings, error) {
	eo, finish := encodeProgress(o, desc, len(captions), "captions")
	defer finish()
	return model.EncodeTexts(ctx, m, captions, eo)
}

// encodeProgress returns o.Encode with its Progress hook also advancing a
// progress bar of total units when o.Progress is set, and the function
// that finishes the bar.
func encodeProgress(o ModelOptions, desc string, total int, unit string) (*model.EncodeOptions, func()) {
	if !o.Progress {
		return o.Encode, func() {}
	}
	var eo model.EncodeOptions
	if o.Encode != nil {
		eo = *o.Encode
	}
	bar := progress.New(desc, int64(total), unit)
	done, next := 0, eo.Progress
	eo.Progress = func(d, n int) {
		bar.Add(int64(d - done))
		done = d
		if next != nil {
			next(d, n)
		}
	}
	return &eo, bar.Finish
}

// scoreRows is how many images scoreMatrix scores at once: a multiple of
// model.ScoreMatrix's blocks of 16 images (so that the blocks, and the
// scores, are the same as in one call), and enough blocks to keep every
// core busy.
const scoreRows = 256

// scoreMatrix is model.ScoreMatrixCompat, run scoreRows images at a time
// with a progress bar named desc when withBar is set (training's
// validation, which shows no bar, scores in one call). Global scoring, one
// fast matrix product, always runs at once: a product cut into rows may
// round differently.
func scoreMatrix(ctx context.Context, images, texts *model.Embeddings, s model.Scoring, c model.Compat, withBar bool, desc string) ([]float32, error) {
	ni, nt := images.Len(), texts.Len()
	// Check all of it first, so that errors name the image of the split.
	if err := model.CheckCompat(images, texts, s, c); err != nil {
		return nil, err
	}
	if !withBar || s == model.Global {
		return model.ScoreMatrixCompat(ctx, images, texts, s, c)
	}
	bar := progress.New(desc, int64(ni), "images")
	defer bar.Finish()
	rows := scoreRows
	out := make([]float32, 0, ni*nt)
	for lo := 0; lo < ni; lo += rows {
		hi := min(lo+rows, ni)
		part, err := model.ScoreMatrixCompat(ctx, images.Slice(lo, hi), texts, s, c)
		if err != nil {
			return nil, err
		}
		out = append(out, part...)
		bar.Add(int64(hi - lo))
	}
	return out, nil
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

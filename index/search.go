package index

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/xmr-project/xmr/model"
)

// SearchOptions tune a search. The zero value (and nil) returns the 10
// best results under the model's own scoring.
type SearchOptions struct {
	// K is the number of results (0: 10).
	K int
	// Scoring overrides the model's scoring (e.g. MrSw for a TERN index,
	// whose region and word vectors are indexed too).
	Scoring model.Scoring
	// Explain adds, to each result, every query or caption word's best
	// region and its cosine: the alignment behind the score.
	Explain bool
}

func (o *SearchOptions) k() int {
	if o == nil || o.K <= 0 {
		return 10
	}
	return o.K
}

// Result is one retrieved item.
type Result struct {
	Rank  int     `json:"rank"` // 1 for the best
	Item  int     `json:"item"` // item number in the index
	Score float32 `json:"score"`
	// Image is set for text-to-image results, Caption for image-to-text.
	Image   *ImageRow   `json:"image,omitempty"`
	Caption *CaptionRow `json:"caption,omitempty"`
	// Explain lists the word-region alignments when asked for.
	Explain []Alignment `json:"explain,omitempty"`
}

// Alignment is one caption word's best region in an image.
type Alignment struct {
	Word   string      `json:"word"`
	Region int         `json:"region"`        // region index in the image's features
	Box    *[4]float32 `json:"box,omitempty"` // normalised x1 y1 x2 y2, when known
	Cosine float32     `json:"cosine"`
}

// scoring returns the scoring a search uses.
func (ix *Index) scoring(o *SearchOptions) model.Scoring {
	if o != nil && o.Scoring != "" {
		return o.Scoring
	}
	return ix.man.Model.Scoring
}

// SearchText returns the images that text describes best.
func (ix *Index) SearchText(ctx context.Context, text string, o *SearchOptions) ([]Result, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("search: empty query text")
	}
	m, err := ix.Model()
	if err != nil {
		return nil, err
	}
	q, err := model.EncodeTexts(ctx, m, []string{text}, nil)
	if err != nil {
		return nil, fmt.Errorf("search: encode %q: %w", text, err)
	}
	s := ix.scoring(o)
	if s.Alignment() && q.Count(0) == 0 {
		return nil, fmt.Errorf("search: %q has no word that takes part in the alignment (only stop words or symbols?)", text)
	}
	scores, err := ix.scoreImages(ctx, q, s)
	if err != nil {
		return nil, err
	}
	words := strings.Fields(text)
	var out []Result
	for r, h := range model.TopK(scores, o.k()) {
		res := Result{Rank: r + 1, Item: h.Index, Score: h.Score}
		row, err := ix.cat.image(ctx, h.Index)
		if err != nil {
			return nil, err
		}
		res.Image = &row
		if o != nil && o.Explain {
			seg, i, _ := locate(ix.images, h.Index)
			res.Explain = explain(model.MatchWords(seg.emb, i, q, 0), words, row.Boxes)
		}
		out = append(out, res)
	}
	return out, nil
}

// SearchImage returns the captions that describe the indexed image with
// dataset id imageID best.
func (ix *Index) SearchImage(ctx context.Context, imageID string, o *SearchOptions) ([]Result, error) {
	item, err := ix.cat.imageByExtID(ctx, imageID)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	seg, i, ok := locate(ix.images, item)
	if !ok {
		return nil, fmt.Errorf("search: image %q: item %d is beyond the index's segments", imageID, item)
	}
	q := seg.emb.Slice(i, i+1)
	row, err := ix.cat.image(ctx, item)
	if err != nil {
		return nil, err
	}
	scores, err := ix.scoreCaptions(ctx, q, ix.scoring(o))
	if err != nil {
		return nil, err
	}
	var out []Result
	for r, h := range model.TopK(scores, o.k()) {
		res := Result{Rank: r + 1, Item: h.Index, Score: h.Score}
		cp, err := ix.cat.caption(ctx, h.Index)
		if err != nil {
			return nil, err
		}
		res.Caption = &cp
		if o != nil && o.Explain {
			cseg, c, _ := locate(ix.captions, h.Index)
			res.Explain = explain(model.MatchWords(q, 0, cseg.emb, c), strings.Fields(cp.Text), row.Boxes)
		}
		out = append(out, res)
	}
	return out, nil
}

// scoreImages scores a text query (one item) against every image.
func (ix *Index) scoreImages(ctx context.Context, q *model.Embeddings, s model.Scoring) ([]float32, error) {
	var out []float32
	for _, seg := range ix.images {
		sc, err := model.ScoreMatrix(ctx, seg.emb, q, s) // (items x 1)
		if err != nil {
			return nil, fmt.Errorf("search %s: %w", seg.path, err)
		}
		out = append(out, sc...)
	}
	return out, nil
}

// scoreCaptions scores an image query (one item) against every caption.
func (ix *Index) scoreCaptions(ctx context.Context, q *model.Embeddings, s model.Scoring) ([]float32, error) {
	var out []float32
	for _, seg := range ix.captions {
		sc, err := model.ScoreMatrix(ctx, q, seg.emb, s) // (1 x items)
		if err != nil {
			return nil, fmt.Errorf("search %s: %w", seg.path, err)
		}
		out = append(out, sc...)
	}
	return out, nil
}

// explain names the words of matches and the boxes of their regions.
func explain(matches []model.WordMatch, words []string, boxes [][4]float32) []Alignment {
	out := make([]Alignment, 0, len(matches))
	for _, mw := range matches {
		a := Alignment{Region: mw.Region, Cosine: mw.Cosine}
		if mw.Word < len(words) {
			a.Word = words[mw.Word]
		}
		if mw.Region < len(boxes) {
			b := boxes[mw.Region]
			a.Box = &b
		}
		out = append(out, a)
	}
	return out
}

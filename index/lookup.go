package index

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/xmr-project/xmr/model"
)

// ErrNotFound is wrapped by the errors for an image id or a caption item
// that the index does not hold.
var ErrNotFound = errors.New("not found")

// ErrBadQuery is wrapped by the errors for a query that cannot be
// searched: empty, or without a word that the scoring can align.
var ErrBadQuery = errors.New("bad query")

// CaptionItem is a caption with its item number in the index.
type CaptionItem struct {
	Item int    `json:"item"`
	Text string `json:"text"`
}

// Image returns the catalogue row of the indexed image with dataset id
// imageID.
func (ix *Index) Image(ctx context.Context, imageID string) (ImageRow, error) {
	item, err := ix.cat.imageByExtID(ctx, imageID)
	if err != nil {
		return ImageRow{}, err
	}
	return ix.cat.image(ctx, item)
}

// ImageCaptions returns the indexed captions that describe the image with
// dataset id imageID (its ground truth), in item order.
func (ix *Index) ImageCaptions(ctx context.Context, imageID string) ([]CaptionItem, error) {
	item, err := ix.cat.imageByExtID(ctx, imageID)
	if err != nil {
		return nil, err
	}
	return ix.cat.captionsOf(ctx, item)
}

// Caption returns the catalogue row of caption item n (0 <= n < the
// number of captions).
func (ix *Index) Caption(ctx context.Context, n int) (CaptionRow, error) {
	if _, nc := ix.Len(); n < 0 || n >= nc {
		return CaptionRow{}, fmt.Errorf("no caption %d in the index (it holds captions 0 to %d): %w", n, nc-1, ErrNotFound)
	}
	return ix.cat.caption(ctx, n)
}

// Match is how one caption matches one image: the pair's score under the
// search's scoring, and every caption word's best region in the image
// (none for a model without region and word vectors, SEAM).
type Match struct {
	Score      float32     `json:"score"`
	Alignments []Alignment `json:"alignments"`
}

// Align matches the sentence text with the indexed image imageID. The
// sentence is encoded as a query is, so the score is the one SearchText
// gives the image (up to float32 rounding); o.Scoring, if set, overrides
// the model's scoring and the other options are ignored.
func (ix *Index) Align(ctx context.Context, imageID, text string, o *SearchOptions) (*Match, error) {
	s := ix.scoring(o)
	img, row, err := ix.imageVectors(ctx, imageID)
	if err != nil {
		return nil, fmt.Errorf("align: %w", err)
	}
	q, err := ix.encodeText(ctx, text, s)
	if err != nil {
		return nil, err
	}
	return match(ctx, img, row.Boxes, q, strings.Fields(text), s)
}

// AlignCaption matches indexed caption item n with the indexed image
// imageID, with the caption's indexed vectors: the score is the one
// SearchImage gives the caption (up to float32 rounding).
func (ix *Index) AlignCaption(ctx context.Context, imageID string, n int, o *SearchOptions) (*Match, error) {
	if err := ix.checkScoring(ix.scoring(o)); err != nil {
		return nil, err
	}
	img, row, err := ix.imageVectors(ctx, imageID)
	if err != nil {
		return nil, fmt.Errorf("align: %w", err)
	}
	cp, err := ix.Caption(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("align: %w", err)
	}
	seg, i, ok := locate(ix.captions, n)
	if !ok {
		return nil, fmt.Errorf("align: caption %d is beyond the index's segments", n)
	}
	return match(ctx, img, row.Boxes, seg.layout.item(i), strings.Fields(cp.Text), ix.scoring(o))
}

// match scores one image (img, one item) against one caption (txt, one
// item) and lists each word's best region.
func match(ctx context.Context, img *model.Embeddings, boxes [][4]float32, txt *model.Embeddings, words []string, s model.Scoring) (*Match, error) {
	sc, err := model.ScoreMatrix(ctx, img, txt, s)
	if err != nil {
		return nil, fmt.Errorf("align: %w", err)
	}
	if !isFinite(sc[0]) {
		return nil, fmt.Errorf("align: the pair scores %v, not a finite number: the index holds values no model produces (damaged or forged): rebuild it", sc[0])
	}
	m := &Match{Score: sc[0], Alignments: []Alignment{}}
	if img.Count(0) > 0 && txt.Count(0) > 0 {
		m.Alignments = explain(model.MatchWords(img, 0, txt, 0), words, boxes)
	}
	for _, a := range m.Alignments {
		if !isFinite(a.Cosine) {
			return nil, fmt.Errorf("align: word %q's best region has cosine %v, not a finite number: the index holds values no model produces (damaged or forged): rebuild it", a.Word, a.Cosine)
		}
	}
	return m, nil
}

package index

import (
	"context"

	"github.com/xmr-project/xmr/model"
)

// Searcher is what xmr search and xmr serve search through: the local
// Index of this package, or an index held by another engine (package
// weaviate). Implementations are safe for concurrent use.
type Searcher interface {
	// SearchText returns the images that text describes best.
	SearchText(ctx context.Context, text string, o *SearchOptions) ([]Result, error)
	// SearchImage returns the captions that describe the indexed image
	// imageID best.
	SearchImage(ctx context.Context, imageID string, o *SearchOptions) ([]Result, error)
	// Image returns the catalogue row of an indexed image.
	Image(ctx context.Context, imageID string) (ImageRow, error)
	// ImageCaptions returns the indexed captions of an image, in item order.
	ImageCaptions(ctx context.Context, imageID string) ([]CaptionItem, error)
	// Caption returns the catalogue row of caption item n.
	Caption(ctx context.Context, n int) (CaptionRow, error)
	// Align matches a sentence with an indexed image.
	Align(ctx context.Context, imageID, text string, o *SearchOptions) (*Match, error)
	// AlignCaption matches indexed caption n with an indexed image.
	AlignCaption(ctx context.Context, imageID string, n int, o *SearchOptions) (*Match, error)
	// Len returns the number of images and captions.
	Len() (images, captions int)
	// ModelInfo identifies the model that encoded the index.
	ModelInfo() ModelInfo
	// Model returns that model (loaded on first use).
	Model() (model.Model, error)
	// Close releases what the searcher holds.
	Close() error
}

var _ Searcher = (*Index)(nil)

// ModelInfo identifies the model that encoded the index.
func (ix *Index) ModelInfo() ModelInfo { return ix.man.Model }

// MatchPair scores one image (img, one item, with its regions' boxes)
// against one caption (txt, one item, with its words) under s and lists
// each word's best region: what Align returns, for vectors fetched from
// elsewhere.
func MatchPair(ctx context.Context, img *model.Embeddings, boxes [][4]float32, txt *model.Embeddings, words []string, s model.Scoring) (*Match, error) {
	return match(ctx, img, boxes, txt, words, s)
}

// Explain names the words of the caption and the boxes of the image in
// the word-region matches of model.MatchWords.
func Explain(matches []model.WordMatch, words []string, boxes [][4]float32) []Alignment {
	return explain(matches, words, boxes)
}

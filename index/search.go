package index

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/xmr-project/xmr/model"
	xtext "github.com/xmr-project/xmr/text"
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
	// Exact scores every item exactly, with its float32 vectors, instead
	// of estimating the scores of the alignment scorings on compressed
	// codes and scoring the best again exactly (Rerank). An index stored
	// compressed has no float32 vectors: Exact is an error wrapping
	// ErrNoFloat32.
	Exact bool
	// Int8 estimates on the int8 codes instead of the 4-bit
	// product-quantised ones, where a segment has both (an error on an
	// index stored compressed, which has neither). A pruned search (see
	// Candidates) estimates its candidates on the int8 codes whatever
	// Int8 says.
	Int8 bool
	// Rerank is how many of the best estimates are scored again exactly
	// (with their float32 vectors, or, stored compressed, with their codes
	// decoded exactly) before the best K are returned. 0 lets the codes
	// that made the estimates choose: max(10 K, 300) after the 4-bit
	// product-quantised codes, whose estimates are coarser, max(10 K, 100)
	// after the int8 and the compressed layout's codes. A negative value
	// returns the best estimates as they are.
	Rerank int
	// Candidates, when positive, prunes: only that many items are scored
	// with the fine-grained alignment, those that the inverted file of
	// their vectors rates best (ivf.go; segments written without one, and
	// the global scorings, use the items whose global vectors are closest
	// to the query's, prune.go). 0 prunes to AutoCandidates for indexes
	// of more than AutoPruneItems items and scores every item otherwise; a
	// negative value never prunes.
	Candidates int
	// Probes is how many cells of each segment's inverted file a pruned
	// search visits per query vector (0: AutoProbes). More probes find
	// more of the exact results and take longer.
	Probes int
}

// probes returns the number of cells probed per query vector.
func (o *SearchOptions) probes() int {
	if o == nil || o.Probes <= 0 {
		return AutoProbes
	}
	return o.Probes
}

// Pruning defaults: an index of more than AutoPruneItems items (images for
// a text query, captions for an image query) is searched through
// AutoCandidates candidates.
const (
	AutoPruneItems = 100_000
	AutoCandidates = 3000
)

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
	s := ix.scoring(o)
	q, err := ix.encodeText(ctx, text, s)
	if err != nil {
		return nil, err
	}
	return ix.search(ctx, newQuery(ix.images, q, true, s, o), strings.Fields(text), nil)
}

// encodeText encodes a sentence as a query is encoded: alone, with the
// index's model. A query that is empty, or has no word that the alignment
// scoring s can use, is an error wrapping ErrBadQuery.
func (ix *Index) encodeText(ctx context.Context, text string, s model.Scoring) (*model.Embeddings, error) {
	if xtext.Blank(text) {
		return nil, fmt.Errorf("search: empty query text (nothing but spaces or invisible characters): %w", ErrBadQuery)
	}
	if err := ix.checkScoring(s); err != nil {
		return nil, err
	}
	m, err := ix.Model()
	if err != nil {
		return nil, err
	}
	q, err := model.EncodeTexts(ctx, m, []string{text}, nil)
	if err != nil {
		return nil, fmt.Errorf("search: encode %q: %w", text, err)
	}
	if s.Alignment() && q.Count(0) == 0 {
		return nil, fmt.Errorf("search: %q has no word that takes part in the alignment (only stop words or symbols?): %w", text, ErrBadQuery)
	}
	return q, nil
}

// checkScoring refuses an alignment scoring on an index that holds no
// region or word vectors (its model, SEAM or MEMBER, encodes global
// vectors only): an error wrapping ErrBadQuery.
func (ix *Index) checkScoring(s model.Scoring) error {
	if !s.Alignment() {
		return nil
	}
	for _, segs := range [][]*segment{ix.images, ix.captions} {
		for _, seg := range segs {
			if seg.header.Vectors > 0 {
				return nil
			}
		}
	}
	if ni, nc := ix.Len(); ni+nc == 0 {
		return nil
	}
	return fmt.Errorf("search: %s pools region and word vectors; this index (model %s) has global vectors only: search it with global or order: %w", s, ix.man.Model.Name, ErrBadQuery)
}

// SearchImage returns the captions that describe the indexed image with
// dataset id imageID best.
func (ix *Index) SearchImage(ctx context.Context, imageID string, o *SearchOptions) ([]Result, error) {
	q, row, err := ix.imageVectors(ctx, imageID)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	s := ix.scoring(o)
	if err := ix.checkScoring(s); err != nil {
		return nil, err
	}
	return ix.search(ctx, newQuery(ix.captions, q, false, s, o), nil, row.Boxes)
}

// imageVectors returns the embeddings (one item) and the catalogue row of
// the indexed image with dataset id imageID; an unknown id is an error
// wrapping ErrNotFound.
func (ix *Index) imageVectors(ctx context.Context, imageID string) (*model.Embeddings, ImageRow, error) {
	item, err := ix.cat.imageByExtID(ctx, imageID)
	if err != nil {
		return nil, ImageRow{}, err
	}
	seg, i, ok := locate(ix.images, item)
	if !ok {
		return nil, ImageRow{}, fmt.Errorf("image %q: item %d is beyond the index's segments", imageID, item)
	}
	row, err := ix.cat.image(ctx, item)
	if err != nil {
		return nil, ImageRow{}, err
	}
	return seg.layout.item(i), row, nil
}

// Search returns the items that an encoded query matches best: images for
// a caption (queryIsText, q from model.EncodeTexts with the index's model),
// captions for an image (q from model.EncodeImages). Explanations have no
// words for a text query given this way.
func (ix *Index) Search(ctx context.Context, q *model.Embeddings, queryIsText bool, o *SearchOptions) ([]Result, error) {
	if q.Len() != 1 || q.Dim != ix.man.Model.Dim {
		return nil, fmt.Errorf("search: the query must be one item of %d-d vectors, is %d items of %d", ix.man.Model.Dim, q.Len(), q.Dim)
	}
	s := ix.scoring(o)
	if err := ix.checkScoring(s); err != nil {
		return nil, err
	}
	segs := ix.captions
	if queryIsText {
		segs = ix.images
	}
	return ix.search(ctx, newQuery(segs, q, queryIsText, s, o), nil, nil)
}

// search ranks the items of q.segs, the other modality's, against q (its
// scoring checked against the index: checkScoring) and fills in the results:
// catalogue rows, and explanations naming the query's words (text query)
// or with the query image's boxes (image query).
func (ix *Index) search(ctx context.Context, q *query, words []string, queryBoxes [][4]float32) ([]Result, error) {
	hits, err := ix.rank(ctx, q)
	if err != nil {
		return nil, err
	}
	return ix.results(ctx, q, hits, words, queryBoxes)
}

// results fills in the results of hits, items of q.segs ranked for q:
// catalogue rows, and explanations (q.explain) naming the query's words
// (text query) or with the query image's boxes (image query).
func (ix *Index) results(ctx context.Context, q *query, hits []model.Hit, words []string, queryBoxes [][4]float32) ([]Result, error) {
	segs := q.segs
	out := make([]Result, 0, len(hits))
	for r, h := range hits {
		res := Result{Rank: r + 1, Item: h.Index, Score: h.Score}
		seg, i, _ := locate(segs, h.Index)
		if !isFinite(h.Score) {
			return nil, nonFiniteScore(ix.dir, seg, i, h.Score)
		}
		if q.text {
			row, err := ix.cat.image(ctx, h.Index)
			if err != nil {
				return nil, err
			}
			res.Image = &row
			if q.explain {
				res.Explain = explain(model.MatchWords(seg.layout.item(i), 0, q.emb, 0), words, row.Boxes)
			}
		} else {
			cp, err := ix.cat.caption(ctx, h.Index)
			if err != nil {
				return nil, err
			}
			res.Caption = &cp
			if q.explain {
				res.Explain = explain(model.MatchWords(q.emb, 0, seg.layout.item(i), 0), strings.Fields(cp.Text), queryBoxes)
			}
		}
		for _, a := range res.Explain {
			if !isFinite(a.Cosine) {
				return nil, nonFiniteScore(ix.dir, seg, i, a.Cosine)
			}
		}
		out = append(out, res)
	}
	return out, nil
}

// isFinite reports whether x is neither NaN nor infinite.
func isFinite(x float32) bool { return math.Float32bits(x)&0x7f800000 != 0x7f800000 }

// nonFiniteScore is the error for a result whose score is NaN or
// infinite: scores are sums of products of the numbers a segment holds,
// which Open bounds (maxMagnitude, unless checksums are skipped), so only
// a damaged or forged segment gives one. A search returns it rather than
// the score, which would rank nothing and fail to encode as JSON.
func nonFiniteScore(dir string, seg *segment, row int, score float32) error {
	where := "a segment"
	if seg != nil {
		where = fmt.Sprintf("row %d of segment %s", row, seg.path)
	}
	return fmt.Errorf("search: index %s: %s scores %v, not a finite number: the segment holds values no model produces (damaged or forged): rebuild the index", dir, where, score)
}

// explain names the words of matches and the boxes of their regions; a
// position outside words or boxes (positions come from index files and
// from Weaviate's answers) leaves the word or the box out.
func explain(matches []model.WordMatch, words []string, boxes [][4]float32) []Alignment {
	out := make([]Alignment, 0, len(matches))
	for _, mw := range matches {
		a := Alignment{Region: mw.Region, Cosine: mw.Cosine}
		if mw.Word >= 0 && mw.Word < len(words) {
			a.Word = words[mw.Word]
		}
		if mw.Region >= 0 && mw.Region < len(boxes) {
			b := boxes[mw.Region]
			a.Box = &b
		}
		out = append(out, a)
	}
	return out
}

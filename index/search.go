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
	// Exact scores every item with its float32 vectors. By default,
	// alignment scorings run on the 4-bit product-quantised codes (pq.go;
	// the int8 codes in segments of format version 1), and the best Rerank
	// candidates are scored again, exactly, in float32. An index stored
	// compressed (residual.go) has no float32 vectors: Exact is an error
	// wrapping ErrNoFloat32.
	Exact bool
	// Int8 scores on the int8 codes instead of the product-quantised ones
	// (an error on an index stored compressed, which has none). (A pruned
	// search, see Candidates, always scores its candidates on the int8
	// codes, and re-ranks as for them.)
	Int8 bool
	// Rerank is how many of the best compressed-code candidates are
	// rescored in float32, or, stored compressed, with their codes decoded
	// exactly (0: max(10 K, 100) on the int8 and compressed codes,
	// max(10 K, 300) on the product-quantised ones, whose scores are
	// coarser); a negative value keeps the compressed scores. On an index
	// stored compressed with coarse codes, only the best max(3 Rerank,
	// 300) candidates on those have their residual codes read from disk
	// (twice as many at d = 1024, where the coarse codes are coarser).
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

// candidates returns how many items to keep in the first stage of a
// search over n items; 0 means no pruning.
func (o *SearchOptions) candidates(n int) int {
	c := 0
	switch {
	case o == nil || o.Candidates == 0:
		if n > AutoPruneItems {
			c = AutoCandidates
		}
	case o.Candidates > 0:
		c = o.Candidates
	default:
		return 0
	}
	if c == 0 {
		return 0
	}
	if c = max(c, o.k()); c >= n {
		return 0
	}
	return c
}

func (o *SearchOptions) k() int {
	if o == nil || o.K <= 0 {
		return 10
	}
	return o.K
}

// rerank returns how many candidates to rescore exactly (0: none); pq says
// they were ranked on product-quantised codes, whose default is larger
// (pqRerank).
func (o *SearchOptions) rerank(pq bool) int {
	switch {
	case o == nil || o.Rerank == 0:
		if pq {
			return max(10*o.k(), pqRerank)
		}
		return max(10*o.k(), 100)
	case o.Rerank < 0:
		return 0
	}
	return max(o.Rerank, o.k())
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
	q, err := ix.encodeText(ctx, text, ix.scoring(o))
	if err != nil {
		return nil, err
	}
	return ix.search(ctx, q, true, strings.Fields(text), nil, o)
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
	return ix.search(ctx, q, false, nil, row.Boxes, o)
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
	return seg.item(i), row, nil
}

// Search returns the items that an encoded query matches best: images for
// a caption (queryIsText, q from model.EncodeTexts with the index's model),
// captions for an image (q from model.EncodeImages). Explanations have no
// words for a text query given this way.
func (ix *Index) Search(ctx context.Context, q *model.Embeddings, queryIsText bool, o *SearchOptions) ([]Result, error) {
	if q.Len() != 1 || q.Dim != ix.man.Model.Dim {
		return nil, fmt.Errorf("search: the query must be one item of %d-d vectors, is %d items of %d", ix.man.Model.Dim, q.Len(), q.Dim)
	}
	return ix.search(ctx, q, queryIsText, nil, nil, o)
}

// search ranks the items of the other modality against q and fills in
// the results: catalogue rows, and explanations naming the query's words
// (text query) or with the query image's boxes (image query).
func (ix *Index) search(ctx context.Context, q *model.Embeddings, queryIsText bool, words []string, queryBoxes [][4]float32, o *SearchOptions) ([]Result, error) {
	if err := ix.checkScoring(ix.scoring(o)); err != nil {
		return nil, err
	}
	segs := ix.captions
	if queryIsText {
		segs = ix.images
	}
	hits, err := ix.rank(ctx, segs, q, ix.scoring(o), queryIsText, o)
	if err != nil {
		return nil, err
	}
	out := make([]Result, 0, len(hits))
	for r, h := range hits {
		res := Result{Rank: r + 1, Item: h.Index, Score: h.Score}
		seg, i, _ := locate(segs, h.Index)
		if !isFinite(h.Score) {
			return nil, nonFiniteScore(ix.dir, seg, i, h.Score)
		}
		if queryIsText {
			row, err := ix.cat.image(ctx, h.Index)
			if err != nil {
				return nil, err
			}
			res.Image = &row
			if o != nil && o.Explain {
				res.Explain = explain(model.MatchWords(seg.item(i), 0, q, 0), words, row.Boxes)
			}
		} else {
			cp, err := ix.cat.caption(ctx, h.Index)
			if err != nil {
				return nil, err
			}
			res.Caption = &cp
			if o != nil && o.Explain {
				res.Explain = explain(model.MatchWords(q, 0, seg.item(i), 0), strings.Fields(cp.Text), queryBoxes)
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

// rank scores the query q (one item: a caption when queryIsText, else an
// image) against every item of segs and returns the best o.k(): exactly
// in float32 (global scoring, or o.Exact), or on the int8 codes with the
// best candidates rescored in float32.
func (ix *Index) rank(ctx context.Context, segs []*segment, q *model.Embeddings, s model.Scoring, queryIsText bool, o *SearchOptions) ([]model.Hit, error) {
	k := o.k()
	total := 0
	for _, seg := range segs {
		total += seg.header.Items
	}
	if anyResidual(segs) {
		// Why the float32 vectors or int8 codes are missing: the whole
		// index was built compressed, or (an older xmr's --append mixed
		// layouts) some of its segments were.
		why, which := "it was built compressed", "its vectors"
		if !allResidual(segs) {
			nc := 0
			for _, seg := range segs {
				if seg.res != nil {
					nc++
				}
			}
			why = fmt.Sprintf("%d of the %d segments searched are compressed and the others hold float32 vectors: an append of an older xmr mixed the layouts", nc, len(segs))
			which = "some of its vectors"
		}
		switch {
		case o != nil && o.Exact:
			return nil, fmt.Errorf("search --exact: index %s: %w (%s: search it without --exact, or rebuild it with xmr index --overwrite --keep-float32)", ix.dir, ErrNoFloat32, why)
		case o != nil && o.Int8 && s.Alignment():
			return nil, fmt.Errorf("search --int8: index %s holds no int8 codes of %s, only residual codes (%s): search it without --int8", ix.dir, which, why)
		}
	}
	// The query's tables for the compressed segments, made once for
	// every stage that scores them (alignment scorings only).
	var rq *resQuery
	if s.Alignment() && anyResidual(segs) {
		rq = newResQuery(segs, q.Item(0), q.Dim)
	}
	// Pruning compares global vectors by cosine: it serves the alignment
	// scorings and the global cosine, not other global scorings.
	if c := o.candidates(total); c > 0 && !(o != nil && o.Exact) && (s.Alignment() || s == model.Global) {
		if s.Alignment() && allResidual(segs) {
			return rankResidual(ctx, segs, q, rq, s, queryIsText, o, c)
		}
		return rankPruned(ctx, segs, q, rq, s, queryIsText, o, c)
	}
	if !s.Alignment() || (o != nil && o.Exact) {
		scores, err := scoreExact(ctx, segs, q, s, queryIsText)
		if err != nil {
			return nil, err
		}
		return model.TopK(scores, k), nil
	}
	scores, pq, err := scoreCompressed(ctx, segs, q, rq, s, queryIsText, o != nil && o.Int8)
	if err != nil {
		return nil, err
	}
	r := o.rerank(pq)
	if r == 0 {
		return model.TopK(scores, k), nil
	}
	cand := model.TopK(scores, r)
	return rescore(ctx, segs, cand, q, rq, s, queryIsText, k)
}

// scoreCompressed scores q against every item of segs on their compressed
// codes: the residual codes of a compressed segment (residual.go), else
// the product-quantised ones (pq.go) unless int8 is asked for or a segment
// (format version 1) has none; pq says that some were scored on the
// (coarser) product-quantised codes.
func scoreCompressed(ctx context.Context, segs []*segment, q *model.Embeddings, rq *resQuery, s model.Scoring, queryIsText, int8 bool) (scores []float32, pq bool, err error) {
	for _, seg := range segs {
		int8 = int8 || (seg.pq == nil && seg.res == nil)
	}
	var packed *packedQuery
	if int8 {
		packed = packQuery(q.Item(0), q.Dim)
	}
	for _, seg := range segs {
		var sc []float32
		switch {
		case seg.res != nil:
			sc, err = scoreResidual(ctx, seg.res, rq, s, queryIsText)
		case int8:
			sc, err = scoreCodes(ctx, seg.codes, packed, s, queryIsText)
		default:
			sc, err = scorePQ(ctx, seg.pq, seg.pq.cb.pqLUTs(q.Item(0)), s, queryIsText)
		}
		if err != nil {
			return nil, false, fmt.Errorf("search %s: %w", seg.path, err)
		}
		scores = append(scores, sc...)
	}
	return scores, !int8 && !allResidual(segs), nil
}

// rankPruned ranks c candidates (from the inverted files for an alignment
// scoring when every segment has one, else the c items closest to the
// query by global vector): with the fine-grained alignment on their int8
// codes, then, for the best o.rerank(false), exactly in float32 (a global
// scoring rescores them all exactly).
func rankPruned(ctx context.Context, segs []*segment, q *model.Embeddings, rq *resQuery, s model.Scoring, queryIsText bool, o *SearchOptions, c int) ([]model.Hit, error) {
	var cands []candidate
	packed := packQuery(q.Item(0), q.Dim)
	if s.Alignment() && allIVF(segs) {
		var err error
		if cands, err = ivfCandidates(ctx, segs, q.Item(0), packed, q.Dim, c, o.probes(), s, queryIsText); err != nil {
			return nil, err
		}
	} else {
		cands = globalCandidates(segs, q.GlobalOf(0), q.Dim, c)
	}
	hits := make([]model.Hit, len(cands))
	for i, cd := range cands {
		hits[i] = model.Hit{Index: cd.item}
	}
	if s == model.Global {
		return rescore(ctx, segs, hits, q, rq, s, queryIsText, o.k())
	}
	scores, err := scoreCandidates(ctx, cands, packed, rq, s, queryIsText)
	if err != nil {
		return nil, err
	}
	return rerankBest(ctx, segs, cands, scores, q, rq, s, queryIsText, o)
}

// rerankBest returns the best o.k() of the candidates by their compressed
// scores, or, unless re-ranking is off, the best o.rerank(false) of them
// rescored exactly (rescore).
func rerankBest(ctx context.Context, segs []*segment, cands []candidate, scores []float32, q *model.Embeddings, rq *resQuery, s model.Scoring, queryIsText bool, o *SearchOptions) ([]model.Hit, error) {
	rr := o.rerank(false)
	top := model.TopK(scores, max(rr, o.k()))
	best := make([]model.Hit, len(top))
	for i, h := range top {
		best[i] = model.Hit{Index: cands[h.Index].item, Score: h.Score}
	}
	if rr == 0 {
		return best, nil
	}
	return rescore(ctx, segs, best, q, rq, s, queryIsText, o.k())
}

// allIVF reports whether every segment has an inverted file.
func allIVF(segs []*segment) bool {
	for _, s := range segs {
		if s.ivf == nil {
			return false
		}
	}
	return true
}

// scoreExact scores q against every item of segs in float32: the
// alignment scorings with the fused kernel of exact.go, the others with
// model.ScoreMatrix.
func scoreExact(ctx context.Context, segs []*segment, q *model.Embeddings, s model.Scoring, queryIsText bool) ([]float32, error) {
	var out []float32
	var pq *packedFloats
	if s.Alignment() {
		pq = packFloats(q.Item(0), q.Dim)
	}
	for _, seg := range segs {
		var sc []float32
		var err error
		if pq != nil {
			sc, err = scoreFloats(ctx, seg.emb, pq, s, queryIsText)
		} else if queryIsText {
			sc, err = model.ScoreMatrix(ctx, seg.globals(), q, s) // (items x 1)
		} else {
			sc, err = model.ScoreMatrix(ctx, q, seg.globals(), s) // (1 x items)
		}
		if err != nil {
			return nil, fmt.Errorf("search %s: %w", seg.path, err)
		}
		out = append(out, sc...)
	}
	return out, nil
}

// rescore scores the candidates exactly, with their float32 vectors (or,
// in compressed segments, their codes decoded exactly through the query's
// tables rq, nil when there are none), and returns the best k of them. The alignment scorings read each
// candidate's vectors where they lie in the memory-mapped segment; the
// global scorings gather them for model.ScoreMatrix.
func rescore(ctx context.Context, segs []*segment, cand []model.Hit, q *model.Embeddings, rq *resQuery, s model.Scoring, queryIsText bool, k int) ([]model.Hit, error) {
	type at struct {
		seg *segment
		row int
	}
	where := make([]at, len(cand))
	for i, h := range cand {
		seg, row, ok := locate(segs, h.Index)
		if !ok {
			return nil, fmt.Errorf("search: candidate %d is beyond the index's segments", h.Index)
		}
		where[i] = at{seg, row}
	}
	// Ask for every candidate's vectors at once: on an index larger than
	// the page cache they are scattered reads from disk.
	for _, w := range where {
		w.seg.willNeed(w.row)
	}
	var sc []float32
	var err error
	if s.Alignment() {
		pq := packFloats(q.Item(0), q.Dim)
		sc = make([]float32, len(cand))
		// Candidates in tasks of 8, each scored from its own segment:
		// float32 vectors, or compressed codes decoded exactly.
		err = forRanges(ctx, len(cand), 8, func() func(lo, hi int) {
			var fs floatScratch
			var rs resScratch
			return func(lo, hi int) {
				for i := lo; i < hi; i++ {
					if v := where[i].seg.res; v != nil {
						sc[i] = rs.exact(v, rq, s, queryIsText, where[i].row)
						continue
					}
					fs.score(where[i].seg.emb, pq, s, queryIsText, where[i].row, where[i].row+1, sc[i:i+1])
				}
			}
		})
	} else {
		g := &model.Embeddings{}
		for _, w := range where {
			if err := g.Append(w.seg.item(w.row)); err != nil {
				return nil, err
			}
		}
		if queryIsText {
			sc, err = model.ScoreMatrix(ctx, g, q, s)
		} else {
			sc, err = model.ScoreMatrix(ctx, q, g, s)
		}
	}
	if err != nil {
		return nil, err
	}
	top := model.TopK(sc, k)
	for i := range top {
		top[i].Index = cand[top[i].Index].Index
	}
	return top, nil
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

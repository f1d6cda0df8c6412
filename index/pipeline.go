package index

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/xmr-project/xmr/model"
)

// rank returns the best q.k items of q.segs (the segments of the modality
// searched: images for a caption, captions for an image) for q. It is
// the search pipeline, written once for every layout (layout.go):
//
//  1. candidates: every item, or, on a large collection
//     (q.candidateCount), those a first stage rates best: through the
//     cells' lists of compressed segments (resCandidates), the inverted
//     files of float32 ones (ivfCandidates), else the items' global
//     vectors (globalCandidates);
//  2. estimate: their scores on the layouts' codes (layout.scan over
//     every item, layout.estimate per candidate; compressed segments with
//     coarse codes keep the best on those first: narrowByCoarse);
//  3. re-rank: the best q.rerankCount of them scored exactly
//     (layout.exact) and the best q.k returned (without re-ranking, the
//     best q.k estimates).
//
// SearchOptions.Exact scores every item exactly instead (layout.scanExact).
// The global scorings skip the estimate: they score the global vectors
// exactly, every item's, or, pruned under the global cosine, the
// candidates'.
func (ix *Index) rank(ctx context.Context, q *query) ([]model.Hit, error) {
	segs := q.segs
	if err := ix.checkLayouts(segs, q); err != nil {
		return nil, err
	}
	total := 0
	for _, seg := range segs {
		total += seg.header.Items
	}
	c := 0
	if !q.exact {
		c = q.candidateCount(total)
	}
	if !q.s.Alignment() {
		return rankGlobal(ctx, segs, q, c)
	}
	if q.exact {
		scores, err := scanExact(ctx, segs, q)
		if err != nil {
			return nil, err
		}
		return model.TopK(scores, q.k), nil
	}

	// 1 and 2: the candidates and their estimates.
	var (
		cands  []candidate // nil: every item
		scores []float32
		floor  int
		err    error
	)
	if c > 0 {
		if cands, err = candidates(ctx, segs, q, c); err != nil {
			return nil, err
		}
		floor = codesRerank
		if reads := coarseReads(q.rerankCount(floor), segs); reads > 0 && len(cands) > reads {
			if cands, err = narrowByCoarse(ctx, cands, q, reads); err != nil {
				return nil, err
			}
		}
		scores, err = estimate(ctx, cands, q, layoutOf)
	} else {
		scores, floor, err = scan(ctx, segs, q)
	}
	if err != nil {
		return nil, err
	}

	// 3: the best estimates re-ranked.
	r := q.rerankCount(floor)
	top := model.TopK(scores, max(r, q.k))
	best := make([]candidate, len(top))
	for i, h := range top {
		if cands != nil {
			best[i] = cands[h.Index]
			continue
		}
		seg, row, ok := locate(segs, h.Index)
		if !ok {
			return nil, fmt.Errorf("search: item %d is beyond the index's segments", h.Index)
		}
		best[i] = candidate{item: h.Index, row: row, seg: seg}
	}
	if r == 0 {
		for i := range top {
			top[i].Index = best[i].item
		}
		return top, nil
	}
	return rescore(ctx, best, q)
}

// checkLayouts refuses what the layouts of segs cannot do for q: a search
// in float32 (Exact) or on int8 codes (Int8, alignment scorings) where
// some segment is compressed.
func (ix *Index) checkLayouts(segs []*segment, q *query) error {
	if !anyResidual(segs) || !(q.exact || (q.int8 && q.s.Alignment())) {
		return nil
	}
	// Why the float32 vectors or int8 codes are missing: the whole index
	// was built compressed, or (an older xmr's --append mixed layouts)
	// some of its segments were.
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
	if q.exact {
		return fmt.Errorf("search --exact: index %s: %w (%s: search it without --exact, or rebuild it with xmr index --overwrite --keep-float32)", ix.dir, ErrNoFloat32, why)
	}
	return fmt.Errorf("search --int8: index %s holds no int8 codes of %s, only residual codes (%s): search it without --int8", ix.dir, which, why)
}

// candidates returns the n items of segs that the first stage of an
// alignment scoring rates best for q.
func candidates(ctx context.Context, segs []*segment, q *query, n int) ([]candidate, error) {
	switch {
	case allResidual(segs):
		return resCandidates(ctx, segs, q, n)
	case allIVF(segs):
		return ivfCandidates(ctx, segs, q, n)
	}
	return globalCandidates(segs, q.global(), q.d, n), nil
}

// scan estimates the score of every item of segs on their layouts' codes
// and returns the largest of their re-rank floors.
func scan(ctx context.Context, segs []*segment, q *query) (scores []float32, floor int, err error) {
	for _, seg := range segs {
		sc, f, err := seg.layout.scan(ctx, q)
		if err != nil {
			return nil, 0, fmt.Errorf("search %s: %w", seg.path, err)
		}
		scores, floor = append(scores, sc...), max(floor, f)
	}
	return scores, floor, nil
}

// scanExact scores every item of segs exactly.
func scanExact(ctx context.Context, segs []*segment, q *query) ([]float32, error) {
	var out []float32
	for _, seg := range segs {
		sc, err := seg.layout.scanExact(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("search %s: %w", seg.path, err)
		}
		out = append(out, sc...)
	}
	return out, nil
}

// estimate estimates the score of every candidate with the estimator of
// its segment that by gives (layoutOf: its layout's codes), in parallel:
// the codes not kept in memory asked for at once, each candidate's
// fetched into the caches two ahead, and where its codes lie (its
// offsets) four ahead.
func estimate(ctx context.Context, cands []candidate, q *query, by func(*segment) estimator) ([]float32, error) {
	for _, c := range cands {
		by(c.seg).willNeed(c.row, false)
	}
	out := make([]float32, len(cands))
	err := forRanges(ctx, len(cands), 32, func() func(lo, hi int) {
		var sc scratch
		return func(lo, hi int) {
			for i := lo; i < hi; i++ {
				if j := i + 2; j < hi {
					by(cands[j].seg).fetch(cands[j].row)
				}
				if j := i + 4; j < hi {
					cands[j].fetchOffsets()
				}
				c := cands[i]
				out[i] = by(c.seg).estimate(&sc, q, c.row)
			}
		}
	})
	return out, err
}

// layoutOf returns the estimator of s's layout.
func layoutOf(s *segment) estimator { return s.layout }

// fetchOffsets asks for the candidate's offsets (where its vectors and
// codes lie) to be brought into the caches.
func (c candidate) fetchOffsets() {
	prefetch(unsafe.Pointer(&c.seg.emb.Offsets[c.row]), 16)
}

// rescore scores the candidates exactly and returns the best q.k of them.
// The alignment scorings score each candidate where its vectors or codes
// lie in the memory-mapped segment; the global scorings gather their
// items for model.ScoreMatrix.
func rescore(ctx context.Context, cands []candidate, q *query) ([]model.Hit, error) {
	sc, err := exactScores(ctx, cands, q)
	if err != nil {
		return nil, err
	}
	top := model.TopK(sc, q.k)
	for i := range top {
		top[i].Index = cands[top[i].Index].item
	}
	return top, nil
}

// exactScores scores the candidates exactly under q, in their order.
func exactScores(ctx context.Context, cands []candidate, q *query) ([]float32, error) {
	// Ask for every candidate's vectors at once: on an index larger than
	// the page cache they are scattered reads from disk.
	for _, c := range cands {
		c.seg.layout.willNeed(c.row, true)
	}
	var sc []float32
	var err error
	if q.s.Alignment() {
		sc = make([]float32, len(cands))
		err = forRanges(ctx, len(cands), 8, func() func(lo, hi int) {
			var s scratch
			return func(lo, hi int) {
				for i := lo; i < hi; i++ {
					sc[i] = cands[i].seg.layout.exact(&s, q, cands[i].row)
				}
			}
		})
	} else {
		var g *model.Embeddings
		if g, err = gatherGlobals(cands, q.d); err != nil {
			return nil, err
		}
		sc, err = scoreGlobals(ctx, g, q)
	}
	return sc, err
}

// gatherGlobals returns the global vectors (d wide) of the candidates, in
// order. A global scoring reads the items' global vectors alone: they are
// gathered, not the items' other vectors (a TERN index's words and
// regions, as many again as the candidates).
func gatherGlobals(cands []candidate, d int) (*model.Embeddings, error) {
	g := &model.Embeddings{Dim: d, Offsets: make([]int, len(cands)+1), Global: make([]float32, 0, len(cands)*d)}
	for _, c := range cands {
		it := c.seg.layout.item(c.row)
		if it.Dim != d || len(it.Global) != d {
			return nil, fmt.Errorf("search %s: item %d holds %d %d-d global vectors, want one of %d", c.seg.path, c.row, len(it.Global)/max(it.Dim, 1), it.Dim, d)
		}
		g.Global = append(g.Global, it.Global...)
	}
	return g, nil
}

// rankGlobal ranks the items of segs under a global scoring: every item's
// global vector scored exactly, or, with c candidates under the global
// cosine, the c closest (globalCandidates) rescored.
func rankGlobal(ctx context.Context, segs []*segment, q *query, c int) ([]model.Hit, error) {
	if c > 0 && q.s == model.Global {
		return rescore(ctx, globalCandidates(segs, q.global(), q.d, c), q)
	}
	var out []float32
	for _, seg := range segs {
		sc, err := scoreGlobals(ctx, seg.layout.globals(), q)
		if err != nil {
			return nil, fmt.Errorf("search %s: %w", seg.path, err)
		}
		out = append(out, sc...)
	}
	return model.TopK(out, q.k), nil
}

// scoreGlobals scores the items g under q's global scoring.
func scoreGlobals(ctx context.Context, g *model.Embeddings, q *query) ([]float32, error) {
	if q.text {
		return model.ScoreMatrix(ctx, g, q.emb, q.s) // (items x 1)
	}
	return model.ScoreMatrix(ctx, q.emb, g, q.s) // (1 x items)
}

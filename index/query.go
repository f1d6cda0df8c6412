package index

import "github.com/xmr-project/xmr/model"

// query is one search's query and everything the stages of the pipeline
// (pipeline.go) share: the segments searched, the encoded vectors, which
// side they are on, the scoring, the options resolved once, and the
// query's tables for each layout's kernels, made before the search starts
// (the stages' workers only read them).
type query struct {
	segs []*segment        // the segments of the modality searched
	emb  *model.Embeddings // the query, one item
	vecs []float32         // its region or word vectors
	d    int
	// text says the query is a caption, scored against images (its words
	// against their regions); else it is an image, scored against
	// captions.
	text bool
	s    model.Scoring

	k       int  // results
	explain bool // each result's word-region alignments
	exact   bool // score every item in float32 (SearchOptions.Exact)
	int8    bool // SearchOptions.Int8: estimate on the int8 codes
	// scanInt8: scan the int8 codes rather than the 4-bit ones (asked,
	// or a segment of format version 1 is searched).
	scanInt8 bool
	// rerank is SearchOptions.Rerank as given: 0 lets the layouts choose
	// (rerankCount), a negative value re-ranks nothing.
	rerank int
	// prune is SearchOptions.Candidates as given (see candidateCount);
	// probes the cells each query vector probes when pruning.
	prune, probes int

	floats *packedFloats // for the float32 kernel (alignment scorings)
	codes  *packedQuery  // for the int8 kernel (alignment scorings)
	res    *resQuery     // for compressed segments (alignment scorings)
}

// newQuery prepares the query q, encoded by the index's model, for a
// search of segs under scoring s with the options o (nil: the defaults).
func newQuery(segs []*segment, q *model.Embeddings, text bool, s model.Scoring, o *SearchOptions) *query {
	out := &query{segs: segs, emb: q, vecs: q.Item(0), d: q.Dim, text: text, s: s, k: o.k(), probes: o.probes()}
	if o != nil {
		out.explain, out.exact, out.int8 = o.Explain, o.Exact, o.Int8
		out.rerank, out.prune = o.Rerank, o.Candidates
	}
	// A segment of format version 1 has int8 codes only: every float32
	// segment then scans those, so that their estimates compare.
	out.scanInt8 = out.int8
	for _, seg := range segs {
		if seg.res == nil && seg.pq == nil {
			out.scanInt8 = true
		}
	}
	if s.Alignment() {
		out.floats = packFloats(out.vecs, out.d)
		out.codes = packQuery(out.vecs, out.d)
		if anyResidual(segs) {
			out.res = newResQuery(segs, out.vecs, out.d)
		}
	}
	return out
}

// global returns the query's global vector.
func (q *query) global() []float32 { return q.emb.GlobalOf(0) }

// candidateCount returns how many items the first stage keeps of a
// search over n items; 0 means every item is scored.
func (q *query) candidateCount(n int) int {
	c := 0
	switch {
	case q.prune == 0:
		if n > AutoPruneItems {
			c = AutoCandidates
		}
	case q.prune > 0:
		c = q.prune
	default:
		return 0
	}
	if c == 0 {
		return 0
	}
	if c = max(c, q.k); c >= n {
		return 0
	}
	return c
}

// rerankCount returns how many of the best estimates are scored again
// exactly (0: none): the Rerank option, or by default max(10 k, floor),
// floor being what the layouts that estimated the scores ask for
// (layout.rerankFloor: coarser codes ask for more).
func (q *query) rerankCount(floor int) int {
	switch {
	case q.rerank == 0:
		return max(10*q.k, floor)
	case q.rerank < 0:
		return 0
	}
	return max(q.rerank, q.k)
}

package index

import "github.com/xmr-project/xmr/model"

// This file holds the pooling of the alignment scorings, which every
// layout's kernels share.

// pool turns the similarities of an item's nv vectors (rows) with the
// query's nq vectors (columns) into the item's score, as model.ScoreMatrix
// pools an alignment matrix: the max is over the image's regions, the sum
// over the caption's words. With a text query the rows are regions and the
// columns words; with an image query, the other way round.
func pool(sims []float32, nv, nq int, s model.Scoring, queryIsText bool) float32 {
	if nv == 0 || nq == 0 {
		return 0
	}
	// colMaxSum: the sum over columns of their max over rows;
	// rowMaxSum: the sum over rows of their max over columns. (Comparisons
	// rather than the max builtin, which also orders NaNs and signed zeros
	// and costs several instructions more.)
	colMaxSum := func() float32 {
		var buf [64]float32
		colMax := buf[:0]
		if nq > len(buf) {
			colMax = make([]float32, 0, nq)
		}
		colMax = append(colMax, sims[:nq]...)
		for r := 1; r < nv; r++ {
			row := sims[r*nq : (r+1)*nq]
			for w, v := range row {
				if v > colMax[w] {
					colMax[w] = v
				}
			}
		}
		var t float32
		for _, v := range colMax {
			t += v
		}
		return t
	}
	rowMaxSum := func() float32 {
		var t float32
		for r := 0; r < nv; r++ {
			row := sims[r*nq : (r+1)*nq]
			best := row[0]
			for _, v := range row[1:] {
				if v > best {
					best = v
				}
			}
			t += best
		}
		return t
	}
	mrsw, mwsr := colMaxSum, rowMaxSum
	words := nq
	if !queryIsText {
		mrsw, mwsr = rowMaxSum, colMaxSum
		words = nv
	}
	switch s {
	case model.MwSr:
		return mwsr()
	case model.Symm:
		return mrsw() + mwsr()
	case model.MrAvgw:
		return mrsw() / float32(words)
	}
	return mrsw()
}

// poolItems pools sims, the similarities of the vectors of items [lo, hi)
// of offsets (as Embeddings.Offsets; rows from vector offsets[lo]) with
// the query's nq vectors, into the items' scores, out[0 : hi-lo].
func poolItems(sims []float32, offsets []int, lo, hi, nq int, s model.Scoring, queryIsText bool, out []float32) {
	v0 := offsets[lo]
	for i := lo; i < hi; i++ {
		a, b := offsets[i]-v0, offsets[i+1]-v0
		out[i-lo] = pool(sims[a*nq:b*nq], b-a, nq, s, queryIsText)
	}
}

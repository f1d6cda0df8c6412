package index

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/xmr-project/xmr/model"
)

// This file holds the compressed layout (segment format version 3), in
// which nothing is stored at full precision, as ColBERTv2 and PLAID store
// late-interaction indexes:
//
//   - every region or word vector is filed under its cell of the inverted
//     file (ivf.go; a uint16 per vector) and stored as its cosine with that
//     cell's centroid plus a residual in 4-bit codes (pq.go's fast-scan
//     layout): product-quantised, or coded along the residuals' principal
//     directions (directions.go), whichever errs less on the first batch;
//     the coder is trained once per build and modality, on the first
//     batch, and shared by its segments;
//   - each cell lists the items with a vector in it, once each;
//   - the global vectors are kept as their int8 codes and sign sketches.
//
// A pruned search (the pipeline of pipeline.go, through compressedLayout)
// touches in memory only the cells' lists, every vector's cell and the
// items' offsets; then it reads the residual codes of a bounded number of
// candidates (stages 1 to 3 are resCandidates', 4 is narrowByCoarse's and
// compressedLayout.estimate's, 5 compressedLayout.exact's):
//
//  1. the query's vectors against every centroid (a table, cells x query
//     vectors); each query vector probes its best cells;
//  2. every item met in a probed cell is rated by the sum, over the query
//     vectors, of the best centroid score among its probed cells;
//  3. the best of those are rated by centroid interaction: the alignment
//     of the query with the centroids of all their vectors, pooled as the
//     scoring says (a text query under MrSw through interact's kernel,
//     which fetches items' cells ahead: they lie anywhere in memory);
//  4. the best of those (SearchOptions.Candidates) are scored on their
//     residual codes with the fast-scan kernel: centroid score plus the
//     residual's quantised table look-ups (a text query's MrSw pooled by
//     scoreText). Segments written with coarse codes (a second product
//     quantisation of the same residuals, 4 times smaller at d = 256,
//     kept in memory) are scored on those first, and only the best
//     coarseReads of them read their residual codes from disk;
//  5. the best of those (SearchOptions.Rerank) are scored again with the
//     codes decoded exactly (float tables, summed by exactAdd), and the
//     best k returned.
//
// The kernels of reskernels_amd64.s compute what their Go versions in
// reskernels.go do, operation for operation. The build side (training the
// coder, encoding) is residual_build.go.

// ErrNoFloat32 is wrapped by the errors for a search that needs float32
// vectors (SearchOptions.Exact) on an index stored compressed.
var ErrNoFloat32 = errors.New("the index stores compressed codes only, no float32 vectors")

// Section names of format version 3 (besides offsets, pos, sketch, gcodes,
// gscales, ivf-centroids and ivf-offsets, as in version 2).
const (
	secCells       = "cells"       // uint16 x vectors: each vector's cell
	secResCodebook = "rescodebook" // float32 x subspaces x 16 x dsub: the residual quantiser
	secResCodes    = "rescodes"    // uint8 x pqBlocks(vectors) x 16 subspaces: residual codes in fast-scan blocks
	secAlphas      = "alphas"      // int8 x vectors: each vector's cosine with its centroid, in 127ths
	// The coarse codes (header "coarse"), in segments written with them.
	secCoarseCodebook = "coarsecodebook" // float32 x subspaces x 16 x dsub: the coarse quantiser
	secCoarseCodes    = "coarsecodes"    // uint8 x pqBlocks(vectors) x 16 subspaces: the coarse codes of the same residuals
	// secIVFItems holds, in version 3, cell by cell the items with a
	// vector in the cell, ascending, each once (header "lists" entries).
)

// coarseReads is how many candidates a search of segs reads the residual
// codes of, when it re-ranks rerank of them, after scoring them on their
// coarse codes (0 when some segment has none, as those written before
// them): 3 times
// as many and at least 300, times how much coarser than 4 times the
// residual codes' subspaces the coarse codes' are. (docs/benchmarks.md,
// "search": at d = 256, coarse subspaces 4 times as wide, the residual
// codes' top 10 of 3,000 candidates are among the coarse codes' best 300
// in 997 places of 1,000, and recall@10 is the same through 300 as
// through all 3,000; at d = 1024 they are 8 times as wide, and the best
// 300 lost the query's own image for one query in twenty more than 600.)
func coarseReads(rerank int, segs []*segment) int {
	if !allCoarse(segs) {
		return 0
	}
	widen := 1
	for _, s := range segs {
		widen = max(widen, s.res.coarse.cb.dsub/(4*s.res.cb.dsub))
	}
	return max(3*rerank, 300) * widen
}

// segVersionResidual is the compressed layout's format version.
const segVersionResidual = 3

// resView is a version 3 segment's compressed vectors.
type resView struct {
	cells     int
	id        quantizerID // the quantizer's centroids, shared by the build's segments
	centroids []float32   // cells x dim
	cellOf    []uint16    // per vector
	alphas    []int8      // per vector: its cosine with its centroid, in 127ths
	listOff   []int64     // cells + 1
	listItems []int32     // items of each cell
	cb        *pqCodebook // residual quantiser
	cbID      quantizerID // the codebook's section CRC and subspaces: shared by the build's segments
	codes     []byte      // pqBlocks(vectors) x 16m
	offsets   []int       // as Embeddings.Offsets
	// coarse is the view of the coarse codes (nil: none): this view
	// with their codebook and codes.
	coarse *resView
}

// check reports cells, lists or items out of range or order.
func (v *resView) check(items int) error {
	for x, c := range v.cellOf {
		if int(c) >= v.cells {
			return fmt.Errorf("section %q: vector %d is filed under cell %d of %d", secCells, x, c, v.cells)
		}
	}
	if v.listOff[0] != 0 || v.listOff[v.cells] != int64(len(v.listItems)) {
		return fmt.Errorf("section %q: lists span [%d, %d) of %d entries", secIVFOffsets, v.listOff[0], v.listOff[v.cells], len(v.listItems))
	}
	for c := 0; c < v.cells; c++ {
		if v.listOff[c+1] < v.listOff[c] {
			return fmt.Errorf("section %q: list %d ends before it starts", secIVFOffsets, c)
		}
		prev := int32(-1)
		for _, it := range v.listItems[v.listOff[c]:v.listOff[c+1]] {
			if it <= prev || int(it) >= items {
				return fmt.Errorf("section %q: list %d holds item %d after %d; items must ascend below %d", secIVFItems, c, it, prev, items)
			}
			prev = it
		}
	}
	return v.checkCover(items)
}

// checkCover checks that the cells' lists are exactly those cellLists
// makes of the vectors' cells: each item listed under every cell that
// one of its vectors is filed under, and under no other. A search finds
// items only through the lists of the cells it probes, so an item left
// out of one (a list emptied, with its offsets and the header's entries
// made to match) is never found there. The lists ascend (check), so one
// walk over the items in order, with a cursor per list, compares them.
func (v *resView) checkCover(items int) error {
	next := slices.Clone(v.listOff[:v.cells]) // each list's next entry
	seen := make([]int32, v.cells)            // item+1 that last met the cell
	for it := 0; it < items; it++ {
		for x := v.offsets[it]; x < v.offsets[it+1]; x++ {
			c := v.cellOf[x]
			if seen[c] == int32(it+1) {
				continue
			}
			seen[c] = int32(it + 1)
			k := next[c]
			if k < v.listOff[c+1] && v.listItems[k] < int32(it) {
				return fmt.Errorf("section %q: cell %d lists item %d, which has no vector in it", secIVFItems, c, v.listItems[k])
			}
			if k == v.listOff[c+1] || v.listItems[k] != int32(it) {
				return fmt.Errorf("section %q: cell %d does not list item %d, whose vector %d is filed under it (section %q): corrupt or forged file", secIVFItems, c, it, x, secCells)
			}
			next[c]++
		}
	}
	for c, k := range next {
		if k < v.listOff[c+1] {
			return fmt.Errorf("section %q: cell %d lists item %d, which has no vector in it", secIVFItems, c, v.listItems[k])
		}
	}
	return nil
}

// alphaValue returns the cosine that alphaOf's code stands for.
func alphaValue(a int8) float32 { return float32(a) / 127 }

// codeAt returns the 4-bit code of subspace s of vector x in blocked codes
// of m subspaces.
func codeAt(codes []byte, m, x, s int) byte {
	i := x % pqBlock
	b := codes[(x/pqBlock)*16*m+(s/2)*32+(s%2)*16+i%16]
	if i < 16 {
		return b & 0x0f
	}
	return b >> 4
}

// codesOf sets out[:m] to the 4-bit codes of vector x in blocked codes of
// m subspaces (codeAt for every subspace): in its block, subspaces s and
// s+1 (s even) share 32 bytes, a nibble a vector.
func codesOf(codes []byte, m, x int, out []byte) {
	blk := codes[(x/pqBlock)*16*m : (x/pqBlock+1)*16*m]
	at, shift := x%16, 4*((x%pqBlock)/16)
	out = out[:m]
	for s := 0; s+1 < m; s += 2 {
		out[s] = blk[s*16+at] >> shift & 0x0f
		out[s+1] = blk[s*16+16+at] >> shift & 0x0f
	}
}

// decode writes vector x (its centroid plus its decoded residual) to out
// (dim elements).
func (v *resView) decode(x int, out []float32) {
	cb := v.cb
	d := cb.dim
	a := alphaValue(v.alphas[x])
	for k, c := range v.centroids[int(v.cellOf[x])*d : (int(v.cellOf[x])+1)*d] {
		out[k] = a * c
	}
	if cb.dir != nil {
		var buf [pqMaxSubspaces]byte
		codes := buf[:cb.m]
		codesOf(v.codes, cb.m, x, codes)
		cb.addDirs(codes, out)
		return
	}
	for s := 0; s < cb.m; s++ {
		c := codeAt(v.codes, cb.m, x, s)
		cent := cb.centroids[(s*pqCentroids+int(c))*cb.dsub:]
		for k := 0; k < cb.dsub && s*cb.dsub+k < d; k++ {
			out[s*cb.dsub+k] += cent[k]
		}
	}
}

// resQuery is a query prepared for compressed segments: its vectors'
// dot products with every cell's centroid and, per residual codebook,
// its tables (exact, and quantised for the kernel).
type resQuery struct {
	q      []float32
	d, nq  int
	tables map[quantizerID][]float32 // cells x nq
	// exact holds the exact tables for exactAdd: m x 16 rows of stride
	// floats (transposeExact).
	exact  map[quantizerID][]float32
	stride int
	luts   map[quantizerID]*pqQuery
}

// newResQuery prepares q (rows of d) for the compressed segments of segs.
func newResQuery(segs []*segment, q []float32, d int) *resQuery {
	nq := len(q) / d
	rq := &resQuery{q: q, d: d, nq: nq, tables: map[quantizerID][]float32{},
		exact: map[quantizerID][]float32{}, luts: map[quantizerID]*pqQuery{}, stride: tableStride(nq)}
	var pf *packedFloats
	for _, seg := range segs {
		v := seg.res
		if v == nil {
			continue
		}
		if _, ok := rq.tables[v.id]; !ok {
			if pf == nil {
				pf = packFloats(q, d)
			}
			t := make([]float32, v.cells*rq.nq)
			var tmp []float32
			dotsInto(v.centroids, d, pf, t, &tmp)
			rq.tables[v.id] = t
		}
		if _, ok := rq.luts[v.cbID]; !ok {
			ft := v.cb.floatTables(q)
			rq.luts[v.cbID] = v.cb.lutsOf(ft)
			rq.exact[v.cbID] = transposeExact(ft, nq, v.cb.m, rq.stride)
		}
		if c := v.coarse; c != nil {
			if _, ok := rq.luts[c.cbID]; !ok {
				rq.luts[c.cbID] = c.cb.lutsOf(c.cb.floatTables(q))
			}
		}
	}
	return rq
}

// floatTables returns, for each query vector (rows of cb.dim) and
// subspace, its dot products with the 16 centroids: nq x m x 16.
func (cb *pqCodebook) floatTables(vecs []float32) []float32 {
	if cb.dir != nil {
		return cb.dirTables(vecs)
	}
	n := len(vecs) / cb.dim
	out := make([]float32, n*cb.m*pqCentroids)
	buf := make([]float32, cb.dsub)
	for v := 0; v < n; v++ {
		x := vecs[v*cb.dim : (v+1)*cb.dim]
		for s := 0; s < cb.m; s++ {
			sub := cb.sub(x, s, buf)
			row := out[(v*cb.m+s)*pqCentroids : (v*cb.m+s+1)*pqCentroids]
			for c := range row {
				cent := cb.centroids[(s*pqCentroids+c)*cb.dsub:]
				var dot float32
				for k, e := range sub {
					dot += e * cent[k]
				}
				row[c] = dot
			}
		}
	}
	return out
}

// resScratch holds one goroutine's buffers for scoring residual codes.
type resScratch struct {
	sums      []uint16
	sims, acc []float32
	codes     []byte
}

// score scores items [lo, hi) of v into out[0 : hi-lo] with the fast-scan
// kernel: each cosine is the vector's centroid score plus the quantised
// tables' estimate of its residual's.
func (sc *resScratch) score(v *resView, rq *resQuery, s model.Scoring, queryIsText bool, lo, hi int, out []float32) {
	v0, v1 := v.offsets[lo], v.offsets[hi]
	if v1 == v0 {
		clear(out)
		return
	}
	q, t := rq.luts[v.cbID], rq.tables[v.id]
	b0, b1 := v0/pqBlock, pqBlocks(v1)
	nb, nq, bs := b1-b0, q.n, 16*q.m
	sc.sums = grow(sc.sums, nb*len(q.luts)*64)
	codes := v.codes[b0*bs : b1*bs]
	for p, lut := range q.luts {
		fastscan(codes, nb, q.m, lut, sc.sums[p*nb*64:(p+1)*nb*64])
	}
	base := v0 - b0*pqBlock
	nv := v1 - v0
	sc.sims = grow(sc.sims, nv*nq)
	if s == model.MrSw && queryIsText {
		// Each word's best region without the matrix: the vectors'
		// centroid terms, then per word the max over an item's vectors of
		// centroid term plus scaled sum (the bias is the word's own).
		for r := 0; r < nv; r++ {
			a := alphaValue(v.alphas[v0+r])
			c := int(v.cellOf[v0+r])
			row := sc.sims[r*nq : (r+1)*nq]
			for qi, ct := range t[c*nq : (c+1)*nq] {
				row[qi] = a * ct
			}
		}
		scoreText(sc.sims[:nv*nq], nq, sc.sums[:len(q.luts)*nb*64], nb, base, v.offsets[lo:hi+1], q.scale[:nq], q.bias[:nq], out[:hi-lo])
		return
	}
	if s == model.MrSw && nq > 0 {
		// An image query: each caption word's max over the query's
		// regions, summed over the words, without the matrix.
		for i := lo; i < hi; i++ {
			var total float32
			for r := v.offsets[i] - v0; r < v.offsets[i+1]-v0; r++ {
				x := r + base
				k := (x/pqBlock)*64 + x%pqBlock
				a := alphaValue(v.alphas[v0+r])
				ct := t[int(v.cellOf[v0+r])*nq : int(v.cellOf[v0+r]+1)*nq]
				best := float32(math.Inf(-1))
				for qi, c := range ct {
					if val := a*c + q.scale[qi]*float32(sc.sums[(qi/2)*nb*64+(qi%2)*32+k]) + q.bias[qi]; val > best {
						best = val
					}
				}
				total += best
			}
			out[i-lo] = total
		}
		return
	}
	for r := 0; r < nv; r++ {
		x := r + base
		k := (x/pqBlock)*64 + x%pqBlock
		row := sc.sims[r*nq : (r+1)*nq]
		ct := t[int(v.cellOf[v0+r])*nq:]
		a := alphaValue(v.alphas[v0+r])
		for qi := range row {
			row[qi] = a*ct[qi] + q.scale[qi]*float32(sc.sums[(qi/2)*nb*64+(qi%2)*32+k]) + q.bias[qi]
		}
	}
	poolItems(sc.sims, v.offsets, lo, hi, nq, s, queryIsText, out)
}

// exact scores item i of v with its codes decoded exactly: each cosine is
// the centroid score plus the sum of the residual's float tables, added
// subspace by subspace (exactAdd).
func (sc *resScratch) exact(v *resView, rq *resQuery, s model.Scoring, queryIsText bool, i int) float32 {
	x0, x1 := v.offsets[i], v.offsets[i+1]
	nq, m := rq.nq, v.cb.m
	ft, t := rq.exact[v.cbID], rq.tables[v.id]
	sc.sims = grow(sc.sims, (x1-x0)*nq)
	sc.codes = grow(sc.codes, m)
	sc.acc = grow(sc.acc, rq.stride)
	for x := x0; x < x1; x++ {
		codesOf(v.codes, m, x, sc.codes)
		ct := t[int(v.cellOf[x])*nq : int(v.cellOf[x]+1)*nq]
		a := alphaValue(v.alphas[x])
		for qi, c := range ct {
			sc.acc[qi] = a * c
		}
		clear(sc.acc[nq:])
		exactAdd(sc.codes[:m], ft, rq.stride, sc.acc)
		copy(sc.sims[(x-x0)*nq:(x-x0+1)*nq], sc.acc[:nq])
	}
	return pool(sc.sims[:(x1-x0)*nq], x1-x0, nq, s, queryIsText)
}

// scoreResidual scores the query against every item of v on the residual
// codes (the fast-scan estimate), in parallel over blocks of items.
func scoreResidual(ctx context.Context, v *resView, rq *resQuery, s model.Scoring, queryIsText bool) ([]float32, error) {
	return scoreWith(ctx, v.offsets, pqTaskVectors, func(sc *resScratch, lo, hi int, out []float32) {
		sc.score(v, rq, s, queryIsText, lo, hi, out)
	})
}

// allResidual reports whether every segment is stored compressed; anyResidual
// whether one is.
func allResidual(segs []*segment) bool {
	for _, s := range segs {
		if s.res == nil {
			return false
		}
	}
	return len(segs) > 0
}

func anyResidual(segs []*segment) bool {
	for _, s := range segs {
		if s.res != nil {
			return true
		}
	}
	return false
}

// resCandidates returns the n items of segs (all compressed) rated best for
// q by stages 1-3 of the top of this file, in index order.
func resCandidates(ctx context.Context, segs []*segment, q *query, n int) ([]candidate, error) {
	rq := q.res
	// How many items stage 3 rates, and so how many stage 2 should meet.
	keep := max(resInteractFactor*n, resInteractMin)
	res, err := rateListed(ctx, segs, probeOrder(segs, rq, q.probes), q.probes, keep)
	if err != nil {
		return nil, err
	}
	all, who := flatten(segs, res)
	// Stage 3: centroid interaction for the best of them, taken in index
	// order (their vectors' cells and cosines read in order).
	top := topSet(all, keep)
	slices.Sort(top)
	first := make([]candidate, len(top))
	for i, h := range top {
		first[i] = who(h)
	}
	ci, err := interactAll(ctx, segs, first, q)
	if err != nil {
		return nil, err
	}
	best := topSet(ci, n)
	slices.Sort(best) // in index order: their codes are read from disk in order
	out := make([]candidate, len(best))
	for i, h := range best {
		out[i] = first[h]
	}
	return out, nil
}

// cellProbe is a cell a query vector probes and the vector's score with
// its centroid.
type cellProbe struct {
	cell int32
	t    float32
}

// probeOrder is stage 1: for each quantizer of segs and each query vector,
// its best cells, best first: the probes it must make, then more that
// stage 2 makes while it has met too few items.
func probeOrder(segs []*segment, rq *resQuery, probes int) map[quantizerID][][]cellProbe {
	nq := rq.nq
	probed := map[quantizerID][][]cellProbe{} // per quantizer, per query vector
	for _, seg := range segs {
		v := seg.res
		if _, ok := probed[v.id]; ok {
			continue
		}
		t := rq.tables[v.id]
		col := make([]float32, v.cells)
		per := make([][]cellProbe, nq)
		for w := range nq {
			for c := range col {
				col[c] = t[c*nq+w]
			}
			for _, h := range model.TopK(col, min(max(probes, resMaxProbes), v.cells)) {
				per[w] = append(per[w], cellProbe{int32(h.Index), h.Score})
			}
		}
		probed[v.id] = per
	}
	return probed
}

// rateListed is stage 2: per segment, the items met in the probed cells'
// lists, rated by their best probed cell per query vector. Cells are
// probed in rounds, each query vector's next best in each: the first
// probes rounds always, more until the segment has met its share of keep.
func rateListed(ctx context.Context, segs []*segment, probed map[quantizerID][][]cellProbe, probes, keep int) ([]rated, error) {
	total := 0
	for _, seg := range segs {
		total += seg.header.Items
	}
	res := make([]rated, len(segs))
	err := eachSegment(ctx, segs, func(si int, seg *segment) {
		v := seg.res
		buf := rateBuffers.Get().(*rateBuf)
		defer rateBuffers.Put(buf)
		// acc needs no clearing (an item's first count sets it); stamp
		// is all zero between uses (cleared below for the items met).
		acc := grow(buf.acc, seg.header.Items)
		if cap(buf.stamp) < seg.header.Items {
			buf.stamp = make([]int32, seg.header.Items)
		}
		stamp := buf.stamp[:seg.header.Items]
		buf.acc = acc
		var touched []int32
		share := int(int64(keep) * int64(seg.header.Items) / int64(max(total, 1)))
		per := probed[v.id]
		for r := 0; ; r++ {
			if r >= probes && len(touched) >= share {
				break
			}
			more := false
			for w, ps := range per {
				if r >= len(ps) {
					continue
				}
				more = true
				p := ps[r]
				for _, it := range v.listItems[v.listOff[p.cell]:v.listOff[p.cell+1]] {
					switch stamp[it] {
					case int32(w + 1): // a better cell of this query vector counted it
					case 0:
						touched = append(touched, it)
						stamp[it], acc[it] = int32(w+1), p.t
					default:
						stamp[it] = int32(w + 1)
						acc[it] += p.t
					}
				}
			}
			if !more {
				break
			}
		}
		slices.Sort(touched)
		sc := make([]float32, len(touched))
		for i, it := range touched {
			sc[i] = acc[it]
			stamp[it] = 0
		}
		res[si] = rated{touched, sc}
	})
	return res, err
}

// interactAll is stage 3: the centroid interaction of each of the items
// first (in index order) with q. A text query under MrSw goes through the
// interaction kernel, a run of one segment's items at a time, with the
// query's tables padded for it.
func interactAll(ctx context.Context, segs []*segment, first []candidate, q *query) ([]float32, error) {
	rq, nq := q.res, q.res.nq
	ci := make([]float32, len(first))
	var padded map[quantizerID]*paddedTable
	if q.s == model.MrSw && q.text {
		padded = map[quantizerID]*paddedTable{}
		for _, seg := range segs {
			if v := seg.res; padded[v.id] == nil {
				padded[v.id] = padTable(rq.tables[v.id], v.cells, nq)
			}
		}
	}
	err := forRanges(ctx, len(first), 256, func() func(lo, hi int) {
		var sc interactScratch
		return func(lo, hi int) {
			if padded != nil {
				for lo < hi {
					seg, j := first[lo].seg, lo
					sc.rows = sc.rows[:0]
					for ; j < hi && first[j].seg == seg; j++ {
						sc.rows = append(sc.rows, int32(first[j].row))
					}
					p := padded[seg.res.id]
					sc.best = grow(sc.best, p.stride)
					interact(seg.res, p, nq, sc.rows, sc.best, ci[lo:j])
					lo = j
				}
				return
			}
			for i := lo; i < hi; i++ {
				c := first[i]
				ci[i] = sc.rate(c.seg.res, rq.tables[c.seg.res.id], nq, c.row, q.s, q.text)
			}
		}
	})
	return ci, err
}

// interactScratch holds one goroutine's buffers for centroid
// interaction.
type interactScratch struct {
	sims, best []float32
	rows       []int32
}

// rate returns the centroid interaction of item i of v with the query
// whose centroid table (cells x nq) is t: the query's alignment with its
// vectors' centroids times their cosines, pooled as s says. (A text query
// under MrSw goes through interact instead.)
func (sc *interactScratch) rate(v *resView, t []float32, nq, i int, s model.Scoring, queryIsText bool) float32 {
	x0, x1 := v.offsets[i], v.offsets[i+1]
	sc.sims = grow(sc.sims, (x1-x0)*nq)
	for x := x0; x < x1; x++ {
		a := alphaValue(v.alphas[x])
		row := sc.sims[(x-x0)*nq : (x-x0+1)*nq]
		for qi, ct := range t[int(v.cellOf[x])*nq : int(v.cellOf[x]+1)*nq] {
			row[qi] = a * ct
		}
	}
	return pool(sc.sims, x1-x0, nq, s, queryIsText)
}

// rateBuf is a goroutine's per-item buffers for stage 2 of resCandidates,
// kept between searches (rateBuffers): at ten million images a search
// would otherwise allocate 8 bytes an item.
type rateBuf struct {
	acc   []float32
	stamp []int32
}

var rateBuffers = sync.Pool{New: func() any { return new(rateBuf) }}

// Centroid interaction (stage 3) rates max(resInteractFactor x candidates,
// resInteractMin) items.
const (
	resInteractFactor = 8
	resInteractMin    = 4096
	// resMaxProbes bounds the cells each query vector probes in stage 2
	// to meet enough items for stage 3.
	resMaxProbes = 64
)

// narrowByCoarse returns the best reads of the candidates (of compressed
// segments with coarse codes) by their coarse codes' estimates, in index
// order (their residual codes are then read from disk in order).
func narrowByCoarse(ctx context.Context, cands []candidate, q *query, reads int) ([]candidate, error) {
	scores, err := estimate(ctx, cands, q, func(s *segment) estimator { return coarseCodes{s} })
	if err != nil {
		return nil, err
	}
	best := model.TopK(scores, reads)
	slices.SortFunc(best, func(a, b model.Hit) int { return a.Index - b.Index })
	kept := make([]candidate, len(best))
	for i, h := range best {
		kept[i] = cands[h.Index]
	}
	return kept, nil
}

// allCoarse reports whether every segment of segs has coarse codes.
func allCoarse(segs []*segment) bool {
	for _, s := range segs {
		if s.res == nil || s.res.coarse == nil {
			return false
		}
	}
	return true
}

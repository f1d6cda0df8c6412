package index

import (
	"context"
	"fmt"
	"math"

	"github.com/xmr-project/xmr/model"
)

// This file holds the 4-bit product-quantisation ("fast-scan") path, the
// default compressed scoring of segments of format version 2:
//
//   - every vector is cut into pqSubspaces(dim, dsub) subspaces of dsub
//     elements (the last ones padded with zeros); a codebook of 16
//     centroids per subspace, trained by k-means on the segment's vectors
//     when it is written, gives each subvector a 4-bit code (the nearest
//     centroid);
//   - a query vector becomes, per subspace, a table of its 16 dot products
//     with the centroids, quantised to uint8 (at most 127, so that two
//     look-ups add in a byte) with one scale and one bias per query vector;
//   - the kernel (fastscan_amd64.s: VPSHUFB looks up 32 codes at once in a
//     16-entry table held in a register) adds the tables' entries over the
//     subspaces in uint16 for blocks of 32 item vectors and two query
//     vectors at a time; scale * sum + bias estimates the dot product, and
//     the estimates are pooled as the int8 path pools them.
//
// Codes are laid out for the kernel in blocks of 32 vectors (the last
// block padded with zero codes). A block is m/2 groups of 32 bytes, one
// group per pair of subspaces (2p, 2p+1): byte j < 16 holds the codes of
// subspace 2p of vectors j (low nibble) and j+16 (high nibble); byte 16+j
// the same for subspace 2p+1. A query vector's tables are laid out the
// same way: 32 bytes per pair, the 16 entries of subspace 2p then those of
// subspace 2p+1.

// PQ limits: pqMaxSubspaces keeps the kernel's uint16 sums exact (at most
// 512 x 127 < 65536); the subspace count is a multiple of 4 (the kernel
// takes two pairs of subspaces per step).
const (
	pqCentroids    = 16
	pqBlock        = 32
	pqMaxSubspaces = 512
	pqMaxEntry     = 127
	// pqDefaultDsub is the subspace width segments are written with (see
	// pqDsubFor).
	pqDefaultDsub = 4
	// pqTrainVectors caps the sample the codebooks are trained on;
	// pqIterations is the number of k-means iterations.
	pqTrainVectors = 16384
	pqIterations   = 12
)

// pqShape returns the subspace width and count for vectors of dim: the
// width is at least dsub and wide enough that the count stays within
// pqMaxSubspaces; the count covers dim and is a multiple of 4.
func pqShape(dim, dsub int) (width, subspaces int) {
	width = max(dsub, (dim+pqMaxSubspaces-1)/pqMaxSubspaces)
	for {
		subspaces = ((dim+width-1)/width + 3) / 4 * 4
		if subspaces <= pqMaxSubspaces {
			return width, subspaces
		}
		width++
	}
}

// pqDsubFor returns the subspace width asked of pqShape for vectors of
// dim: pqDefaultDsub, narrower below 256 dimensions so that there are
// about 64 subspaces or, below 64 dimensions, one per element (a handful
// of 4-bit subspaces cannot tell vectors apart).
func pqDsubFor(dim int) int { return max(1, min(pqDefaultDsub, dim/64)) }

// pqBlocks returns how many blocks of 32 hold n vectors.
func pqBlocks(n int) int { return (n + pqBlock - 1) / pqBlock }

// pqCodebook is a trained product quantiser: centroids[(s*16+c)*dsub+k] is
// element k of centroid c of subspace s.
type pqCodebook struct {
	dim, dsub, m int
	centroids    []float32
	// dir, when set, makes the codebook a direction coder (directions.go):
	// dsub is 1, and subspace s codes a coordinate along direction
	// dir.dirOf[s], its centroids the stage's 16 levels.
	dir *dirCoder
}

// sub returns subspace s of vector v (of length dim) in buf, zero-padded
// to dsub elements.
func (cb *pqCodebook) sub(v []float32, s int, buf []float32) []float32 {
	lo := s * cb.dsub
	clear(buf)
	if lo < len(v) {
		copy(buf, v[lo:min(lo+cb.dsub, len(v))])
	}
	return buf
}

// pqQuery is a query's vectors as quantised look-up tables for one
// codebook, in pairs of query vectors (the kernel's unit; an odd count is
// padded with an all-zero table): the dot product of query vector q with
// an item vector is estimated as scale[q] * sum + bias[q], sum being the
// kernel's uint16 sum of the tables' entries at the item's codes.
type pqQuery struct {
	n, m        int
	luts        [][]byte // per pair: 2 x 16m bytes
	scale, bias []float32
}

// pqLUTs builds the tables of the query vectors vecs (rows of cb.dim).
func (cb *pqCodebook) pqLUTs(vecs []float32) *pqQuery {
	return cb.lutsOf(cb.floatTables(vecs))
}

// lutsOf quantises the tables ft of floatTables (not changed) into the
// kernel's.
func (cb *pqCodebook) lutsOf(ft []float32) *pqQuery {
	n := len(ft) / (cb.m * pqCentroids)
	pairs := (n + 1) / 2
	q := &pqQuery{n: n, m: cb.m, scale: make([]float32, 2*pairs), bias: make([]float32, 2*pairs)}
	for p := 0; p < pairs; p++ {
		q.luts = append(q.luts, make([]byte, 2*16*cb.m))
	}
	mins := make([]float32, cb.m)
	for v := 0; v < n; v++ {
		t := ft[v*cb.m*pqCentroids : (v+1)*cb.m*pqCentroids]
		var span float32
		var bias float64
		for s := 0; s < cb.m; s++ {
			row := t[s*pqCentroids : (s+1)*pqCentroids]
			lo, hi := row[0], row[0]
			for _, d := range row[1:] {
				lo, hi = min(lo, d), max(hi, d)
			}
			mins[s] = lo
			bias += float64(lo)
			span = max(span, hi-lo)
		}
		scale := span / pqMaxEntry
		q.scale[v], q.bias[v] = scale, float32(bias)
		if !(scale > 0) || math.IsInf(float64(scale), 0) { // a zero (or non-finite) query vector: all-zero tables
			q.scale[v], q.bias[v] = 1, 0
			continue
		}
		lut := q.luts[v/2][(v%2)*16*cb.m:]
		for s := 0; s < cb.m; s++ {
			for c := 0; c < pqCentroids; c++ {
				e := math.Round(float64((t[s*pqCentroids+c] - mins[s]) / scale))
				lut[(s/2)*32+(s%2)*16+c] = byte(min(max(e, 0), pqMaxEntry))
			}
		}
	}
	return q
}

// fastscanGo is the portable fastscan: for each of nblocks blocks of codes
// (16m bytes each) and each of the two query vectors whose tables are lut
// (2 x 16m bytes), out[b*64+j*32+i] = the sum over the m subspaces of
// query j's entry at vector i's code.
func fastscanGo(codes []byte, nblocks, m int, lut []byte, out []uint16) {
	bs := 16 * m
	for b := 0; b < nblocks; b++ {
		blk := codes[b*bs : (b+1)*bs]
		for j := 0; j < 2; j++ {
			t := lut[j*bs : (j+1)*bs]
			var acc [pqBlock]uint16
			for g := 0; g < m/2; g++ {
				cg, tg := blk[g*32:g*32+32], t[g*32:g*32+32]
				for i := 0; i < 16; i++ {
					lo, hi := cg[i], cg[16+i]
					acc[i] += uint16(tg[lo&0x0f]) + uint16(tg[16+hi&0x0f])
					acc[16+i] += uint16(tg[lo>>4]) + uint16(tg[16+hi>>4])
				}
			}
			copy(out[b*64+j*32:b*64+j*32+32], acc[:])
		}
	}
}

// pqView is the product-quantised form of a segment's vectors.
type pqView struct {
	cb      *pqCodebook
	codes   []byte // pqBlocks(vectors) x 16m
	offsets []int  // as Embeddings.Offsets
}

// pqTaskVectors is about how many item vectors one task scores: their
// codes (16 blocks of 4 KiB at 256 subspaces) stay in the L2 cache while
// every pair of query vectors passes over them.
const pqTaskVectors = 512

// scorePQ scores the query vectors (rows of the codebook's dim) against
// every item of v with scoring s, in parallel over blocks of items.
func scorePQ(ctx context.Context, v *pqView, q *pqQuery, s model.Scoring, queryIsText bool) ([]float32, error) {
	return scoreWith(ctx, v.offsets, pqTaskVectors, func(sc *pqScratch, lo, hi int, out []float32) {
		sc.score(v, q, s, queryIsText, lo, hi, out)
	})
}

// pqScratch holds one goroutine's buffers for scoring PQ codes.
type pqScratch struct {
	sums []uint16  // pairs x blocks x 64
	sims []float32 // vectors x query vectors
}

// score scores items [lo, hi) of v into out[0 : hi-lo].
func (sc *pqScratch) score(v *pqView, q *pqQuery, s model.Scoring, queryIsText bool, lo, hi int, out []float32) {
	v0, v1 := v.offsets[lo], v.offsets[hi]
	if v1 == v0 {
		clear(out)
		return
	}
	b0, b1 := v0/pqBlock, pqBlocks(v1)
	nb, nq, bs := b1-b0, q.n, 16*q.m
	pairs := len(q.luts)
	sc.sums = grow(sc.sums, nb*pairs*64)
	codes := v.codes[b0*bs : b1*bs]
	for p, lut := range q.luts {
		fastscan(codes, nb, q.m, lut, sc.sums[p*nb*64:(p+1)*nb*64])
	}
	// sum(p, j, x): the kernel's sum of query vector 2p+j at the vector x
	// places after the first of block b0.
	at := func(p, j, x int) int { return p*nb*64 + (x/pqBlock)*64 + j*32 + x%pqBlock }
	base := v0 - b0*pqBlock
	if s == model.MrSw && queryIsText {
		// The max over an image's regions of scale*sum + bias is scale
		// times the max of the sums, plus bias: pool the integer sums.
		for i := lo; i < hi; i++ {
			x0, x1 := v.offsets[i]-v0+base, v.offsets[i+1]-v0+base
			var t float32
			for qi := 0; qi < nq && x1 > x0; qi++ {
				p, j := qi/2, qi%2
				var best uint16
				for x := x0; x < x1; x++ {
					best = max(best, sc.sums[at(p, j, x)])
				}
				t += q.scale[qi]*float32(best) + q.bias[qi]
			}
			out[i-lo] = t
		}
		return
	}
	if s == model.MrSw && nq > 0 {
		// An image query: each caption word's max over the query's
		// regions, summed over the words, without the matrix.
		for i := lo; i < hi; i++ {
			var t float32
			for x := v.offsets[i] - v0 + base; x < v.offsets[i+1]-v0+base; x++ {
				// at(qi/2, qi%2, x) with x's part hoisted out of the loop
				// over the query's vectors (5% of i2t in BenchmarkScorePQ).
				k := (x/pqBlock)*64 + x%pqBlock
				best := float32(math.Inf(-1))
				for qi := 0; qi < nq; qi++ {
					best = max(best, q.scale[qi]*float32(sc.sums[(qi/2)*nb*64+(qi%2)*32+k])+q.bias[qi])
				}
				t += best
			}
			out[i-lo] = t
		}
		return
	}
	nv := v1 - v0
	sc.sims = grow(sc.sims, nv*nq)
	for r := 0; r < nv; r++ {
		row := sc.sims[r*nq : (r+1)*nq]
		for qi := range row {
			row[qi] = q.scale[qi]*float32(sc.sums[at(qi/2, qi%2, r+base)]) + q.bias[qi]
		}
	}
	poolItems(sc.sims, v.offsets, lo, hi, nq, s, queryIsText, out)
}

// checkPQ checks the product-quantiser shape of the header of a segment of
// format version (segVersion or segVersionResidual).
func checkPQ(h *segmentHeader, version uint32) error {
	p := h.PQ
	if p == nil {
		what := "product-quantised codes"
		if version == segVersionResidual {
			what = "product-quantised residuals"
		}
		return fmt.Errorf("header: no \"pq\" shape (format version %d has %s)", version, what)
	}
	if p.Directions != 0 {
		if p.Directions < 0 || p.Directions > min(h.Dim, p.Subspaces) || p.Dsub != 1 || p.Subspaces < 4 || p.Subspaces%4 != 0 || p.Subspaces > pqMaxSubspaces {
			return fmt.Errorf("header: direction coder of %d subspaces over %d directions (subspaces of %d elements) does not fit dimension %d: want 1 to min(dimension, subspaces) directions, subspaces of 1 element, a multiple of 4 of at most %d subspaces", p.Subspaces, p.Directions, p.Dsub, h.Dim, pqMaxSubspaces)
		}
		return nil
	}
	if !p.fits(h.Dim) {
		return fmt.Errorf("header: product quantiser of %d subspaces of %d elements does not fit dimension %d", p.Subspaces, p.Dsub, h.Dim)
	}
	return nil
}

// fits reports whether p is the shape pqShape gives a product quantiser
// of vectors of dim (no direction coder).
func (p *pqHeader) fits(dim int) bool {
	w, m := pqShape(dim, p.Dsub)
	return p.Directions == 0 && p.Dsub > 0 && p.Dsub <= dim && w == p.Dsub && m == p.Subspaces
}

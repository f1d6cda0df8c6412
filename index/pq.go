package index

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

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
	// pqRerank is the least number of candidates the PQ path rescores in
	// float32 by default (SearchOptions.Rerank).
	pqRerank = 300
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

// trainPQ trains a codebook with subspaces of about dsub elements (see
// pqShape) on vecs (rows of dim) by k-means: a deterministic sample of at
// most pqTrainVectors vectors, 16 centroids per subspace, pqIterations
// iterations, the subspaces in parallel.
func trainPQ(vecs []float32, dim, dsub int) *pqCodebook {
	w, m := pqShape(dim, dsub)
	cb := &pqCodebook{dim: dim, dsub: w, m: m, centroids: make([]float32, m*pqCentroids*w)}
	n := len(vecs) / dim
	if n == 0 {
		return cb
	}
	sample := strided(n, pqTrainVectors)
	parallel(m, func(s int) {
		pts := make([]float32, len(sample)*w)
		for i, r := range sample {
			cb.sub(vecs[r*dim:(r+1)*dim], s, pts[i*w:(i+1)*w])
		}
		kmeans(pts, w, cb.centroids[s*pqCentroids*w:(s+1)*pqCentroids*w], uint64(s))
	})
	return cb
}

// kmeans clusters the points (rows of w) into len(cent)/w centroids,
// written to cent. With fewer distinct points than centroids, points
// repeat.
func kmeans(pts []float32, w int, cent []float32, seed uint64) {
	n, k := len(pts)/w, len(cent)/w
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	perm := rng.Perm(n)
	for c := 0; c < k; c++ {
		copy(cent[c*w:(c+1)*w], pts[perm[c%n]*w:])
	}
	assign := make([]int, n)
	sums := make([]float64, k*w)
	counts := make([]int, k)
	for range pqIterations {
		for i := 0; i < n; i++ {
			assign[i] = nearest(pts[i*w:(i+1)*w], cent, w)
		}
		clear(sums)
		clear(counts)
		for i, c := range assign {
			counts[c]++
			for j, x := range pts[i*w : (i+1)*w] {
				sums[c*w+j] += float64(x)
			}
		}
		for c := 0; c < k; c++ {
			if counts[c] == 0 { // an empty cluster restarts at a random point
				copy(cent[c*w:(c+1)*w], pts[rng.IntN(n)*w:])
				continue
			}
			for j := 0; j < w; j++ {
				cent[c*w+j] = float32(sums[c*w+j] / float64(counts[c]))
			}
		}
	}
}

// nearest returns the index of the centroid (rows of w in cent) closest to
// x in Euclidean distance; ties go to the lower index.
func nearest(x, cent []float32, w int) int {
	best, bestD := 0, float32(math.Inf(1))
	for c := 0; c < len(cent)/w; c++ {
		var d float32
		for j, v := range x {
			t := v - cent[c*w+j]
			d += t * t
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// encode returns the codes of vecs (rows of dim) in the kernel's block
// layout (see the top of this file), in parallel.
func (cb *pqCodebook) encode(vecs []float32) []byte {
	n := len(vecs) / cb.dim
	nb := pqBlocks(n)
	bs := 16 * cb.m // bytes per block
	out := make([]byte, nb*bs)
	half := cb.halfNorms()
	parallel(nb, func(b int) {
		buf := make([]float32, cb.m*cb.dsub)
		blk := out[b*bs : (b+1)*bs]
		for i := 0; i < pqBlock && b*pqBlock+i < n; i++ {
			copy(buf, vecs[(b*pqBlock+i)*cb.dim:(b*pqBlock+i+1)*cb.dim])
			cb.encodeInto(blk, i, buf, half)
		}
	})
	return out
}

// halfNorms returns half the squared norm of every centroid (m x 16): the
// nearest centroid to x is the one with the largest x.c - |c|^2/2.
func (cb *pqCodebook) halfNorms() []float32 {
	half := make([]float32, cb.m*pqCentroids)
	for c := range half {
		for _, v := range cb.centroids[c*cb.dsub : (c+1)*cb.dsub] {
			half[c] += v * v / 2
		}
	}
	return half
}

// encodeInto stores the codes of x (m x dsub elements, zero past the
// dimension) as vector i of the block blk; half is halfNorms().
func (cb *pqCodebook) encodeInto(blk []byte, i int, x, half []float32) {
	w := cb.dsub
	for s := 0; s < cb.m; s++ {
		setCode(blk, s, i, byte(nearestHalf(x[s*w:(s+1)*w], cb.centroids[s*pqCentroids*w:(s+1)*pqCentroids*w], half[s*pqCentroids:(s+1)*pqCentroids])))
	}
}

// squaredError returns the mean squared error per vector of cb's codes of
// vecs (rows of cb.dim, plain product quantisation).
func (cb *pqCodebook) squaredError(vecs []float32) float64 {
	n := len(vecs) / cb.dim
	if n == 0 {
		return 0
	}
	half := cb.halfNorms()
	errs := make([]float64, n)
	parallel((n+255)/256, func(t int) {
		buf := make([]float32, cb.m*cb.dsub)
		for i := t * 256; i < min(n, t*256+256); i++ {
			x := vecs[i*cb.dim : (i+1)*cb.dim]
			copy(buf, x)
			var e float64
			for s := range cb.m {
				w := cb.dsub
				c := nearestHalf(buf[s*w:(s+1)*w], cb.centroids[s*pqCentroids*w:(s+1)*pqCentroids*w], half[s*pqCentroids:(s+1)*pqCentroids])
				for k, u := range buf[s*w : (s+1)*w] {
					r := float64(u - cb.centroids[(s*pqCentroids+c)*w+k])
					e += r * r
				}
			}
			errs[i] = e
		}
	})
	var sum float64
	for _, e := range errs {
		sum += e
	}
	if math.IsNaN(sum) {
		return math.Inf(1)
	}
	return sum / float64(n)
}

// setCode stores the 4-bit code c of subspace s of vector i (< 32) in the
// block blk; code returns it.
func setCode(blk []byte, s, i int, c byte) {
	at := (s/2)*32 + (s%2)*16 + i%16
	if i < 16 {
		blk[at] = blk[at]&0xf0 | c
	} else {
		blk[at] = blk[at]&0x0f | c<<4
	}
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
	return scoreBlocks(ctx, v.offsets, pqTaskVectors, func() func(lo, hi int, out []float32) {
		var sc pqScratch
		return func(lo, hi int, out []float32) { sc.score(v, q, s, queryIsText, lo, hi, out) }
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
	for i := lo; i < hi; i++ {
		a, b := v.offsets[i]-v0, v.offsets[i+1]-v0
		out[i-lo] = pool(sc.sims[a*nq:b*nq], b-a, nq, s, queryIsText)
	}
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

// PQBytes returns the size of the product-quantised form of d-dimensional
// vectors as this version writes segments: bytes of 4-bit codes per
// vector, and bytes of the codebook (16 float32 centroids per subspace)
// per segment.
func PQBytes(d int) (perVector, codebook int) {
	w, m := pqShape(d, pqDsubFor(d))
	return m / 2, 4 * m * pqCentroids * w
}

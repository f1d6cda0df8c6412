package index

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"unsafe"

	"github.com/xmr-project/xmr/mmap"
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
// A pruned search (rankResidual) touches in memory only the cells' lists,
// every vector's cell and the items' offsets; then it reads the residual
// codes of a bounded number of candidates:
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
// reskernels.go do, operation for operation.

// Layout says how a Writer stores the vectors of the segments it writes.
type Layout int

const (
	// LayoutAuto stores a modality compressed when the index will hold
	// more than AutoCompressItems of its items (as LayoutOptions says),
	// with float32 vectors otherwise.
	LayoutAuto Layout = iota
	// LayoutFloat32 keeps the float32 vectors, their int8 and 4-bit
	// product-quantised codes (segment format version 2): exact search
	// and float32 re-ranking.
	LayoutFloat32
	// LayoutCompressed stores each vector as its cell and a residual in
	// 4-bit codes (format version 3), nothing in float32.
	LayoutCompressed
)

// AutoCompressItems is the size above which LayoutAuto compresses: the
// size above which searches prune (AutoPruneItems). Below it every item
// is scored and the best re-ranked in float32, so that search scores equal
// xmr eval's matrix.
const AutoCompressItems = AutoPruneItems

// LayoutOptions tell a Writer how to store vectors (Writer.SetLayout).
type LayoutOptions struct {
	Layout Layout
	// Images and Captions are how many items of each modality the build
	// adds (0: unknown), which LayoutAuto adds to those of the index.
	Images, Captions int
	// Dsub sets the residual codes' size: a byte per 2 x Dsub elements,
	// as product quantisation with subspaces of Dsub elements takes (0:
	// resDsubFor, 2 up to 512 dimensions and 4 above).
	Dsub int
	// Coder is the residuals' coder (CoderAuto: the better on the first
	// batch).
	Coder ResidualCoder
}

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

// resDsubFor returns the residual quantiser's default subspace width for
// vectors of dim: 2 elements (2 bits an element) up to 512 dimensions, 4
// above (1 bit), so that 36 regions take about 3 KB at d = 256 and 6 KB at
// d = 1024, 576 bytes more with their coarse codes (docs/benchmarks.md,
// "search", measures recall against bytes).
func resDsubFor(dim int) int {
	if dim > 512 {
		return 4
	}
	return 2
}

// coarseDsubFor returns the coarse codes' subspace width for vectors of
// dim whose residual codes have subspaces of dsub elements: 4 times as
// wide, and at most 32 subspaces (16 bytes a vector), so that at d = 256
// 36 regions' coarse codes take 576 bytes, which a search keeps in
// memory.
func coarseDsubFor(dim, dsub int) int { return max(4*dsub, dim/32) }

// coarseCoder makes a build's coarse codes: product quantisation of the
// residuals, with subspaces of coarseDsubFor elements.
type coarseCoder struct {
	cb *pqCodebook
	// table, when every coarse subspace is k whole subspaces of the
	// residual codes' product quantiser (k at most 4), holds each coarse
	// subspace's code for each combination of their k residual codes
	// (16^k entries a subspace): the coarse centroid nearest the residual
	// they decode to. Coarse codes are then looked up from the residual
	// codes rather than searched for, which would cost a build as much
	// again as the residual codes.
	table []byte
	k     int
	// dots, when every coarse subspace is k > 4 whole residual subspaces
	// (d = 1024: 8 of 4 elements), holds for each coarse subspace s,
	// each j < k and residual code c the dot products of residual
	// subspace s*k+j's centroid c with the 16 coarse centroids' part
	// there (m x k x 16 x 16). The coarse code is then the centroid
	// maximising the sum of k rows minus its half norm (half): the
	// nearest to the decoded residual, in 16k additions rather than the
	// 16 x dsub multiply-adds of a search from the residual.
	dots, half []float32
}

// trainCoarse trains the coarse codes of vecs (rows of d, filed under
// cellOf by qz) whose residual codes are rcb's, of subspaces of dsub
// elements.
func trainCoarse(modality string, vecs []float32, d int, cellOf []uint16, qz *quantizer, dsub int, rcb *pqCodebook) *coarseCoder {
	cc := &coarseCoder{cb: trainResidual(modality, vecs, d, cellOf, qz, coarseDsubFor(d, dsub), CoderPQ)}
	cb := cc.cb
	if rcb.dir != nil || cb.dsub%rcb.dsub != 0 {
		return cc
	}
	k := cb.dsub / rcb.dsub
	if cb.m*k != rcb.m {
		return cc
	}
	cc.k = k
	if k > 4 {
		cc.half = cb.halfNorms()
		cc.dots = make([]float32, cb.m*k*pqCentroids*pqCentroids)
		w := rcb.dsub
		for s := range cb.m {
			for j := range k {
				for c := range pqCentroids {
					fine := rcb.centroids[((s*k+j)*pqCentroids+c)*w:][:w]
					row := cc.dots[((s*k+j)*pqCentroids+c)*pqCentroids:][:pqCentroids]
					for cc2 := range row {
						part := cb.centroids[(s*pqCentroids+cc2)*cb.dsub+j*w:][:w]
						var dot float32
						for e, f := range fine {
							dot += f * part[e]
						}
						row[cc2] = dot
					}
				}
			}
		}
		return cc
	}
	size := 1 << (4 * k)
	cc.table = make([]byte, cb.m*size)
	half := cb.halfNorms()
	w := cb.dsub
	parallel(cb.m, func(s int) {
		x := make([]float32, w)
		for idx := range size {
			for j := range k {
				c := idx >> (4 * j) & 15
				copy(x[j*rcb.dsub:(j+1)*rcb.dsub], rcb.centroids[((s*k+j)*pqCentroids+c)*rcb.dsub:])
			}
			cc.table[s*size+idx] = byte(nearestHalf(x, cb.centroids[s*pqCentroids*w:(s+1)*pqCentroids*w], half[s*pqCentroids:(s+1)*pqCentroids]))
		}
	})
	return cc
}

// encode returns the coarse codes of vecs (rows of cb.dim, filed under
// cellOf), whose residual codes (of rm subspaces) are codes, in the
// fast-scan block layout.
func (cc *coarseCoder) encode(vecs []float32, cellOf []uint16, centroids []float32, codes []byte, rm int) []byte {
	if cc.table == nil && cc.dots == nil {
		out, _ := cc.cb.encodeResiduals(vecs, cellOf, centroids)
		return out
	}
	m, k := cc.cb.m, cc.k
	size := 1 << (4 * k)
	n := len(cellOf)
	nb := pqBlocks(n)
	out := make([]byte, nb*16*m)
	parallel((nb+31)/32, func(t int) {
		fine := make([]byte, rm)
		var acc [pqCentroids]float32
		for b := t * 32; b < min(t*32+32, nb); b++ {
			blk := out[b*16*m : (b+1)*16*m]
			for i := range min(pqBlock, n-b*pqBlock) {
				x := b*pqBlock + i
				codesOf(codes, rm, x, fine)
				for s := range m {
					if cc.dots == nil {
						idx := 0
						for j := range k {
							idx |= int(fine[s*k+j]) << (4 * j)
						}
						setCode(blk, s, i, cc.table[s*size+idx])
						continue
					}
					for c, h := range cc.half[s*pqCentroids : (s+1)*pqCentroids] {
						acc[c] = -h
					}
					for j, f := range fine[s*k : (s+1)*k] {
						row := cc.dots[((s*k+j)*pqCentroids+int(f))*pqCentroids:][:pqCentroids]
						for c, v := range row {
							acc[c] += v
						}
					}
					best := 0
					for c, v := range acc {
						if v > acc[best] {
							best = c
						}
					}
					setCode(blk, s, i, byte(best))
				}
			}
		}
	})
	return out
}

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

// cellLists returns, for vectors filed under cells by cellOf (those of the
// items of offsets), each cell's items, ascending, each once.
func cellLists(cellOf []uint16, offsets []int, cells int) (off []int64, items []int32) {
	off = make([]int64, cells+1)
	stamp := make([]int32, cells) // item+1 that last counted the cell
	base := offsets[0]
	for it := 0; it+1 < len(offsets); it++ {
		for x := offsets[it] - base; x < offsets[it+1]-base; x++ {
			if c := cellOf[x]; stamp[c] != int32(it+1) {
				stamp[c] = int32(it + 1)
				off[c+1]++
			}
		}
	}
	for c := 0; c < cells; c++ {
		off[c+1] += off[c]
	}
	items = make([]int32, off[cells])
	fill := slices.Clone(off[:cells])
	clear(stamp)
	for it := 0; it+1 < len(offsets); it++ {
		for x := offsets[it] - base; x < offsets[it+1]-base; x++ {
			if c := cellOf[x]; stamp[c] != int32(it+1) {
				stamp[c] = int32(it + 1)
				items[fill[c]] = int32(it)
				fill[c]++
			}
		}
	}
	return off, items
}

// trainResidual trains the residual quantiser of vecs (rows of d, filed
// under cellOf by qz) on a strided sample: codes of as many bytes as
// product quantisation with subspaces of dsub elements takes, by coder
// (CoderAuto: the one of smaller squared error on the sample, logged with
// modality).
func trainResidual(modality string, vecs []float32, d int, cellOf []uint16, qz *quantizer, dsub int, coder ResidualCoder) *pqCodebook {
	n := len(vecs) / d
	sample := strided(n, pqTrainVectors)
	res := make([]float32, len(sample)*d)
	for j, i := range sample {
		c := qz.centroids[int(cellOf[i])*d : int(cellOf[i]+1)*d]
		residual(res[j*d:(j+1)*d], vecs[i*d:(i+1)*d], c, alphaValue(alphaOf(vecs[i*d:(i+1)*d], c)))
	}
	var pq, dir *pqCodebook
	var pqErr, dirErr float64
	if coder != CoderDirections {
		pq = trainPQ(res, d, dsub)
		pqErr = pq.squaredError(res)
	}
	if coder != CoderPQ {
		_, m := pqShape(d, dsub)
		dir, dirErr = trainDirections(res, d, m)
	}
	switch {
	case pq == nil:
		return dir
	case dir == nil:
		return pq
	}
	keep, other, kept, otherErr := dir, "product quantisation", "principal directions", pqErr
	if dirErr >= pqErr {
		keep, other, kept, otherErr = pq, "principal directions", "product quantisation", dirErr
	}
	slog.Info("index: "+modality+": residuals coded by "+kept, "dim", d, "bytes a vector", pq.m/2,
		"mean squared error", min(pqErr, dirErr), "with "+other, otherErr)
	return keep
}

// residual sets out to v minus a times its (unit) centroid c.
func residual(out, v, c []float32, a float32) {
	for k, x := range v {
		out[k] = x - a*c[k]
	}
}

// alphaOf returns the cosine of v with its unit centroid c in 127ths: the
// part of v along c, which the residual leaves out. Queries lie near the
// centroids of the vectors they match, so that this part, kept to within
// 1/254, carries most of their scores; a residual from the centroid
// itself would be longer than v for a vector far from its centroid.
func alphaOf(v, c []float32) int8 {
	var a float32
	for k, x := range v {
		a += x * c[k]
	}
	return int8(max(-127, min(127, math.Round(float64(a)*127))))
}

// alphaValue returns the cosine that alphaOf's code stands for.
func alphaValue(a int8) float32 { return float32(a) / 127 }

// encodeResiduals returns the codes of the residuals of vecs (rows of
// cb.dim) from their cells' centroids, in the fast-scan block layout, in
// parallel.
func (cb *pqCodebook) encodeResiduals(vecs []float32, cellOf []uint16, centroids []float32) (codes []byte, alphas []int8) {
	d := cb.dim
	n := len(vecs) / d
	nb := pqBlocks(n)
	bs := 16 * cb.m
	out := make([]byte, nb*bs)
	alphas = make([]int8, n)
	half := cb.halfNorms()
	parallel((nb+31)/32, func(t int) {
		res := make([]float32, max(cb.m*cb.dsub, pqBlock*d)) // zero past d
		var y, tmp []float32
		if cb.dir != nil {
			y = make([]float32, pqBlock*cb.dir.k)
		}
		for b := t * 32; b < min(t*32+32, nb); b++ {
			blk := out[b*bs : (b+1)*bs]
			rows := min(pqBlock, n-b*pqBlock)
			for i := range rows {
				x := b*pqBlock + i
				c := centroids[int(cellOf[x])*d : int(cellOf[x]+1)*d]
				alphas[x] = alphaOf(vecs[x*d:(x+1)*d], c)
				if cb.dir != nil { // the block's residuals, turned together
					residual(res[i*d:(i+1)*d], vecs[x*d:(x+1)*d], c, alphaValue(alphas[x]))
					continue
				}
				residual(res[:d], vecs[x*d:(x+1)*d], c, alphaValue(alphas[x]))
				cb.encodeInto(blk, i, res, half)
			}
			if cb.dir != nil {
				k := cb.dir.k
				cb.dir.coords(res[:rows*d], d, y[:rows*k], &tmp)
				for i := range rows {
					cb.encodeDirs(blk, i, y[i*k:(i+1)*k])
				}
			}
		}
	})
	return out, alphas
}

// nearestHalf returns the index of the centroid (16 rows of len(x) in
// cent, half their squared norms in half) closest to x: the largest x.c -
// |c|^2/2; ties go to the lower index. Widths 2, 4 and 8 are unrolled.
func nearestHalf(x, cent, half []float32) int {
	best, bv := 0, float32(math.Inf(-1))
	switch len(x) {
	case 2:
		x0, x1 := x[0], x[1]
		cent = cent[:2*pqCentroids]
		for c := 0; c < pqCentroids; c++ {
			if v := x0*cent[2*c] + x1*cent[2*c+1] - half[c]; v > bv {
				best, bv = c, v
			}
		}
	case 4:
		x0, x1, x2, x3 := x[0], x[1], x[2], x[3]
		cent = cent[:4*pqCentroids]
		for c := 0; c < pqCentroids; c++ {
			r := cent[4*c : 4*c+4]
			if v := x0*r[0] + x1*r[1] + x2*r[2] + x3*r[3] - half[c]; v > bv {
				best, bv = c, v
			}
		}
	case 8: // the coarse codes' width at d = 256
		x0, x1, x2, x3, x4, x5, x6, x7 := x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]
		cent = cent[:8*pqCentroids]
		for c := 0; c < pqCentroids; c++ {
			r := cent[8*c : 8*c+8]
			if v := (x0*r[0] + x1*r[1] + x2*r[2] + x3*r[3]) + (x4*r[4] + x5*r[5] + x6*r[6] + x7*r[7]) - half[c]; v > bv {
				best, bv = c, v
			}
		}
	default:
		w := len(x)
		for c := 0; c < pqCentroids; c++ {
			v := -half[c]
			for k, e := range x {
				v += e * cent[c*w+k]
			}
			if v > bv {
				best, bv = c, v
			}
		}
	}
	return best
}

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
	for i := lo; i < hi; i++ {
		a, b := v.offsets[i]-v0, v.offsets[i+1]-v0
		out[i-lo] = pool(sc.sims[a*nq:b*nq], b-a, nq, s, queryIsText)
	}
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
	return scoreBlocks(ctx, v.offsets, pqTaskVectors, func() func(lo, hi int, out []float32) {
		var sc resScratch
		return func(lo, hi int, out []float32) { sc.score(v, rq, s, queryIsText, lo, hi, out) }
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
// the query by stages 1-3 of the top of this file, in index order.
func resCandidates(ctx context.Context, segs []*segment, rq *resQuery, n, probes int, s model.Scoring, queryIsText bool) ([]candidate, error) {
	nq := rq.nq
	// How many items stage 3 rates, and so how many stage 2 should meet.
	keep := max(resInteractFactor*n, resInteractMin)
	total := 0
	for _, seg := range segs {
		total += seg.header.Items
	}
	// Stage 1: each query vector's best cells, best first: the probes it
	// must make, then more that stage 2 makes while it has met too few
	// items.
	type probe struct {
		cell int32
		t    float32
	}
	probed := map[quantizerID][][]probe{} // per quantizer, per query vector
	for _, seg := range segs {
		v := seg.res
		if _, ok := probed[v.id]; ok {
			continue
		}
		t := rq.tables[v.id]
		col := make([]float32, v.cells)
		per := make([][]probe, nq)
		for w := range nq {
			for c := range col {
				col[c] = t[c*nq+w]
			}
			for _, h := range model.TopK(col, min(max(probes, resMaxProbes), v.cells)) {
				per[w] = append(per[w], probe{int32(h.Index), h.Score})
			}
		}
		probed[v.id] = per
	}
	// Stage 2: per segment, the items met, rated by their best probed
	// cell per query vector. Cells are probed in rounds, each query
	// vector's next best in each: the first probes rounds always, more
	// until the segment has met its share of keep.
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
	ci := make([]float32, len(first))
	// A text query under MrSw goes through the interaction kernel, a
	// run of one segment's items at a time, with the query's tables
	// padded for it.
	var padded map[quantizerID]*paddedTable
	if s == model.MrSw && queryIsText {
		padded = map[quantizerID]*paddedTable{}
		for _, seg := range segs {
			if v := seg.res; padded[v.id] == nil {
				padded[v.id] = padTable(rq.tables[v.id], v.cells, nq)
			}
		}
	}
	err = forRanges(ctx, len(first), 256, func() func(lo, hi int) {
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
				ci[i] = sc.rate(c.seg.res, rq.tables[c.seg.res.id], nq, c.row, s, queryIsText)
			}
		}
	})
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

// scoreResCandidates scores the candidates on their residual codes (the
// fast-scan estimate), or, coarse, on their coarse codes, in parallel.
func scoreResCandidates(ctx context.Context, cands []candidate, rq *resQuery, s model.Scoring, queryIsText, coarse bool) ([]float32, error) {
	// The residual codes are the one part of a search not kept in
	// memory: on an index larger than the page cache they are scattered
	// reads from disk, asked for at once rather than one page fault at a
	// time.
	if !coarse {
		for _, c := range cands {
			c.seg.willNeed(c.row)
		}
	}
	out := make([]float32, len(cands))
	err := forRanges(ctx, len(cands), 32, func() func(lo, hi int) {
		var sc resScratch
		return func(lo, hi int) {
			for i := lo; i < hi; i++ {
				// The codes of the candidate scored two later, and the
				// offsets (where its codes lie) of the one four later.
				if j := i + 2; j < hi {
					cands[j].fetchCodes(coarse)
				}
				if j := i + 4; j < hi {
					o := cands[j].seg.res.offsets
					prefetch(unsafe.Pointer(&o[cands[j].row]), 16)
				}
				c := cands[i]
				v := c.seg.res
				if coarse {
					v = v.coarse
				}
				sc.score(v, rq, s, queryIsText, c.row, c.row+1, out[i:i+1])
			}
		}
	})
	return out, err
}

// fetchCodes asks for the candidate's coarse or residual codes (the
// fast-scan blocks that hold its vectors) to be brought into the caches.
func (c candidate) fetchCodes(coarse bool) {
	v := c.seg.res
	if coarse {
		v = v.coarse
	}
	bs := 16 * v.cb.m
	b0, b1 := v.offsets[c.row]/pqBlock, pqBlocks(v.offsets[c.row+1])
	prefetch(unsafe.Pointer(unsafe.SliceData(v.codes[b0*bs:])), (b1-b0)*bs)
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

// rankResidual ranks the items of segs (all compressed) for an alignment
// scoring through stages 1-5 of the top of this file, with the query's
// tables rq: c candidates scored on their codes (with coarse codes in
// every segment: on those, and the best coarseReads of them on their
// residual codes), the best o.rerank(false) of them decoded exactly.
func rankResidual(ctx context.Context, segs []*segment, q *model.Embeddings, rq *resQuery, s model.Scoring, queryIsText bool, o *SearchOptions, c int) ([]model.Hit, error) {
	cands, err := resCandidates(ctx, segs, rq, c, o.probes(), s, queryIsText)
	if err != nil {
		return nil, err
	}
	if reads := coarseReads(o.rerank(false), segs); reads > 0 && len(cands) > reads {
		scores, err := scoreResCandidates(ctx, cands, rq, s, queryIsText, true)
		if err != nil {
			return nil, err
		}
		best := model.TopK(scores, reads)
		slices.SortFunc(best, func(a, b model.Hit) int { return a.Index - b.Index }) // in index order, as read from disk
		kept := make([]candidate, len(best))
		for i, h := range best {
			kept[i] = cands[h.Index]
		}
		cands = kept
	}
	scores, err := scoreResCandidates(ctx, cands, rq, s, queryIsText, false)
	if err != nil {
		return nil, err
	}
	return rerankBest(ctx, segs, cands, scores, q, rq, s, queryIsText, o)
}

// willNeed asks the kernel to start reading what scoring item i reads
// from disk: its residual codes (the fast-scan blocks that hold its
// vectors), or its float32 vectors. A segment read ahead when its index
// was opened, or read into memory, needs no asking (a system call per
// item saved).
func (s *segment) willNeed(i int) {
	switch {
	case s.readAhead || !s.mapped:
	case s.res != nil:
		v := s.res
		bs := 16 * v.cb.m
		mmap.WillNeed(v.codes[v.offsets[i]/pqBlock*bs : pqBlocks(v.offsets[i+1])*bs])
	default:
		e := s.emb
		mmap.WillNeed(bytesOf(e.Vecs[e.Offsets[i]*e.Dim : e.Offsets[i+1]*e.Dim]))
	}
}

// decodeItem returns item i of a compressed segment decoded: its vectors
// (centroids plus decoded residuals), positions and global vector (from
// its int8 codes).
func (s *segment) decodeItem(i int) *model.Embeddings {
	v, d := s.res, s.header.Dim
	x0, x1 := v.offsets[i], v.offsets[i+1]
	e := &model.Embeddings{Dim: d, Offsets: []int{0, x1 - x0}, Pos: slices.Clone(s.emb.Pos[x0:x1]),
		Vecs: make([]float32, (x1-x0)*d), Global: s.global.decode(i, d)}
	for x := x0; x < x1; x++ {
		v.decode(x, e.Vecs[(x-x0)*d:(x-x0+1)*d])
	}
	return e
}

// decode returns global vector i from its int8 code.
func (g *globalView) decode(i, d int) []float32 {
	out := make([]float32, d)
	sc := g.scales[i]
	for k, c := range g.codes[i*g.cd : i*g.cd+d] {
		out[k] = sc * float32(c)
	}
	return out
}

// item returns item i of s: a view of its float32 vectors, or, stored
// compressed, its vectors decoded.
func (s *segment) item(i int) *model.Embeddings {
	if s.res != nil {
		return s.decodeItem(i)
	}
	return s.emb.Slice(i, i+1)
}

// globals returns the segment's items with their global vectors (no
// region or word vectors when stored compressed: decoded from the int8
// codes).
func (s *segment) globals() *model.Embeddings {
	if s.res == nil {
		return s.emb
	}
	n, d := s.header.Items, s.header.Dim
	e := &model.Embeddings{Dim: d, Offsets: make([]int, n+1), Global: make([]float32, n*d)}
	for i := range n {
		copy(e.Global[i*d:], s.global.decode(i, d))
	}
	return e
}

// residentBytes returns the bytes of s that a search keeps in memory (the
// sections Preload reads): for a compressed segment its offsets, cells,
// lists, centroids and codebooks; otherwise every section but the float32
// vectors.
func (s *segment) residentBytes() int64 {
	var n int64
	for name, sec := range s.header.Sections {
		if s.resident(name) {
			n += sec.Size
		}
	}
	return n
}

// resident reports whether Preload reads section name of s.
func (s *segment) resident(name string) bool {
	if name == secIVFCentroids && s.sharedCentroids {
		return false
	}
	if s.res != nil {
		switch name {
		case secOffsets, secCells, secAlphas, secIVFOffsets, secIVFItems, secIVFCentroids, secResCodebook, secResDirs, secResDirOf, secCoarseCodebook, secCoarseCodes:
			return true
		}
		return false
	}
	return name != secVectors && name != secGlobal
}

// writeCompressedSegment writes e as a segment file of format version 3
// at path, atomically: its vectors filed under qz's cells (cellOf, from
// qz.assign) with their residuals coded by rcb, and by cc (nil: none) in
// the coarse codes.
func writeCompressedSegment(path, modality, fingerprint string, e *model.Embeddings, qz *quantizer, rcb *pqCodebook, cc *coarseCoder, cellOf []uint16) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := checkFinite(path, modality, e); err != nil {
		return err
	}
	n, d := e.Len(), e.Dim
	first, last := 0, 0
	if n > 0 {
		first, last = e.Offsets[0], e.Offsets[n]
	}
	offsets := make([]int64, n+1)
	for i := range offsets {
		offsets[i] = int64(e.Offsets[i] - first)
	}
	gcodes, gscales := quantize(e.Global[:n*d], d)
	sketch := sketches(e.Global[:n*d], d)
	listOff, listItems := cellLists(cellOf, e.Offsets[:n+1], qz.cells)
	codes, alphas := rcb.encodeResiduals(e.Vecs[first*d:last*d], cellOf, qz.centroids)
	arrays := []namedArray{
		{secOffsets, bytesOf(offsets)},
		{secPos, bytesOf(e.Pos[first:last])},
		{secSketch, bytesOf(sketch)},
		{secGCodes, bytesOf(gcodes)},
		{secGScales, bytesOf(gscales)},
		{secIVFCentroids, bytesOf(qz.centroids)},
		{secIVFOffsets, bytesOf(listOff)},
		{secIVFItems, bytesOf(listItems)},
		{secCells, bytesOf(cellOf)},
		{secAlphas, bytesOf(alphas)},
		{secResCodebook, bytesOf(rcb.centroids)},
		{secResCodes, codes},
	}
	ph := &pqHeader{Subspaces: rcb.m, Dsub: rcb.dsub}
	if rcb.dir != nil {
		ph.Directions = rcb.dir.k
		arrays = append(arrays, namedArray{secResDirs, bytesOf(rcb.dir.dirs)}, namedArray{secResDirOf, bytesOf(rcb.dir.dirOf)})
	}
	h := segmentHeader{Modality: modality, Items: n, Vectors: last - first, Dim: d, Model: fingerprint,
		Cells: qz.cells, Lists: len(listItems), Sections: map[string]section{}, PQ: ph}
	if cc != nil {
		coarse := cc.encode(e.Vecs[first*d:last*d], cellOf, qz.centroids, codes, rcb.m)
		arrays = append(arrays, namedArray{secCoarseCodebook, bytesOf(cc.cb.centroids)}, namedArray{secCoarseCodes, coarse})
		h.Coarse = &pqHeader{Subspaces: cc.cb.m, Dsub: cc.cb.dsub}
	}
	return writeSections(path, &h, segVersionResidual, arrays)
}

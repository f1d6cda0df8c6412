package index

import (
	"log/slog"
	"math"
	"slices"
)

// This file holds the build side of the compressed layout (residual.go):
// training the residuals' coder and the coarse codes on a build's first
// batch, and encoding vectors as their cells, cosines and residual codes.
// The segment writer is writeCompressedSegment (segment_write.go).

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
	sample := Spread(n, pqTrainVectors)
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

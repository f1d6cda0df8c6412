package index

import (
	"context"
	"math"
	"math/bits"
	"slices"

	"github.com/xmr-project/xmr/model"
)

// This file holds the build side of the inverted file (ivf.go): training
// a quantizer by spherical k-means on a build's first batch, assigning
// vectors to its cells through groups of cells, and the cells' lists.

// quantizer is the cells of an inverted file: unit centroids and, for
// assignment, the cells clustered into groups.
type quantizer struct {
	cells, d  int
	centroids []float32 // cells x d
	groups    int
	groupCent []float32       // groups x d
	members   [][]int32       // cells of each group
	packed    []*packedFloats // the centroids of each group's cells, packed for dotsInto
}

// ivfCells returns the number of cells for a quantizer trained on a batch
// of n vectors: twice the square root of n rounded up to a power of two,
// at most 8192 and n.
func ivfCells(n int) int {
	if n <= 1 {
		return 1
	}
	c := 1 << bits.Len(uint(2*math.Sqrt(float64(n))))
	return min(c, 8192, pow2Floor(n))
}

func pow2Floor(n int) int { return 1 << (bits.Len(uint(n)) - 1) }

// Training and assignment sizes: k-means runs ivfKmeansIters Lloyd
// iterations on at most ivfSample vectors per cell; a vector is compared
// with the cells of its ivfGroupProbes best groups.
const (
	ivfKmeansIters = 6
	ivfSample      = 16
	ivfGroupProbes = 8
)

// quantizerFor trains a quantizer on the region or word vectors of e (nil
// when it has none).
func quantizerFor(e *model.Embeddings) *quantizer {
	if e.Len() == 0 {
		return nil
	}
	return trainQuantizer(e.Vecs[e.Offsets[0]*e.Dim:e.Offsets[e.Len()]*e.Dim], e.Dim)
}

// trainQuantizer trains a quantizer on vecs (n x d, unit length). It is
// deterministic.
func trainQuantizer(vecs []float32, d int) *quantizer {
	n := len(vecs) / d
	if n == 0 {
		return nil
	}
	cells := ivfCells(n)
	qz := &quantizer{cells: cells, d: d, centroids: sphericalKmeans(vecs, d, Spread(n, cells*ivfSample), cells)}
	qz.groups = 1 << (bits.Len(uint(cells)) / 2) // about sqrt(cells)
	qz.groupCent = sphericalKmeans(qz.centroids, d, Spread(cells, cells), qz.groups)
	qz.members = make([][]int32, qz.groups)
	for c, g := range assign(qz.centroids, d, qz.groupCent) {
		qz.members[g] = append(qz.members[g], int32(c))
	}
	for _, mem := range qz.members {
		cents := make([]float32, len(mem)*d)
		for j, c := range mem {
			copy(cents[j*d:], qz.centroids[int(c)*d:(int(c)+1)*d])
		}
		qz.packed = append(qz.packed, packFloats(cents, d))
	}
	return qz
}

// assign returns the cell of each of vecs: the best cell of the
// ivfGroupProbes groups whose centroids are closest (all cells when there
// are few), in parallel.
func (qz *quantizer) assign(vecs []float32) []uint16 {
	d := qz.d
	n := len(vecs) / d
	out := make([]uint16, n)
	if qz.groups <= ivfGroupProbes {
		for i, c := range assign(vecs, d, qz.centroids) {
			out[i] = uint16(c)
		}
		return out
	}
	const chunk = 4096
	pg := packFloats(qz.groupCent, d)
	forRanges(context.Background(), n, chunk, func() func(lo, hi int) {
		gs := make([]float32, chunk*qz.groups)
		var tmp []float32
		byGroup := make([][]int, qz.groups)
		best := make([]float32, chunk)
		var rows, dots, tmp2 []float32
		return func(lo, hi int) {
			for lo2 := lo; lo2 < hi; lo2 += 64 {
				hi2 := min(lo2+64, hi)
				dotsInto(vecs[lo2*d:hi2*d], d, pg, gs[(lo2-lo)*qz.groups:(hi2-lo)*qz.groups], &tmp)
			}
			for g := range byGroup {
				byGroup[g] = byGroup[g][:0]
			}
			var top [ivfGroupProbes]int
			for r := 0; r < hi-lo; r++ {
				best[r] = float32(math.Inf(-1))
				for _, g := range topIndices(gs[r*qz.groups:(r+1)*qz.groups], top[:]) {
					byGroup[g] = append(byGroup[g], r)
				}
			}
			// For each group, its rows against its cells.
			for g, rs := range byGroup {
				if len(rs) == 0 || len(qz.members[g]) == 0 {
					continue
				}
				mem, pc := qz.members[g], qz.packed[g]
				rows = grow(rows, len(rs)*d)
				for j, r := range rs {
					copy(rows[j*d:], vecs[(lo+r)*d:(lo+r+1)*d])
				}
				dots = grow(dots, len(rs)*len(mem))
				dotsInto(rows[:len(rs)*d], d, pc, dots, &tmp2)
				for j, r := range rs {
					for k, x := range dots[j*len(mem) : (j+1)*len(mem)] {
						if x > best[r] {
							best[r], out[lo+r] = x, uint16(mem[k])
						}
					}
				}
			}
		}
	})
	return out
}

// topIndices fills top with the indices of the len(top) largest values of
// x (len(x) >= len(top)), in no particular order, and returns it.
func topIndices(x []float32, top []int) []int {
	m := len(top)
	for i := range top {
		top[i] = i
	}
	// The smallest of the kept values, and where it is.
	low := func() (int, float32) {
		li, lv := 0, x[top[0]]
		for j := 1; j < m; j++ {
			if v := x[top[j]]; v < lv {
				li, lv = j, v
			}
		}
		return li, lv
	}
	li, lv := low()
	for i := m; i < len(x); i++ {
		if x[i] > lv {
			top[li] = i
			li, lv = low()
		}
	}
	return top
}

// ivfLists returns the lists of an inverted file of cells cells: for each
// cell, the numbers of its vectors (those of the items of offsets, whose
// cells are cellOf) and their items.
func ivfLists(cellOf []uint16, offsets []int, cells int) (off []int64, vecs, items []int32) {
	off = make([]int64, cells+1)
	for _, c := range cellOf {
		off[c+1]++
	}
	for c := 0; c < cells; c++ {
		off[c+1] += off[c]
	}
	vecs = make([]int32, len(cellOf))
	items = make([]int32, len(cellOf))
	fill := slices.Clone(off[:cells])
	for it := 0; it+1 < len(offsets); it++ {
		for x := offsets[it] - offsets[0]; x < offsets[it+1]-offsets[0]; x++ {
			c := cellOf[x]
			vecs[fill[c]], items[fill[c]] = int32(x), int32(it)
			fill[c]++
		}
	}
	return off, vecs, items
}

// Spread returns up to m indices spread evenly over [0, n), in increasing
// order: every n/m-th, from 0 (all of them when m >= n). Fusion samples
// and query banks are drawn with it.
func Spread(n, m int) []int {
	if m >= n {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, m)
	for i := range out {
		out[i] = int(int64(i) * int64(n) / int64(m))
	}
	return out
}

// sphericalKmeans runs spherical k-means (dot-product assignment, centroids
// renormalised) on the sample rows of vecs and returns k unit centroids,
// k x d. It starts from k rows spread evenly over the sample; a centroid
// that loses all its rows keeps its place. The sample holds at least k rows
// (ivfCells keeps the cells within the vectors, the groups within the
// cells).
func sphericalKmeans(vecs []float32, d int, sample []int, k int) []float32 {
	rows := make([]float32, len(sample)*d)
	for j, i := range sample {
		copy(rows[j*d:], vecs[i*d:(i+1)*d])
	}
	cents := make([]float32, k*d)
	for j, i := range Spread(len(sample), k) {
		copy(cents[j*d:], rows[i*d:(i+1)*d])
	}
	sum := make([]float64, k*d)
	for range ivfKmeansIters {
		a := assign(rows, d, cents)
		clear(sum)
		cnt := make([]int, k)
		for j, c := range a {
			cnt[c]++
			s := sum[int(c)*d : int(c+1)*d]
			for x, v := range rows[j*d : (j+1)*d] {
				s[x] += float64(v)
			}
		}
		for c := range k {
			if cnt[c] == 0 {
				continue
			}
			s := sum[c*d : (c+1)*d]
			var nrm float64
			for _, v := range s {
				nrm += v * v
			}
			if nrm == 0 {
				continue
			}
			inv := 1 / math.Sqrt(nrm)
			for x, v := range s {
				cents[c*d+x] = float32(v * inv)
			}
		}
	}
	return cents
}

// assign returns, for each row of vecs, the centroid (of cents) with the
// largest dot product, in parallel.
func assign(vecs []float32, d int, cents []float32) []int32 {
	n := len(vecs) / d
	out := make([]int32, n)
	const chunk = 4096
	pc := packFloats(cents, d)
	forRanges(context.Background(), n, chunk, func() func(lo, hi int) {
		var buf []float32
		return func(lo, hi int) {
			buf = argmaxDots(vecs[lo*d:hi*d], d, pc, buf, out[lo:hi])
		}
	})
	return out
}

// argmaxDots writes to out[r] the query of p with the largest dot product
// with row r of vecs (the first on ties) and returns its scratch buffer.
func argmaxDots(vecs []float32, d int, p *packedFloats, buf []float32, out []int32) []float32 {
	n := len(vecs) / d
	const block = 64
	buf = grow(buf, block*(p.n+12*p.ng))
	for lo := 0; lo < n; lo += block {
		hi := min(lo+block, n)
		tmp := buf[block*p.n:]
		dotsInto(vecs[lo*d:hi*d], d, p, buf[:block*p.n], &tmp)
		for r := 0; r < hi-lo; r++ {
			bi, bv := 0, float32(math.Inf(-1))
			for j, x := range buf[r*p.n : (r+1)*p.n] {
				if x > bv {
					bi, bv = j, x
				}
			}
			out[lo+r] = int32(bi)
		}
	}
	return buf
}

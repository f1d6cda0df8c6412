package index

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"

	"github.com/xmr-project/xmr/model"
)

// This file holds the first stage of a pruned fine-grained search: an
// inverted file over the region or word vectors, as IVF indexes, XTR and
// PLAID find candidates for late interaction.
//
// A Writer trains one quantizer per modality on the first batch it writes
// (spherical k-means on a sample: cells of unit-length centroids) and
// every segment it writes files its vectors under it: each vector goes to
// its best cell, found through groups of cells (the centroids clustered
// again) so that a vector is compared with the cells of its best few
// groups, not all of them. A segment keeps the centroids and, cell by
// cell, its vectors' numbers and items.
//
// A query scores its vectors against the centroids of each quantizer once
// and probes each query vector's best cells. The vectors filed there (a
// region of an object lies in the object's cell) are scored on their int8
// codes, and each item met is rated by the alignment of the query with
// those of its vectors alone: a lower bound of its score that is exact
// when each query vector's best match lies in a probed cell. Only the best
// items by that rating are scored on all their codes.

// ivfView is a segment's inverted file: the cells' centroids (unit
// length; id names them) and, for each cell c, the numbers of its vectors
// vecs[off[c]:off[c+1]] (ascending) and their items.
type ivfView struct {
	cells     int
	id        quantizerID
	centroids []float32 // cells x dim
	off       []int64   // cells + 1
	vecs      []int32   // every vector once, cell by cell
	items     []int32   // the item of each entry of vecs
}

// quantizerID names the centroids of an inverted file, which the segments
// of one index share: their count and their section's CRC-32C. A query
// probes each quantizer's cells once.
type quantizerID struct {
	crc   uint32
	cells int
}

// check reports lists that are out of order or name vectors or items
// outside a segment with these offsets: a corrupt file that the
// checksums, when skipped, did not catch.
func (v *ivfView) check(offsets []int) error {
	nv := offsets[len(offsets)-1]
	if v.off[0] != 0 || v.off[v.cells] != int64(len(v.vecs)) || len(v.vecs) != nv {
		return fmt.Errorf("section %q: lists span [%d, %d) of %d entries for %d vectors", secIVFOffsets, v.off[0], v.off[v.cells], len(v.vecs), nv)
	}
	for c := 0; c < v.cells; c++ {
		if v.off[c+1] < v.off[c] {
			return fmt.Errorf("section %q: list %d ends before it starts", secIVFOffsets, c)
		}
		prev := int32(-1)
		for k := v.off[c]; k < v.off[c+1]; k++ {
			x, it := v.vecs[k], v.items[k]
			if x <= prev || int(x) >= nv {
				return fmt.Errorf("section %q: list %d holds vector %d after %d; vectors must ascend below %d", secIVFVectors, c, x, prev, nv)
			}
			if it < 0 || int(it) >= len(offsets)-1 || int(x) < offsets[it] || int(x) >= offsets[it+1] {
				return fmt.Errorf("section %q: vector %d is not of item %d", secIVFItems, x, it)
			}
			prev = x
		}
	}
	// Every vector once: the lists hold as many entries as vectors, so a
	// vector listed twice (under two cells) leaves another unlisted, and
	// a search that prunes by the lists never meets it.
	seen := make([]uint64, (nv+63)/64)
	for _, x := range v.vecs {
		if seen[x/64]&(1<<(x%64)) != 0 {
			return fmt.Errorf("section %q: vector %d is listed twice, so another is in no list: corrupt or forged file", secIVFVectors, x)
		}
		seen[x/64] |= 1 << (x % 64)
	}
	return nil
}

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
	qz := &quantizer{cells: cells, d: d, centroids: sphericalKmeans(vecs, d, strided(n, cells*ivfSample), cells)}
	qz.groups = 1 << (bits.Len(uint(cells)) / 2) // about sqrt(cells)
	qz.groupCent = sphericalKmeans(qz.centroids, d, strided(cells, cells), qz.groups)
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

// strided returns up to m indices spread evenly over [0, n).
func strided(n, m int) []int {
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
	for j, i := range strided(len(sample), k) {
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

// AutoProbes is the default number of cells a pruned search probes per
// query vector.
const AutoProbes = 1

// ivfCandidates returns the n items of segs (all with an inverted file)
// rated best for the query q under scoring s: the items with a vector in
// the probes best cells of some query vector, rated by the alignment of
// the query with those vectors (their int8 codes). Ties keep the lower
// item number first.
func ivfCandidates(ctx context.Context, segs []*segment, q []float32, pq *packedQuery, d, n, probes int, s model.Scoring, queryIsText bool) ([]candidate, error) {
	nq := len(q) / d
	pf := packFloats(q, d)
	probed := map[quantizerID][]int{} // the probed cells of each quantizer, ascending
	for _, seg := range segs {
		v := seg.ivf
		if _, ok := probed[v.id]; ok {
			continue
		}
		table := make([]float32, v.cells*nq) // cell x query vector
		var tmp []float32
		dotsInto(v.centroids, d, pf, table, &tmp)
		col := make([]float32, v.cells)
		on := make([]bool, v.cells)
		for w := range nq {
			for c := range col {
				col[c] = table[c*nq+w]
			}
			for _, h := range model.TopK(col, min(probes, v.cells)) {
				on[h.Index] = true
			}
		}
		var cells []int
		for c, ok := range on {
			if ok {
				cells = append(cells, c)
			}
		}
		probed[v.id] = cells
	}
	res := make([]rated, len(segs))
	err := eachSegment(ctx, segs, func(si int, seg *segment) {
		res[si].items, res[si].scores = rateProbed(seg, probed[seg.ivf.id], pq, s, queryIsText)
	})
	if err != nil {
		return nil, err
	}
	all, who := flatten(segs, res)
	top := model.TopK(all, min(n, len(all)))
	out := make([]candidate, len(top))
	for i, h := range top {
		out[i] = who(h.Index)
	}
	return out, nil
}

// rateProbed scores the query q against the vectors of seg filed in cells
// and returns the items met (ascending) and their rating: the pooled
// alignment of q with those of their vectors.
func rateProbed(seg *segment, cells []int, q *packedQuery, s model.Scoring, queryIsText bool) ([]int32, []float32) {
	v, c := seg.ivf, seg.codes
	nq, cd := q.n, c.cd
	total := 0
	for _, cell := range cells {
		total += int(v.off[cell+1] - v.off[cell])
	}
	type entry struct{ item, at int32 }
	ents := make([]entry, 0, total)
	sims := make([]float32, 0, total*nq)
	const chunk = 128
	buf := make([]int8, chunk*cd)
	scales := make([]float32, chunk)
	var dots []int32
	for _, cell := range cells {
		for lo := v.off[cell]; lo < v.off[cell+1]; lo += chunk {
			hi := min(lo+chunk, v.off[cell+1])
			rows := int(hi - lo)
			for r := range rows {
				x := int(v.vecs[lo+int64(r)])
				copy(buf[r*cd:(r+1)*cd], c.codes[x*cd:(x+1)*cd])
				scales[r] = c.scales[x]
				ents = append(ents, entry{item: v.items[lo+int64(r)], at: int32(len(ents))})
			}
			at := len(sims)
			sims = sims[:at+rows*nq]
			int8Sims(buf[:rows*cd], scales[:rows], cd, q, &dots, sims[at:])
		}
	}
	slices.SortFunc(ents, func(a, b entry) int { return int(a.item - b.item) })
	var items []int32
	var scores []float32
	var rows []float32
	for i := 0; i < len(ents); {
		j := i
		rows = rows[:0]
		for ; j < len(ents) && ents[j].item == ents[i].item; j++ {
			rows = append(rows, sims[int(ents[j].at)*nq:int(ents[j].at+1)*nq]...)
		}
		items = append(items, ents[i].item)
		scores = append(scores, pool(rows, j-i, nq, s, queryIsText))
		i = j
	}
	return items, scores
}

// rated is the items of one segment that a pruned search met (ascending)
// and their ratings.
type rated struct {
	items  []int32
	scores []float32
}

// eachSegment runs f(i, segs[i]) for every segment, at most GOMAXPROCS at
// once, starting no more once ctx is cancelled; it returns ctx's error.
func eachSegment(ctx context.Context, segs []*segment, f func(i int, seg *segment)) error {
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for si, seg := range segs {
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(si, seg)
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// flatten returns the ratings of the rated items of every segment (res[i]
// of segs[i]) end to end, and who, the candidate at a place among them
// (item numbers running on from one segment to the next). Candidates are
// made only for the places asked for: a search at ten million images
// rates hundreds of thousands of items, and a slice of them all was 7 MB
// of fresh memory a query, which this machine's page faults made a
// stall of up to 100 ms.
func flatten(segs []*segment, res []rated) (all []float32, who func(h int) candidate) {
	total := 0
	for _, r := range res {
		total += len(r.items)
	}
	all = make([]float32, 0, total)
	starts := make([]int, len(segs)+1) // where each segment's ratings start in all
	bases := make([]int, len(segs))    // each segment's first item number
	base := 0
	for si, seg := range segs {
		starts[si], bases[si] = len(all), base
		all = append(all, res[si].scores...)
		base += seg.header.Items
	}
	starts[len(segs)] = len(all)
	who = func(h int) candidate {
		at, _ := slices.BinarySearch(starts, h+1)
		si := at - 1 // the last segment starting at or before h
		it := int(res[si].items[h-starts[si]])
		return candidate{item: bases[si] + it, row: it, seg: segs[si]}
	}
	return all, who
}

package eval

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// rankOf returns the 0-based position of element g when row is sorted by
// descending score, ties broken by index (smaller index first): the number of
// elements scoring higher, plus the number of earlier elements scoring the
// same. It never sorts.
func rankOf(row []float32, g int) int {
	s := row[g]
	n := 0
	for _, v := range row {
		if v > s {
			n++
		}
	}
	for _, v := range row[:g] {
		if v == s {
			n++
		}
	}
	return n
}

// bestOf returns the index in [lo, hi) of the highest score of row, the
// smallest such index on ties: the ground truth among several that ranks
// first under rankOf's order.
func bestOf(row []float32, lo, hi int) int {
	b := lo
	for i := lo + 1; i < hi; i++ {
		if row[i] > row[b] {
			b = i
		}
	}
	return b
}

// topK keeps the k highest (index, value) pairs offered so far, best first.
// Offered in increasing index order, equal values keep their offer order, so
// the list is the first k entries of a stable descending sort.
type topK struct {
	k   int
	idx []int32
	val []float32
}

func (t *topK) reset(k int) {
	t.k = k
	if cap(t.val) < k {
		t.idx = make([]int32, 0, k)
		t.val = make([]float32, 0, k)
	}
	t.idx, t.val = t.idx[:0], t.val[:0]
}

// scan offers every element of row, in index order.
func (t *topK) scan(row []float32) {
	if t.k == 0 {
		return
	}
	for i, v := range row {
		if len(t.val) == t.k && !(v > t.val[t.k-1]) {
			continue
		}
		t.insert(int32(i), v)
	}
}

func (t *topK) insert(i int32, v float32) {
	if len(t.val) < t.k {
		t.val = append(t.val, 0)
		t.idx = append(t.idx, 0)
	}
	// The last slot is free (just appended) or holds the entry pushed out.
	p := len(t.val) - 1
	for p > 0 && t.val[p-1] < v {
		t.val[p], t.idx[p] = t.val[p-1], t.idx[p-1]
		p--
	}
	t.val[p], t.idx[p] = v, i
}

// gain is the NDCG gain 2^rel - 1, computed in float32 as the reference's
// numpy code does on its float32 relevance arrays.
func gain(rel float32) float64 {
	return float64(float32(math.Exp2(float64(rel))) - 1)
}

// log2Disc[r] is log2(r+2), the discount of 0-based rank r.
var log2Disc = func() []float64 {
	d := make([]float64, 4096)
	for r := range d {
		d[r] = math.Log2(float64(r + 2))
	}
	return d
}()

func discount(r int) float64 {
	if r < len(log2Disc) {
		return log2Disc[r]
	}
	return math.Log2(float64(r + 2))
}

// dcgOf returns the DCG of relevances listed in rank order.
func dcgOf(rels []float32) float64 {
	d := 0.0
	for r, v := range rels {
		d += gain(v) / discount(r)
	}
	return d
}

// ndcg returns dcg/idcg, 0 when idcg is 0.
func ndcg(dcg, idcg float64) float64 {
	if idcg == 0 {
		return 0
	}
	return dcg / idcg
}

// columnIDCG returns the IDCG@k of every column of rel: the DCG of the k
// largest values of the column. It streams rel row by row over bands of
// columns (a column is strided in memory), keeping a topK per column.
func columnIDCG(rel view, k, workers int) []float64 {
	const band = 256
	out := make([]float64, rel.cols)
	parallelFor((rel.cols+band-1)/band, workers, func(_, b int) {
		j0 := b * band
		n := min(band, rel.cols-j0)
		tops := make([]topK, n)
		for j := range tops {
			tops[j].reset(k)
		}
		for c := 0; c < rel.rows; c++ {
			for j, v := range rel.row(c)[j0 : j0+n] {
				t := &tops[j]
				if len(t.val) < t.k || v > t.val[t.k-1] {
					t.insert(int32(c), v)
				}
			}
		}
		for j := range tops {
			out[j0+j] = dcgOf(tops[j].val)
		}
	})
	return out
}

// parallelFor calls fn(w, i) for i in [0, n) on workers goroutines; w in
// [0, workers) identifies the goroutine so that fn can keep scratch space.
func parallelFor(n, workers int, fn func(w, i int)) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			fn(0, i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(w, i)
			}
		}()
	}
	wg.Wait()
}

// foldRanks holds the per-query results of one fold.
type foldRanks struct {
	i2t     []int       // per image: best rank of its captions
	t2i     []int       // per caption: rank of its image
	i2tNDCG [][]float64 // per relevance matrix, per image
	t2iNDCG [][]float64 // per relevance matrix, per caption
}

// Block sizes of the parallel loops: images per i2t task and captions per
// t2i task (the t2i task transposes that many similarity columns).
const (
	i2tBlock = 16
	t2iBlock = 256
)

// rankFold computes ranks and, for each relevance view, per-query NDCG@p of
// one fold: sims is n x per*n (images x captions), whose rows rank the
// captions, t2i the same shape, whose columns rank the images (sims again
// but for a fusion), each rel is per*n x n.
func rankFold(sims, t2i view, rels []view, per, p, workers int) foldRanks {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	nImg, nCap := sims.rows, sims.cols
	fr := foldRanks{i2t: make([]int, nImg), t2i: make([]int, nCap)}
	var i2tIDCG [][]float64 // per relevance, per image
	for _, rv := range rels {
		fr.i2tNDCG = append(fr.i2tNDCG, make([]float64, nImg))
		fr.t2iNDCG = append(fr.t2iNDCG, make([]float64, nCap))
		i2tIDCG = append(i2tIDCG, columnIDCG(rv, min(p, nCap), workers))
	}
	type scratch struct {
		top, ideal topK
		rels       []float32 // relevances of a ranking
		simT       []float32 // transposed similarity columns (t2i)
	}
	sc := make([]*scratch, workers)
	get := func(w int) *scratch {
		if sc[w] == nil {
			sc[w] = &scratch{rels: make([]float32, 0, p), simT: make([]float32, t2iBlock*nImg)}
		}
		return sc[w]
	}

	// Image to text: image i ranks all captions; its rank is the best rank
	// of its own captions per*i .. per*i+per-1. Its relevances are the
	// column rel[:, i], whose IDCG columnIDCG computed.
	parallelFor((nImg+i2tBlock-1)/i2tBlock, workers, func(w, b int) {
		s := get(w)
		i0 := b * i2tBlock
		for i := i0; i < min(i0+i2tBlock, nImg); i++ {
			row := sims.row(i)
			fr.i2t[i] = rankOf(row, bestOf(row, per*i, per*i+per))
			if len(rels) == 0 {
				continue
			}
			s.top.reset(min(p, nCap))
			s.top.scan(row)
			for k, rv := range rels {
				s.rels = s.rels[:0]
				for _, c := range s.top.idx {
					s.rels = append(s.rels, rv.data[int(c)*rv.stride+i])
				}
				fr.i2tNDCG[k][i] = ndcg(dcgOf(s.rels), i2tIDCG[k][i])
			}
		}
	})

	// Text to image: caption c ranks all images; its image is c/per. Its
	// relevances are the row rel[c, :].
	parallelFor((nCap+t2iBlock-1)/t2iBlock, workers, func(w, b int) {
		s := get(w)
		c0 := b * t2iBlock
		n := min(t2iBlock, nCap-c0)
		t2i.transposeCols(c0, n, s.simT)
		for c := c0; c < c0+n; c++ {
			col := s.simT[(c-c0)*nImg : (c-c0+1)*nImg]
			fr.t2i[c] = rankOf(col, c/per)
			if len(rels) == 0 {
				continue
			}
			s.top.reset(min(p, nImg))
			s.top.scan(col)
			for k, rv := range rels {
				relRow := rv.row(c)
				s.rels = s.rels[:0]
				for _, j := range s.top.idx {
					s.rels = append(s.rels, relRow[j])
				}
				s.ideal.reset(min(p, nImg))
				s.ideal.scan(relRow)
				fr.t2iNDCG[k][c] = ndcg(dcgOf(s.rels), dcgOf(s.ideal.val))
			}
		}
	})
	return fr
}

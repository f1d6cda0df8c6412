package index

import (
	"context"
	"math"
	"runtime"
	"sync"

	"github.com/xmr-project/xmr/model"
)

// This file holds the compressed scoring path: region and word vectors as
// int8 codes with one float32 scale per vector (x ~ scale * code), scored
// against an int8 query with integer dot products (AVX2 on amd64) and the
// same poolings as model.ScoreMatrix. Codes are stored with their rows
// padded to a multiple of 16 (codeDim), the width of the kernel's chunks.

// codeDim returns the padded width of the int8 rows for vectors of d.
func codeDim(d int) int { return (d + 15) / 16 * 16 }

// quantize returns the int8 codes (rows of codeDim(dim)) and per-vector
// scales of vecs: scale = max|x| / 127, code = round(x / scale). A zero
// vector gets scale 0 and zero codes.
func quantize(vecs []float32, dim int) (codes []int8, scales []float32) {
	n := len(vecs) / dim
	cd := codeDim(dim)
	codes = make([]int8, n*cd)
	scales = make([]float32, n)
	for i := 0; i < n; i++ {
		v := vecs[i*dim : (i+1)*dim]
		var m float32
		for _, x := range v {
			m = max(m, float32(math.Abs(float64(x))))
		}
		if m == 0 || math.IsNaN(float64(m)) {
			continue
		}
		s := m / 127
		scales[i] = s
		row := codes[i*cd : i*cd+dim]
		for k, x := range v {
			row[k] = int8(math.Round(float64(x / s)))
		}
	}
	return codes, scales
}

// packedQuery is a query's vectors quantized and laid out for dots12: in
// groups of 12 vectors (the last padded with zero vectors), each group
// chunk-major (for every chunk of 16 elements, the 16 int16 values of each
// of the group's 12 vectors).
type packedQuery struct {
	n, cd  int
	groups [][]int16
	scales []float32 // per vector, padded to 12 per group
}

func packQuery(vecs []float32, dim int) *packedQuery {
	codes, scales := quantize(vecs, dim)
	n, cd := len(scales), codeDim(dim)
	g := (n + 11) / 12
	p := &packedQuery{n: n, cd: cd, scales: make([]float32, 12*g)}
	copy(p.scales, scales)
	for gi := 0; gi < g; gi++ {
		buf := make([]int16, 12*cd)
		for w := 0; w < 12; w++ {
			v := gi*12 + w
			if v >= n {
				break
			}
			row := codes[v*cd : (v+1)*cd]
			for c := 0; c < cd/16; c++ {
				for k := 0; k < 16; k++ {
					buf[c*192+w*16+k] = int16(row[c*16+k])
				}
			}
		}
		p.groups = append(p.groups, buf)
	}
	return p
}

// dots12Go is the portable dots12: for each of nv int8 rows of length d at
// v and each of 12 queries packed chunk-major in q, out[r*12+w] is their
// integer dot product.
func dots12Go(v []int8, nv int, q []int16, d int, out []int32) {
	for r := 0; r < nv; r++ {
		row := v[r*d : (r+1)*d]
		var acc [12]int32
		for c := 0; c < d/16; c++ {
			chunk := row[c*16 : c*16+16]
			qc := q[c*192 : c*192+192]
			for w := 0; w < 12; w++ {
				qw := qc[w*16 : w*16+16]
				var s int32
				for k, x := range chunk {
					s += int32(x) * int32(qw[k])
				}
				acc[w] += s
			}
		}
		copy(out[r*12:r*12+12], acc[:])
	}
}

// dots12fGo is the portable dots12f: for each of nv float32 rows of length
// d at v and each of 12 queries packed chunk-major in chunks of 8 in q,
// out[r*12+w] is their dot product.
func dots12fGo(v []float32, nv int, q []float32, d int, out []float32) {
	for r := 0; r < nv; r++ {
		row := v[r*d : (r+1)*d]
		var acc [12]float32
		for c := 0; c < d/8; c++ {
			chunk := row[c*8 : c*8+8]
			qc := q[c*96 : c*96+96]
			for w := 0; w < 12; w++ {
				qw := qc[w*8 : w*8+8]
				var s float32
				for k, x := range chunk {
					s += x * qw[k]
				}
				acc[w] += s
			}
		}
		copy(out[r*12:r*12+12], acc[:])
	}
}

// codeView is the compressed form of a segment's vectors.
type codeView struct {
	cd      int
	codes   []int8    // vectors x cd
	scales  []float32 // per vector
	offsets []int     // as Embeddings.Offsets
}

func (c *codeView) len() int { return len(c.offsets) - 1 }

// blockVectors is about how many item vectors one task scores at once:
// their codes stay in the L2 cache across the query's groups.
const blockVectors = 256

// scoreCodes scores the query q against every item of c with scoring s,
// in parallel over blocks of items. queryIsText says which side the query
// is on: the pooling of an alignment scoring maxes over regions and sums
// over words.
func scoreCodes(ctx context.Context, c *codeView, q *packedQuery, s model.Scoring, queryIsText bool) ([]float32, error) {
	n := c.len()
	out := make([]float32, n)
	type task struct{ lo, hi int }
	tasks := make(chan task)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var dots []int32
			var sims []float32
			for t := range tasks {
				dots, sims = scoreBlock(c, q, s, queryIsText, t.lo, t.hi, dots, sims, out[t.lo:t.hi])
			}
		}()
	}
	var err error
	for lo := 0; lo < n; {
		hi := lo + 1
		for hi < n && c.offsets[hi+1]-c.offsets[lo] <= blockVectors {
			hi++
		}
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case tasks <- task{lo, hi}:
		}
		if err != nil {
			break
		}
		lo = hi
	}
	close(tasks)
	wg.Wait()
	return out, err
}

// scoreBlock scores items [lo, hi) into out[0 : hi-lo], reusing the
// buffers dots and sims (returned, grown as needed).
func scoreBlock(c *codeView, q *packedQuery, s model.Scoring, queryIsText bool, lo, hi int, dots []int32, sims []float32, out []float32) ([]int32, []float32) {
	v0, v1 := c.offsets[lo], c.offsets[hi]
	nv, nq := v1-v0, q.n
	if cap(dots) < nv*12 {
		dots = make([]int32, nv*12)
	}
	if cap(sims) < nv*nq {
		sims = make([]float32, nv*nq)
	}
	dots, sims = dots[:nv*12], sims[:nv*nq]
	codes := c.codes[v0*c.cd : v1*c.cd]
	for g, qg := range q.groups {
		dots12(codes, nv, qg, c.cd, dots)
		for r := 0; r < nv; r++ {
			vs := c.scales[v0+r]
			for w := 0; w < 12; w++ {
				qi := g*12 + w
				if qi >= nq {
					break
				}
				sims[r*nq+qi] = vs * q.scales[qi] * float32(dots[r*12+w])
			}
		}
	}
	for i := lo; i < hi; i++ {
		a, b := c.offsets[i]-v0, c.offsets[i+1]-v0
		out[i-lo] = pool(sims[a*nq:b*nq], b-a, nq, s, queryIsText)
	}
	return dots, sims
}

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
	// rowMaxSum: the sum over rows of their max over columns.
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
				colMax[w] = max(colMax[w], v)
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
				best = max(best, v)
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

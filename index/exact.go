package index

import (
	"context"

	"github.com/xmr-project/xmr/model"
)

// This file holds the exact float32 path of the fine-grained alignment
// scorings: the query's vectors packed for dots12f, the item vectors read
// once, straight from the memory-mapped segment, in blocks of a few hundred
// vectors, and pooled as model.ScoreMatrix pools (no alignment matrix of
// more than one block is ever materialised).

// blockFloatVectors is the most vectors in a block of the float32 path,
// the unit one core scores and pools at a time (a block holds at least one
// item): the block's similarities stay in the cache, and blocks are large
// enough that claiming them costs little and the kernel's fetching ahead
// runs on into the next item. 256 ran 5% faster than 64 on t2i in
// BenchmarkScoreFloats (2026-11-24).
const blockFloatVectors = 256

// packedFloats is a query's float32 vectors laid out for dots12f: in ng
// groups of 12 vectors (the last padded with zero vectors), each group
// chunk-major over the first d8 elements (d rounded down to a multiple of
// 8), one after the other in buf (12 x d8 floats a group); the rest of
// each vector, fewer than 8 elements, is scored from vecs.
type packedFloats struct {
	n, d, d8, ng int
	buf          []float32
	vecs         []float32
}

func packFloats(vecs []float32, d int) *packedFloats {
	n := len(vecs) / d
	p := &packedFloats{n: n, d: d, d8: d / 8 * 8, ng: (n + 11) / 12, vecs: vecs}
	p.buf = make([]float32, p.ng*12*p.d8)
	for i := 0; i < n; i++ {
		g, w := i/12, i%12
		buf, row := p.buf[g*12*p.d8:], vecs[i*d:]
		for c := 0; c < p.d8/8; c++ {
			copy(buf[c*96+w*8:c*96+w*8+8], row[c*8:c*8+8])
		}
	}
	return p
}

// dotsInto writes to out[r*p.n+j] the dot product of row r of vecs with
// query j of p: the full groups of 12 queries straight into out, the last
// partial group through *tmp (grown to 12 per row), then the tail of
// fewer than 8 elements.
func dotsInto(vecs []float32, d int, p *packedFloats, out []float32, tmp *[]float32) {
	nv, n := len(vecs)/d, p.n
	out = out[:nv*n]
	clear(out)
	full, gs := n/12, 12*p.d8
	if full > 0 {
		dots12f(vecs, nv, d, p.buf, full, gs, p.d8, out, 12, n)
	}
	if rest := n - 12*full; rest > 0 {
		*tmp = grow(*tmp, nv*12)
		t := (*tmp)[:nv*12]
		clear(t)
		dots12f(vecs, nv, d, p.buf[full*gs:], 1, gs, p.d8, t, nv*12, 12)
		for r := range nv {
			copy(out[r*n+12*full:(r+1)*n], t[r*12:r*12+rest])
		}
	}
	if p.d8 < d { // the tail of fewer than 8 elements
		for r := range nv {
			v := vecs[r*d+p.d8 : (r+1)*d]
			for qi := range n {
				qv := p.vecs[qi*d+p.d8 : (qi+1)*d]
				var x float32
				for k := range v {
					x += v[k] * qv[k]
				}
				out[r*n+qi] += x
			}
		}
	}
}

// scoreFloats scores the query q against every item of e (its float32
// vectors) with the alignment scoring s, in parallel over blocks of items.
func scoreFloats(ctx context.Context, e *model.Embeddings, q *packedFloats, s model.Scoring, queryIsText bool) ([]float32, error) {
	return scoreWith(ctx, e.Offsets, blockFloatVectors, func(sc *floatScratch, lo, hi int, out []float32) {
		sc.score(e, q, s, queryIsText, lo, hi, out)
	})
}

// floatScratch holds one goroutine's buffers for scoring float32 vectors.
type floatScratch struct {
	dots []float32 // groups x vectors x 12
	sims []float32 // vectors x query vectors
}

// score scores items [lo, hi) of e into out[0 : hi-lo].
func (sc *floatScratch) score(e *model.Embeddings, q *packedFloats, s model.Scoring, queryIsText bool, lo, hi int, out []float32) {
	d := q.d
	v0, v1 := e.Offsets[lo], e.Offsets[hi]
	nq := q.n
	sc.sims = grow(sc.sims, (v1-v0)*nq)
	dotsInto(e.Vecs[v0*d:v1*d], d, q, sc.sims, &sc.dots)
	poolItems(sc.sims, e.Offsets, lo, hi, nq, s, queryIsText, out)
}

// dots12fGo is the portable dots12f: for each of nv float32 rows at v (row
// r starts at v[r*stride]) and each of 12 queries packed chunk-major in
// chunks of 8 in q, it adds to out[r*12+w] their dot product over the
// first dlen elements.
func dots12fGo(v []float32, nv, stride int, q []float32, dlen int, out []float32) {
	for r := 0; r < nv; r++ {
		row := v[r*stride : r*stride+dlen]
		var acc [12]float32
		for c := 0; c < dlen/8; c++ {
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
		for w, a := range acc {
			out[r*12+w] += a
		}
	}
}

// dots12fGroupsGo is the portable dots12f: dots12fGo for ng groups of 12
// queries, group g at q[g*gstride:], into out[g*ostride+r*rstride+w].
func dots12fGroupsGo(v []float32, nv, stride int, q []float32, ng, gstride, dlen int, out []float32, ostride, rstride int) {
	var t [12]float32
	for g := range ng {
		for r := range nv {
			t = [12]float32{}
			dots12fGo(v[r*stride:], 1, stride, q[g*gstride:], dlen, t[:])
			o := out[g*ostride+r*rstride:]
			for w, x := range t {
				o[w] += x
			}
		}
	}
}

package index

import (
	"context"

	"github.com/xmr-project/xmr/model"
)

// This file holds the exact float32 path of the fine-grained alignment
// scorings: the query's vectors packed for dots12f, the item vectors read
// once, straight from the memory-mapped segment, in blocks that stay in
// the L2 cache, and pooled as model.ScoreMatrix pools (no alignment matrix
// of more than one block is ever materialised).

// Sizes of the float32 path, as blockVectors and spanInt8 for the codes: a
// block's vectors (64 x 1024 floats, 256 KiB at d = 1024) stay in the L2
// cache across the query's groups of 12 vectors.
const (
	blockFloatVectors = 64
	spanFloat         = 4096
)

// packedFloats is a query's float32 vectors laid out for dots12f: in groups
// of 12 vectors (the last padded with zero vectors), each group
// chunk-major over the first d8 elements (d rounded down to a multiple of
// 8); the rest of each vector, fewer than 8 elements, is scored from vecs.
type packedFloats struct {
	n, d, d8 int
	groups   [][]float32
	vecs     []float32
}

func packFloats(vecs []float32, d int) *packedFloats {
	n := len(vecs) / d
	p := &packedFloats{n: n, d: d, d8: d / 8 * 8, vecs: vecs}
	for g := 0; g < (n+11)/12; g++ {
		buf := make([]float32, 12*p.d8)
		for w := 0; w < 12 && g*12+w < n; w++ {
			row := vecs[(g*12+w)*d:]
			for c := 0; c < p.d8/8; c++ {
				copy(buf[c*96+w*8:c*96+w*8+8], row[c*8:c*8+8])
			}
		}
		p.groups = append(p.groups, buf)
	}
	return p
}

// scoreFloats scores the query q against every item of e (its float32
// vectors) with the alignment scoring s, in parallel over blocks of items.
func scoreFloats(ctx context.Context, e *model.Embeddings, q *packedFloats, s model.Scoring, queryIsText bool) ([]float32, error) {
	out := make([]float32, e.Len())
	err := forBlocks(ctx, e.Offsets, blockFloatVectors, func() func(lo, hi int) {
		var sc floatScratch
		return func(lo, hi int) { sc.score(e, q, s, queryIsText, lo, hi, out[lo:hi]) }
	})
	return out, err
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
	nv, nq, ng := v1-v0, q.n, len(q.groups)
	sc.dots = grow(sc.dots, ng*nv*12)
	sc.sims = grow(sc.sims, nv*nq)
	clear(sc.dots)
	vecs := e.Vecs[v0*d : v1*d]
	for k0 := 0; k0 < q.d8; k0 += spanFloat {
		span := min(spanFloat, q.d8-k0)
		for g, qg := range q.groups {
			dots12f(vecs[k0:], nv, d, qg[k0*12:], span, sc.dots[g*nv*12:(g+1)*nv*12])
		}
	}
	for g := range q.groups {
		dots := sc.dots[g*nv*12:]
		for r := 0; r < nv; r++ {
			for w := 0; w < 12; w++ {
				qi := g*12 + w
				if qi >= nq {
					break
				}
				x := dots[r*12+w]
				if q.d8 < d { // the tail of fewer than 8 elements
					v, qv := vecs[r*d+q.d8:(r+1)*d], q.vecs[qi*d+q.d8:(qi+1)*d]
					for k := range v {
						x += v[k] * qv[k]
					}
				}
				sc.sims[r*nq+qi] = x
			}
		}
	}
	for i := lo; i < hi; i++ {
		a, b := e.Offsets[i]-v0, e.Offsets[i+1]-v0
		out[i-lo] = pool(sc.sims[a*nq:b*nq], b-a, nq, s, queryIsText)
	}
}

package index

import (
	"context"
	"math"

	"github.com/xmr-project/xmr/model"
)

// This file holds the compressed scoring path: region and word vectors as
// int8 codes with one float32 scale per vector (x ~ scale * code), scored
// against an int8 query with exact integer dot products (the kernel of
// int8.go: AVX-512 VNNI, AVX-VNNI or AVX2 on amd64) and the same poolings
// as model.ScoreMatrix. Codes are stored with their rows
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

// packedQuery is a query's vectors quantized and laid out for the int8
// kernel kern: in groups of 12 vectors (the last padded with zero
// vectors), each group chunk-major (for every chunk of 16 elements, the 16
// codes of each of the group's 12 vectors), as int16 in q16 or as int8 in
// q8 (ng groups of 12*cd codes one after the other) as kern takes them.
type packedQuery struct {
	n, cd, ng int
	kern      *int8Kernel
	q16       [][]int16
	q8        []int8
	// sums holds, for the kernels on q8, 128 times the running sums of
	// each vector's codes: sums[(g*(cd/16+1)+c)*12+w] is 128 times the sum
	// of the codes of vector 12g+w in the chunks before chunk c.
	sums   []int32
	scales []float32 // per vector, padded to 12 per group
}

// packQuery quantizes a query's vectors (of dim) for this machine's int8
// kernel.
func packQuery(vecs []float32, dim int) *packedQuery {
	return packQueryFor(vecs, dim, int8Default)
}

// packQueryFor quantizes a query's vectors (of dim) for the int8 kernel k.
func packQueryFor(vecs []float32, dim int, k *int8Kernel) *packedQuery {
	codes, scales := quantize(vecs, dim)
	return packCodes(codes, scales, codeDim(dim), k)
}

// packCodes lays out the int8 codes of a query's vectors (rows of cd, a
// multiple of 16; scales one per vector) for the int8 kernel k.
func packCodes(codes []int8, scales []float32, cd int, k *int8Kernel) *packedQuery {
	n := len(scales)
	g := (n + 11) / 12
	nc := cd / 16
	p := &packedQuery{n: n, cd: cd, ng: g, kern: k, scales: make([]float32, 12*g)}
	copy(p.scales, scales)
	if k.bytes {
		p.q8 = make([]int8, g*12*cd)
		p.sums = make([]int32, g*(nc+1)*12)
	}
	for gi := 0; gi < g; gi++ {
		var buf []int16
		if !k.bytes {
			buf = make([]int16, 12*cd)
			p.q16 = append(p.q16, buf)
		}
		for w := 0; w < 12; w++ {
			v := gi*12 + w
			if v >= n {
				break
			}
			row := codes[v*cd : (v+1)*cd]
			var run int32
			for c := 0; c < nc; c++ {
				for k := 0; k < 16; k++ {
					x := row[c*16+k]
					if buf != nil {
						buf[c*192+w*16+k] = int16(x)
					} else {
						p.q8[gi*12*cd+c*192+w*16+k] = x
						run += 128 * int32(x)
					}
				}
				if p.sums != nil {
					p.sums[(gi*(nc+1)+c+1)*12+w] = run
				}
			}
		}
	}
	return p
}

// dots12Go is the portable dots12: for each of nv int8 rows at v (row r
// starts at v[r*stride]) and each of 12 queries packed chunk-major in q, it
// adds to out[r*12+w] their integer dot product over the first dlen
// elements.
func dots12Go(v []int8, nv, stride int, q []int16, dlen int, out []int32) {
	for r := 0; r < nv; r++ {
		row := v[r*stride : r*stride+dlen]
		var acc [12]int32
		for c := 0; c < dlen/16; c++ {
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
		for w, a := range acc {
			out[r*12+w] += a
		}
	}
}

// codeView is the compressed form of a segment's vectors.
type codeView struct {
	cd      int
	codes   []int8    // vectors x cd
	scales  []float32 // per vector
	offsets []int     // as Embeddings.Offsets
}

// blockVectors is about how many item vectors one task scores at once:
// their codes stay in the L2 cache across the query's groups. spanInt8 is
// how many elements of each vector one kernel call covers. Shorter spans
// would keep the query's part in the L1 cache, but on the AMD EPYC (Zen)
// machines of docs/benchmarks.md ("search") spans of 256 and 512 were
// slower than whole rows of 1024 (the kernels are bound by their
// multiplies, and short runs of each row defeat the hardware prefetcher),
// so rows up to 4096 elements go in one call.
const (
	blockVectors = 256
	spanInt8     = 4096
)

// scoreCodes scores the query q against every item of c with scoring s,
// in parallel over blocks of items. queryIsText says which side the query
// is on: the pooling of an alignment scoring maxes over regions and sums
// over words.
func scoreCodes(ctx context.Context, c *codeView, q *packedQuery, s model.Scoring, queryIsText bool) ([]float32, error) {
	return scoreWith(ctx, c.offsets, blockVectors, func(sc *codeScratch, lo, hi int, out []float32) {
		sc.score(c, q, s, queryIsText, lo, hi, out)
	})
}

// int8Sims writes to sims[r*q.n+j] the cosine estimate of int8 row r of
// codes (cd codes a row, scale scales[r]) with query vector j, using *dots
// (grown as needed) as scratch.
func int8Sims(codes []int8, scales []float32, cd int, q *packedQuery, dots *[]int32, sims []float32) {
	nv, nq, ng := len(scales), q.n, q.ng
	*dots = grow(*dots, ng*nv*12)
	dd := (*dots)[:ng*nv*12]
	clear(dd)
	if nv > 0 {
		for k0 := 0; k0 < cd; k0 += spanInt8 {
			q.kern.dots(codes, nv, cd, q, k0, min(spanInt8, cd-k0), dd)
		}
	}
	// Row by row, so that each row of sims is written in order.
	for r := range nv {
		row := sims[r*nq : (r+1)*nq]
		s := scales[r]
		for g := range ng {
			lo, hi := g*12, min(g*12+12, nq)
			out, qs := row[lo:hi], q.scales[lo:hi]
			d := dd[(g*nv+r)*12:][:hi-lo]
			for w := range out {
				out[w] = s * qs[w] * float32(d[w])
			}
		}
	}
}

// codeScratch holds one goroutine's buffers for scoring int8 codes.
type codeScratch struct {
	dots []int32   // groups x vectors x 12
	sims []float32 // vectors x query vectors
}

// score scores items [lo, hi) of c into out[0 : hi-lo].
func (sc *codeScratch) score(c *codeView, q *packedQuery, s model.Scoring, queryIsText bool, lo, hi int, out []float32) {
	v0, v1 := c.offsets[lo], c.offsets[hi]
	nq := q.n
	sc.sims = grow(sc.sims, (v1-v0)*nq)
	int8Sims(c.codes[v0*c.cd:v1*c.cd], c.scales[v0:v1], c.cd, q, &sc.dots, sc.sims)
	poolItems(sc.sims, c.offsets, lo, hi, nq, s, queryIsText, out)
}

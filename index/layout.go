package index

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/xmr-project/xmr/mmap"
	"github.com/xmr-project/xmr/model"
)

// layout is how a segment stores its region or word vectors: the steps
// of the search pipeline (pipeline.go) that depend on it. Two layouts
// implement it:
//
//   - floatLayout (segment format versions 1 and 2): float32 vectors,
//     their int8 codes (quant.go) and, in version 2, their 4-bit
//     product-quantised codes (pq.go), with an inverted file (ivf.go) in
//     segments written with one;
//   - compressedLayout (version 3, residual.go): each vector as its cell
//     of the inverted file and a residual in 4-bit codes, nothing in
//     float32.
//
// Both keep the items' global vectors as int8 codes and sign sketches
// (prune.go), and a floatLayout keeps them in float32 too.
type layout interface {
	estimator
	// scan estimates the score of every item of the segment on its
	// codes, in parallel over blocks of items, and returns the least
	// number of the best that the pipeline re-ranks by default (the
	// coarser the codes, the more: rerankFloor).
	scan(ctx context.Context, q *query) (scores []float32, rerankFloor int, err error)
	// scanExact scores every item exactly, in parallel over blocks of
	// items (SearchOptions.Exact); a layout without float32 vectors
	// returns an error wrapping ErrNoFloat32.
	scanExact(ctx context.Context, q *query) ([]float32, error)
	// exact scores item i exactly: with its float32 vectors, or with its
	// codes decoded exactly.
	exact(sc *scratch, q *query, i int) float32
	// item returns item i: its region or word vectors, positions and
	// global vector (decoded, when stored compressed), for explanations
	// and the global scorings.
	item(i int) *model.Embeddings
	// globals returns every item's global vector (decoded, when stored
	// compressed), for a global scoring of them all.
	globals() *model.Embeddings
}

// estimator estimates the scores of a pruned search's candidates, one
// item at a time: a layout's codes, or the coarse codes of a compressed
// segment (coarseCodes).
type estimator interface {
	// estimate estimates the score of item i alone, with the goroutine's
	// scratch sc.
	estimate(sc *scratch, q *query, i int) float32
	// willNeed asks the kernel to start reading what estimate (exact
	// false) or exact reads of item i, where that is not kept in memory.
	willNeed(i int, exact bool)
	// fetch asks for what estimate reads of item i to be brought into
	// the CPU's caches.
	fetch(i int)
}

// Rerank floors: the least number of estimates re-ranked by default,
// after the codes that estimated them (SearchOptions.Rerank).
const (
	// codesRerank is that of the int8 and the compressed layout's codes.
	codesRerank = 100
	// pqRerank is that of the 4-bit product-quantised codes, whose
	// scores are coarser.
	pqRerank = 300
)

// scratch holds one goroutine's buffers for every layout's kernels.
type scratch struct {
	floats floatScratch
	codes  codeScratch
	res    resScratch
	one    [1]float32
}

// floatLayout is the layout of segment format versions 1 and 2.
type floatLayout struct{ s *segment }

// scan scores the 4-bit product-quantised codes, or the int8 codes when
// asked or when a segment of version 1 is searched (q.scanInt8), or
// when this segment has no others.
func (l floatLayout) scan(ctx context.Context, q *query) ([]float32, int, error) {
	s := l.s
	if q.scanInt8 || s.pq == nil {
		sc, err := scoreCodes(ctx, s.codes, q.codes, q.s, q.text)
		return sc, codesRerank, err
	}
	sc, err := scorePQ(ctx, s.pq, s.pq.cb.pqLUTs(q.vecs), q.s, q.text)
	return sc, pqRerank, err
}

func (l floatLayout) scanExact(ctx context.Context, q *query) ([]float32, error) {
	return scoreFloats(ctx, l.s.emb, q.floats, q.s, q.text)
}

// estimate scores item i on its int8 codes.
func (l floatLayout) estimate(sc *scratch, q *query, i int) float32 {
	sc.codes.score(l.s.codes, q.codes, q.s, q.text, i, i+1, sc.one[:])
	return sc.one[0]
}

func (l floatLayout) exact(sc *scratch, q *query, i int) float32 {
	sc.floats.score(l.s.emb, q.floats, q.s, q.text, i, i+1, sc.one[:])
	return sc.one[0]
}

func (l floatLayout) item(i int) *model.Embeddings { return l.s.emb.Slice(i, i+1) }

func (l floatLayout) globals() *model.Embeddings { return l.s.emb }

// willNeed asks for the float32 vectors that exact reads: everything
// else a search reads is kept in memory.
func (l floatLayout) willNeed(i int, exact bool) {
	s := l.s
	if !exact || s.readAhead || !s.mapped {
		return
	}
	e := s.emb
	mmap.WillNeed(bytesOf(e.Vecs[e.Offsets[i]*e.Dim : e.Offsets[i+1]*e.Dim]))
}

// fetch does nothing: the int8 codes of the candidates of a pruned search
// lie in order.
func (floatLayout) fetch(int) {}

// compressedLayout is the layout of segment format version 3.
type compressedLayout struct{ s *segment }

// scan scores the residual codes (the fast-scan estimate).
func (l compressedLayout) scan(ctx context.Context, q *query) ([]float32, int, error) {
	sc, err := scoreResidual(ctx, l.s.res, q.res, q.s, q.text)
	return sc, codesRerank, err
}

func (l compressedLayout) scanExact(context.Context, *query) ([]float32, error) {
	return nil, fmt.Errorf("segment %s: %w", l.s.path, ErrNoFloat32)
}

func (l compressedLayout) estimate(sc *scratch, q *query, i int) float32 {
	sc.res.score(l.s.res, q.res, q.s, q.text, i, i+1, sc.one[:])
	return sc.one[0]
}

// exact scores item i with its codes decoded exactly.
func (l compressedLayout) exact(sc *scratch, q *query, i int) float32 {
	return sc.res.exact(l.s.res, q.res, q.s, q.text, i)
}

func (l compressedLayout) item(i int) *model.Embeddings { return l.s.decodeItem(i) }

func (l compressedLayout) globals() *model.Embeddings {
	s := l.s
	n, d := s.header.Items, s.header.Dim
	e := &model.Embeddings{Dim: d, Offsets: make([]int, n+1), Global: make([]float32, n*d)}
	for i := range n {
		copy(e.Global[i*d:], s.global.decode(i, d))
	}
	return e
}

// willNeed asks for the residual codes, the one part of a compressed
// segment not kept in memory: on an index larger than the page cache
// they are scattered reads from disk, asked for at once rather than one
// page fault at a time.
func (l compressedLayout) willNeed(i int, _ bool) {
	s := l.s
	if s.readAhead || !s.mapped {
		return
	}
	v := s.res
	bs := 16 * v.cb.m
	mmap.WillNeed(v.codes[v.offsets[i]/pqBlock*bs : pqBlocks(v.offsets[i+1])*bs])
}

// fetch asks for the fast-scan blocks that hold item i's residual codes.
func (l compressedLayout) fetch(i int) { l.s.res.fetchCodes(i) }

// coarseCodes estimates on the coarse codes of a compressed segment
// (which has them), kept in memory.
type coarseCodes struct{ s *segment }

func (c coarseCodes) estimate(sc *scratch, q *query, i int) float32 {
	sc.res.score(c.s.res.coarse, q.res, q.s, q.text, i, i+1, sc.one[:])
	return sc.one[0]
}

func (coarseCodes) willNeed(int, bool) {}

func (c coarseCodes) fetch(i int) { c.s.res.coarse.fetchCodes(i) }

// fetchCodes asks for the fast-scan blocks that hold item i's codes to
// be brought into the caches.
func (v *resView) fetchCodes(i int) {
	bs := 16 * v.cb.m
	b0, b1 := v.offsets[i]/pqBlock, pqBlocks(v.offsets[i+1])
	prefetch(unsafe.Pointer(unsafe.SliceData(v.codes[b0*bs:])), (b1-b0)*bs)
}

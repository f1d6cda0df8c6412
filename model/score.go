package model

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/xmr-project/xmr/blas"
	"github.com/xmr-project/xmr/tensor"
)

// This file holds every score in two forms side by side: Similarity on
// padded, masked tensors with autodiff (training), and ScoreMatrix on
// Embeddings without a tape (evaluation, the demo, the index). A test on
// random inputs holds them equal. The alignment poolings (TERAN eq. 3-4),
// for an image of regions r and a caption of words w, with A[r, w] the
// cosine of region r and word w:
//
//	MrSw   = sum over w of max over r of A[r, w]
//	MwSr   = sum over r of max over w of A[r, w]
//	Symm   = MrSw + MwSr
//	MrAvgw = MrSw / number of words
//
// Global is the cosine of the two global vectors; Order is SEAM's
// order-embedding similarity of the global vectors, -||max(0, I - T)||^2
// for image vector I and caption vector T, whose fast form is a blocked
// kernel rather than a GEMM. Masked regions cannot win a max and masked
// words add nothing to a sum. ScoreMatrixCompat (compat.go) scores under
// the official TERAN evaluation's convention instead, whose padding
// takes part in the maxima as zeros.

// Similarity scores every image against every caption of a batch: (B, C),
// recording on tp for backpropagation when tp is not nil.
func Similarity(tp *tensor.Tape, img, txt *Encoded, s Scoring) *tensor.Tensor {
	switch s {
	case Global:
		return tp.MatMul(img.Global, txt.Global, false, true)
	case Order:
		return tp.Neg(tp.OrderViolation(img.Global, txt.Global))
	case MrSw, MwSr, Symm, MrAvgw:
		if img.Vecs == nil || txt.Vecs == nil {
			panic(&tensor.ShapeError{Op: "Similarity", Msg: fmt.Sprintf("%s pools region and word vectors; this model encodes global vectors only", s)})
		}
		return alignmentSimilarity(tp, img, txt, s)
	}
	panic(fmt.Sprintf("model: Similarity with unknown scoring %q", s)) // Scoring values are validated when parsed
}

// Alignments returns the region-word alignment matrices of every image
// against every caption, A[b, r, c, w] = <region r of image b, word w of
// caption c>, shape (B, L1, C, L2): one matrix product of all regions by all
// words.
func Alignments(tp *tensor.Tape, img, txt *Encoded) *tensor.Tensor {
	b, l1, e := img.Vecs.Shape[0], img.Vecs.Shape[1], img.Vecs.Shape[2]
	c, l2 := txt.Vecs.Shape[0], txt.Vecs.Shape[1]
	a := tp.MatMul(tp.Reshape(img.Vecs, b*l1, e), tp.Reshape(txt.Vecs, c*l2, e), false, true) // (B*L1, C*L2)
	return tp.Reshape(a, b, l1, c, l2)
}

// alignmentSimilarity pools the alignment matrices into scores (B, C).
func alignmentSimilarity(tp *tensor.Tape, img, txt *Encoded, s Scoring) *tensor.Tensor {
	a := Alignments(tp, img, txt) // (B, L1, C, L2)
	b, l1, c, l2 := a.Shape[0], a.Shape[1], a.Shape[2], a.Shape[3]
	regMask := tensor.FromData(img.Mask.Data, b, l1, 1, 1)
	wordMask := tensor.FromData(txt.Mask.Data, 1, 1, c, l2)
	mrsw := func() *tensor.Tensor {
		mx, _ := tp.Max(a, 1, false, regMask)                                         // (B, C, L2)
		return tp.Sum(tp.Mul(mx, tensor.FromData(txt.Mask.Data, 1, c, l2)), false, 2) // (B, C)
	}
	mwsr := func() *tensor.Tensor {
		mx, _ := tp.Max(a, 3, false, wordMask)                                        // (B, L1, C)
		return tp.Sum(tp.Mul(mx, tensor.FromData(img.Mask.Data, b, l1, 1)), false, 1) // (B, C)
	}
	switch s {
	case MwSr:
		return mwsr()
	case Symm:
		return tp.Add(mrsw(), mwsr())
	case MrAvgw:
		cnt := tensor.New(1, c)
		for j := 0; j < c; j++ {
			var n float32
			for w := 0; w < l2; w++ {
				n += txt.Mask.Data[j*l2+w]
			}
			cnt.Data[j] = max(n, 1)
		}
		return tp.Div(mrsw(), cnt)
	default: // MrSw
		return mrsw()
	}
}

// ScoreMatrix returns the (images.Len() x texts.Len()) similarity matrix,
// row-major, with scoring s. Global is one matrix product; Order and the
// alignment poolings run block by block of images and captions, in
// parallel over all cores (the poolings with one matrix product per block,
// pooled directly, so memory stays bounded). Cancelling ctx stops it with
// ctx's error.
func ScoreMatrix(ctx context.Context, images, texts *Embeddings, s Scoring) ([]float32, error) {
	return scoreMatrix(ctx, images, texts, s, false)
}

// scoreMatrix is ScoreMatrix, pooling as the official TERAN evaluation
// does when official is set (see ScoreMatrixCompat, which checks the
// embeddings first).
func scoreMatrix(ctx context.Context, images, texts *Embeddings, s Scoring, official bool) ([]float32, error) {
	ni, nt := images.Len(), texts.Len()
	if ni > 0 && nt > 0 && images.Dim != texts.Dim {
		return nil, fmt.Errorf("score: image vectors have %d dimensions, caption vectors %d", images.Dim, texts.Dim)
	}
	out := make([]float32, ni*nt)
	if ni == 0 || nt == 0 {
		return out, nil
	}
	switch s {
	case Global:
		blas.Sgemm(false, true, ni, nt, images.Dim, 1, images.Global, images.Dim, texts.Global, texts.Dim, 0, out, nt)
		return out, nil
	case Order:
		// Blocks of 16 images by 128 captions: the captions' vectors (512
		// KiB at 1024 dimensions) stay in cache while every image passes.
		err := inBlocks(ctx, ni, nt, 16, 128, func(i0, i1, t0, t1 int, _ []float32) []float32 {
			e := images.Dim
			dst := out[i0*nt+t0:]
			tensor.OrderViolations(dst, nt, images.Global[i0*e:i1*e], i1-i0, texts.Global[t0*e:t1*e], t1-t0, e)
			for i := 0; i < i1-i0; i++ {
				row := dst[i*nt : i*nt+t1-t0]
				for t := range row {
					row[t] = -row[t]
				}
			}
			return nil
		})
		return out, err
	case MrSw, MwSr, Symm, MrAvgw:
		if len(images.Vecs) == 0 && len(texts.Vecs) == 0 {
			return nil, fmt.Errorf("score: %s pools region and word vectors; these embeddings have global vectors only (score them with global or order)", s)
		}
	default:
		return nil, fmt.Errorf("score: unknown scoring %q (want %s)", s, joinScorings(scorings))
	}
	err := inBlocks(ctx, ni, nt, 16, 512, func(i0, i1, t0, t1 int, buf []float32) []float32 {
		return poolBlock(images, texts, i0, i1, t0, t1, s, official, buf, out)
	})
	return out, err
}

// inBlocks runs block(i0, i1, t0, t1, buf) over every block of imgBlock
// images by txtBlock captions of an ni x nt matrix, on GOMAXPROCS
// goroutines; buf is a scratch slice that each goroutine keeps between its
// blocks (block returns it, grown as needed). Cancelling ctx stops handing
// out blocks and returns ctx's error.
func inBlocks(ctx context.Context, ni, nt, imgBlock, txtBlock int, block func(i0, i1, t0, t1 int, buf []float32) []float32) error {
	type job struct{ i0, t0 int }
	jobs := make(chan job)
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []float32
			for j := range jobs {
				buf = block(j.i0, min(j.i0+imgBlock, ni), j.t0, min(j.t0+txtBlock, nt), buf)
			}
		}()
	}
	var err error
loop:
	for i0 := 0; i0 < ni; i0 += imgBlock {
		for t0 := 0; t0 < nt; t0 += txtBlock {
			select {
			case <-ctx.Done():
				err = ctx.Err()
				break loop
			case jobs <- job{i0, t0}:
			}
		}
	}
	close(jobs)
	wg.Wait()
	return err
}

// poolBlock scores images [i0, i1) against texts [t0, t1) into out (rows
// of texts.Len()), computing the block's alignment matrix with one GEMM
// into buf (grown as needed and returned). With official set it pools as
// the official TERAN evaluation does (CompatOfficial): each caption's last
// vector is left out, and the zero slots of its padding floor the maxima.
func poolBlock(images, texts *Embeddings, i0, i1, t0, t1 int, s Scoring, official bool, buf, out []float32) []float32 {
	e := images.Dim
	r0, rows := images.Offsets[i0], images.Offsets[i1]-images.Offsets[i0]
	c0, cols := texts.Offsets[t0], texts.Offsets[t1]-texts.Offsets[t0]
	if rows*cols > cap(buf) {
		buf = make([]float32, rows*cols)
	}
	a := buf[:rows*cols]
	if rows > 0 && cols > 0 {
		// A = regions (rows, E) x words (cols, E)^T.
		blas.Sgemm(false, true, rows, cols, e, 1, images.Vecs[r0*e:(r0+rows)*e], e, texts.Vecs[c0*e:(c0+cols)*e], e, 0, a, cols)
	}
	nt := texts.Len()
	var colMax []float32
	for i := i0; i < i1; i++ {
		ra, rb := images.Offsets[i]-r0, images.Offsets[i+1]-r0
		floorRegions := official && rb-ra < OfficialRegionSlots
		for t := t0; t < t1; t++ {
			ca, cb := texts.Offsets[t]-c0, texts.Offsets[t+1]-c0
			floorWords := false
			if official {
				cb-- // the last token before [SEP] is not scored
				floorWords = cb-ca < OfficialWordSlots
			}
			colMax = poolPair(a, cols, ra, rb, ca, cb, colMax)
			var mrsw, mwsr float32
			for _, v := range colMax {
				if floorRegions {
					v = max(v, 0)
				}
				mrsw += v
			}
			if s == MwSr || s == Symm {
				for r := ra; r < rb; r++ {
					row := a[r*cols+ca : r*cols+cb]
					if len(row) == 0 {
						break
					}
					best := row[0]
					for _, v := range row[1:] {
						best = max(best, v)
					}
					if floorWords {
						best = max(best, 0)
					}
					mwsr += best
				}
			}
			var v float32
			switch s {
			case MwSr:
				v = mwsr
			case Symm:
				v = mrsw + mwsr
			case MrAvgw:
				v = mrsw / float32(max(cb-ca, 1))
			default:
				v = mrsw
			}
			out[i*nt+t] = v
		}
	}
	return buf
}

// poolPair returns, for the alignment sub-matrix of rows [ra, rb) (regions)
// and columns [ca, cb) (words) of a (row stride cols), the max over regions
// of each word; a word with no region gets 0, as a fully masked max does in
// Similarity.
func poolPair(a []float32, cols, ra, rb, ca, cb int, colMax []float32) []float32 {
	colMax = colMax[:0]
	if rb == ra {
		for range cb - ca {
			colMax = append(colMax, 0)
		}
		return colMax
	}
	colMax = append(colMax, a[ra*cols+ca:ra*cols+cb]...)
	for r := ra + 1; r < rb; r++ {
		row := a[r*cols+ca : r*cols+cb]
		for w, v := range row {
			colMax[w] = max(colMax[w], v)
		}
	}
	return colMax
}

// WordAlignments returns the alignment matrix of caption c of texts and
// image i of images: texts.Count(c) rows (one per word vector) of
// images.Count(i) cosines, row-major.
func WordAlignments(images *Embeddings, i int, texts *Embeddings, c int) []float32 {
	nr, nw := images.Count(i), texts.Count(c)
	out := make([]float32, nw*nr)
	if nr > 0 && nw > 0 {
		blas.Sgemm(false, true, nw, nr, texts.Dim, 1, texts.Item(c), texts.Dim, images.Item(i), images.Dim, 0, out, nr)
	}
	return out
}

// WordMatch is one caption word's best region in an image.
type WordMatch struct {
	Word   int     // index of the word in strings.Fields(caption)
	Region int     // index of the region in the image's features
	Cosine float32 // their cosine: the word's contribution to MrSw
}

// MatchWords returns, for every word of caption c that takes part in the
// alignment, the region of image i its first token aligns with best, in
// the order of the words. This is the alignment behind the MrSw score (the
// paper's Fig. 7).
func MatchWords(images *Embeddings, i int, texts *Embeddings, c int) []WordMatch {
	a := WordAlignments(images, i, texts, c)
	nr := images.Count(i)
	if nr == 0 {
		return nil
	}
	regions, words := images.ItemPos(i), texts.ItemPos(c)
	var out []WordMatch
	seen := map[int32]bool{}
	for k, w := range words {
		if w < 0 || seen[w] {
			continue
		}
		seen[w] = true
		row := a[k*nr : (k+1)*nr]
		best := 0
		for r, v := range row {
			if v > row[best] {
				best = r
			}
		}
		out = append(out, WordMatch{Word: int(w), Region: int(regions[best]), Cosine: row[best]})
	}
	return out
}

// Hit is one retrieved item and its score.
type Hit struct {
	Index int
	Score float32
}

// TopK returns the k highest scores, best first; ties keep the lower
// index first. NaN scores rank last.
func TopK(scores []float32, k int) []Hit {
	k = min(k, len(scores))
	if k <= 0 {
		return nil
	}
	h := make(hitHeap, 0, k)
	for i, s := range scores {
		if math.IsNaN(float64(s)) {
			s = float32(math.Inf(-1))
		}
		if len(h) < k {
			heap.Push(&h, Hit{i, s})
		} else if s > h[0].Score {
			h[0] = Hit{i, s}
			heap.Fix(&h, 0)
		}
	}
	out := make([]Hit, len(h))
	for j := len(h) - 1; j >= 0; j-- {
		out[j] = heap.Pop(&h).(Hit)
	}
	return out
}

// hitHeap is a min-heap of hits by score; among equal scores the higher
// index is smaller, so that it is evicted first.
type hitHeap []Hit

func (h hitHeap) Len() int { return len(h) }
func (h hitHeap) Less(a, b int) bool {
	if h[a].Score != h[b].Score {
		return h[a].Score < h[b].Score
	}
	return h[a].Index > h[b].Index
}
func (h hitHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *hitHeap) Push(x any)   { *h = append(*h, x.(Hit)) }
func (h *hitHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

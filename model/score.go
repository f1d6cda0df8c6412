package model

import (
	"context"
	"math"
	"runtime"
	"sync"

	"github.com/xmr-project/xmr/blas"
)

// Bank holds encoded items of one modality for scoring without a tape:
// N items of up to L vectors of E floats, with a mask of the vectors that
// take part in the alignment and the global (CLS) vectors.
type Bank struct {
	N, L, E int
	Vecs    []float32 // (N, L, E), L2-normalised
	Mask    []float32 // (N, L)
	CLS     []float32 // (N, E)
}

// BankOf copies an Embedded (computed without a tape) into a Bank.
func BankOf(e *Embedded) *Bank {
	n, l, d := e.Vecs.Shape[0], e.Vecs.Shape[1], e.Vecs.Shape[2]
	return &Bank{N: n, L: l, E: d, Vecs: append([]float32(nil), e.Vecs.Data...), Mask: append([]float32(nil), e.Mask.Data...), CLS: append([]float32(nil), e.CLS.Data...)}
}

// Append adds the items of o (same L and E) to b. Banks with different L
// are padded to the larger L.
func (b *Bank) Append(o *Bank) {
	if b.N == 0 {
		*b = Bank{N: o.N, L: o.L, E: o.E, Vecs: append([]float32(nil), o.Vecs...), Mask: append([]float32(nil), o.Mask...), CLS: append([]float32(nil), o.CLS...)}
		return
	}
	if o.L > b.L {
		b.pad(o.L)
	}
	if o.L < b.L {
		o = o.padded(b.L)
	}
	b.Vecs = append(b.Vecs, o.Vecs...)
	b.Mask = append(b.Mask, o.Mask...)
	b.CLS = append(b.CLS, o.CLS...)
	b.N += o.N
}

func (b *Bank) pad(l int) { *b = *b.padded(l) }

func (b *Bank) padded(l int) *Bank {
	out := &Bank{N: b.N, L: l, E: b.E, Vecs: make([]float32, b.N*l*b.E), Mask: make([]float32, b.N*l), CLS: b.CLS}
	for i := 0; i < b.N; i++ {
		copy(out.Vecs[i*l*b.E:], b.Vecs[i*b.L*b.E:(i+1)*b.L*b.E])
		copy(out.Mask[i*l:], b.Mask[i*b.L:(i+1)*b.L])
	}
	return out
}

// ScoreMatrix returns the (images.N x texts.N) similarity matrix, row-major,
// with the given scoring: "global" (CLS cosine, TERN) or an alignment
// pooling (MrSw, MwSr, Symm, MrAvgw). It works in blocks so that memory stays
// bounded, in parallel over all cores.
func ScoreMatrix(ctx context.Context, images, texts *Bank, mode string) ([]float32, error) {
	out := make([]float32, images.N*texts.N)
	if mode == "global" {
		blas.Sgemm(false, true, images.N, texts.N, images.E, 1, images.CLS, images.E, texts.CLS, texts.E, 0, out, texts.N)
		return out, nil
	}
	const imgBlock, txtBlock = 16, 512
	type job struct{ i0, t0 int }
	jobs := make(chan job)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	var firstErr error
	var once sync.Once
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]float32, imgBlock*images.L*txtBlock*texts.L)
			for j := range jobs {
				i1, t1 := min(j.i0+imgBlock, images.N), min(j.t0+txtBlock, texts.N)
				scoreBlock(images, texts, j.i0, i1, j.t0, t1, mode, buf, out)
			}
		}()
	}
loop:
	for i0 := 0; i0 < images.N; i0 += imgBlock {
		for t0 := 0; t0 < texts.N; t0 += txtBlock {
			select {
			case <-ctx.Done():
				once.Do(func() { firstErr = ctx.Err() })
				break loop
			case jobs <- job{i0, t0}:
			}
		}
	}
	close(jobs)
	wg.Wait()
	return out, firstErr
}

// scoreBlock scores images [i0, i1) against texts [t0, t1) into out.
func scoreBlock(images, texts *Bank, i0, i1, t0, t1 int, mode string, buf, out []float32) {
	l1, l2, e := images.L, texts.L, images.E
	rows, cols := (i1-i0)*l1, (t1-t0)*l2
	a := buf[:rows*cols]
	// A = regions (rows, E) x words (cols, E)^T: one GEMM per block.
	blas.Sgemm(false, true, rows, cols, e, 1, images.Vecs[i0*l1*e:i1*l1*e], e, texts.Vecs[t0*l2*e:t1*l2*e], e, 0, a, cols)
	negInf := float32(math.Inf(-1))
	colMax := make([]float32, l2)
	for i := i0; i < i1; i++ {
		rm := images.Mask[i*l1 : (i+1)*l1]
		for t := t0; t < t1; t++ {
			wm := texts.Mask[t*l2 : (t+1)*l2]
			var mrsw, mwsr float32
			nw := 0
			for w := range colMax {
				colMax[w] = negInf
			}
			for r := 0; r < l1; r++ {
				if rm[r] == 0 {
					continue
				}
				row := a[((i-i0)*l1+r)*cols+(t-t0)*l2:][:l2]
				rowMax := negInf
				for w, v := range row {
					if wm[w] == 0 {
						continue
					}
					if v > colMax[w] {
						colMax[w] = v
					}
					if v > rowMax {
						rowMax = v
					}
				}
				if rowMax != negInf {
					mwsr += rowMax
				}
			}
			for w, v := range colMax {
				if wm[w] != 0 && v != negInf {
					mrsw += v
					nw++
				}
			}
			var s float32
			switch mode {
			case "MwSr":
				s = mwsr
			case "Symm":
				s = mrsw + mwsr
			case "MrAvgw":
				s = mrsw / float32(max(nw, 1))
			default:
				s = mrsw
			}
			out[i*texts.N+t] = s
		}
	}
}

package index

import "math"

// This file holds the compressed search's inner loops in Go (residual.go
// says where each runs), and the layouts they read; reskernels_amd64.s has
// them in assembly, with the same operations in the same order.

// tableStride returns the row length, in floats, of a query's tables for
// the kernels: nq rounded up to a multiple of 8 (one 32-byte load per 8
// query vectors), at least 8.
func tableStride(nq int) int { return max((nq+7)/8*8, 8) }

// alphaTable holds alphaValue(a) at 128+a for every int8 a: the
// interaction kernel looks the cosines up rather than divide.
var alphaTable = func() (t [256]float32) {
	for i := range t {
		t[i] = alphaValue(int8(i - 128))
	}
	return t
}()

// paddedTable is a query's centroid table (cells x nq, as
// resQuery.tables) with each row padded with zeros to tableStride(nq).
type paddedTable struct {
	t      []float32 // cells x stride
	stride int
}

// padTable returns t (cells x nq) padded as paddedTable says.
func padTable(t []float32, cells, nq int) *paddedTable {
	stride := tableStride(nq)
	p := &paddedTable{t: make([]float32, cells*stride), stride: stride}
	for c := range cells {
		copy(p.t[c*stride:c*stride+nq], t[c*nq:(c+1)*nq])
	}
	return p
}

// interactGo is interact in Go: for each item rows[k] of v, the sum over
// the query's nq vectors, in order, of the best over the item's vectors
// of its cosine with its cell's centroid times the query vector's dot
// product with that centroid (the first of equals kept); 0 for an item
// without vectors. It is interactScratch.rate's text-query MrSw sum.
func interactGo(v *resView, p *paddedTable, nq int, rows []int32, out []float32) {
	var buf [64]float32
	best := buf[:0]
	if nq > len(buf) {
		best = make([]float32, 0, nq)
	}
	best = best[:nq]
	for k, i := range rows {
		x0, x1 := v.offsets[i], v.offsets[i+1]
		if x0 == x1 {
			out[k] = 0
			continue
		}
		for j := range best {
			best[j] = float32(math.Inf(-1))
		}
		for x := x0; x < x1; x++ {
			a := alphaValue(v.alphas[x])
			row := p.t[int(v.cellOf[x])*p.stride:]
			for j := range best {
				if val := a * row[j]; val > best[j] {
					best[j] = val
				}
			}
		}
		var sum float32
		for _, b := range best {
			sum += b
		}
		out[k] = sum
	}
}

// exactAddGo adds to acc (stride floats) the rows of tab (m x 16 rows of
// stride floats: a query's exact tables, transposed by transposeExact) at
// codes (one per subspace, each below 16), subspace by subspace in order.
func exactAddGo(codes []byte, tab []float32, stride int, acc []float32) {
	acc = acc[:stride]
	for s, c := range codes {
		row := tab[(s*16+int(c))*stride:][:len(acc)]
		for j := range acc {
			acc[j] += row[j]
		}
	}
}

// transposeExact returns a query's exact tables ft (nq x m x 16, as
// pqCodebook.floatTables makes them) as m x 16 rows of stride floats
// (tableStride(nq): zeros after the nq), the layout of exactAdd.
func transposeExact(ft []float32, nq, m, stride int) []float32 {
	out := make([]float32, m*16*stride)
	for q := range nq {
		for k, f := range ft[q*m*16 : (q+1)*m*16] {
			out[k*stride+q] = f
		}
	}
	return out
}

// scoreTextGo is scoreText in Go: for each item k (its vectors rows
// offsets[k]-offsets[0] to offsets[k+1]-offsets[0] of sims, rows of nq
// floats: each one's centroid terms, the vectors being numbers base on
// in the fast-scan sums of nb blocks), the sum over the query vectors j
// of the best over its vectors of the centroid term plus scale[j] times
// the sum, plus bias[j]; 0 for an item without vectors.
func scoreTextGo(sims []float32, nq int, sums []uint16, nb, base int, offsets []int, scale, bias, out []float32) {
	v0 := offsets[0]
	for k := range out {
		r0, r1 := offsets[k]-v0, offsets[k+1]-v0
		var total float32
		for j := 0; j < nq && r1 > r0; j++ {
			sj := sums[(j/2)*nb*64+(j%2)*32:]
			sc := scale[j]
			best := float32(math.Inf(-1))
			for r := r0; r < r1; r++ {
				x := r + base
				if val := sims[r*nq+j] + sc*float32(sj[(x/pqBlock)*64+x%pqBlock]); val > best {
					best = val
				}
			}
			total += best + bias[j]
		}
		out[k] = total
	}
}

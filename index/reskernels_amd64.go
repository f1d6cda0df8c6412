//go:build !purego

package index

import "unsafe"

// interactAVX2 is implemented in reskernels_amd64.s.
//
//go:noescape
func interactAVX2(rows *int32, n int, offsets *int, cellOf *uint16, alphas *int8, t *float32, stride, nq int, alpha *float32, best *float32, out *float32)

// interact sets out[k] to the centroid interaction of item rows[k] of v
// with a text query of nq vectors under MrSw (interactGo), where p holds
// the query's table with rows padded to a multiple of 8: with AVX2 where
// the machine has it.
func interact(v *resView, p *paddedTable, nq int, rows []int32, best []float32, out []float32) {
	if len(rows) == 0 {
		return
	}
	if !hasDotsAsm || nq == 0 {
		interactGo(v, p, nq, rows, out)
		return
	}
	_ = out[len(rows)-1]
	_ = best[p.stride-1]
	_ = p.t[v.cells*p.stride-1]
	for _, i := range rows {
		_ = v.offsets[i+1] // bounds only: the kernel trusts the offsets, and the cells and cosines they point to (checked when the segment was opened)
	}
	interactAVX2(&rows[0], len(rows), &v.offsets[0], unsafe.SliceData(v.cellOf), unsafe.SliceData(v.alphas), &p.t[0], p.stride, nq, &alphaTable[0], &best[0], &out[0])
}

// prefetchLines is implemented in reskernels_amd64.s.
//
//go:noescape
func prefetchLines(p unsafe.Pointer, n int)

// prefetch asks for the n bytes at p to be brought into the caches,
// without waiting for them: what a search reads a little later from an
// item anywhere in gigabytes of segments.
func prefetch(p unsafe.Pointer, n int) {
	if n > 0 {
		prefetchLines(p, n)
	}
}

// exactAddAVX2 is implemented in reskernels_amd64.s.
//
//go:noescape
func exactAddAVX2(codes *byte, m int, tab *float32, stride int, acc *float32)

// exactAdd adds to acc the rows of tab at a vector's codes (see
// exactAddGo), with AVX2 where the machine has it.
func exactAdd(codes []byte, tab []float32, stride int, acc []float32) {
	if !hasDotsAsm || len(codes) == 0 {
		exactAddGo(codes, tab, stride, acc)
		return
	}
	_ = acc[stride-1]
	_ = tab[len(codes)*16*stride-1] // every code is below 16
	exactAddAVX2(&codes[0], len(codes), &tab[0], stride, &acc[0])
}

// scoreTextAVX2 is implemented in reskernels_amd64.s.
//
//go:noescape
func scoreTextAVX2(sims *float32, nq int, sums *uint16, pairStride, base int, offsets *int, n, v0 int, scale, bias, out *float32)

// scoreText sets out to the text-query MrSw scores of items from their
// centroid terms and fast-scan sums (see scoreTextGo), in assembly where
// the machine has AVX2.
func scoreText(sims []float32, nq int, sums []uint16, nb, base int, offsets []int, scale, bias, out []float32) {
	if !hasDotsAsm || nq == 0 || len(out) == 0 {
		scoreTextGo(sims, nq, sums, nb, base, offsets, scale, bias, out)
		return
	}
	v0, nv := offsets[0], offsets[len(out)]-offsets[0]
	if nv == 0 {
		clear(out)
		return
	}
	// Bounds: every row of sims, every pair of query vectors' sums of
	// every block the vectors lie in.
	_ = sims[nv*nq-1]
	_ = sums[((nq-1)/2)*nb*64+pqBlocks(base+nv)*64-1]
	_ = scale[nq-1]
	_ = bias[nq-1]
	scoreTextAVX2(&sims[0], nq, &sums[0], nb*128, base, &offsets[0], len(out), v0, &scale[0], &bias[0], &out[0])
}

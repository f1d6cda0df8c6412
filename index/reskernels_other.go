//go:build !amd64 || purego

package index

import "unsafe"

// interact sets out[k] to the centroid interaction of item rows[k] of v
// with a text query of nq vectors under MrSw (see interactGo).
func interact(v *resView, p *paddedTable, nq int, rows []int32, _ []float32, out []float32) {
	interactGo(v, p, nq, rows, out)
}

// prefetch does nothing here.
func prefetch(unsafe.Pointer, int) {}

// exactAdd adds to acc the rows of tab at a vector's codes (see
// exactAddGo).
func exactAdd(codes []byte, tab []float32, stride int, acc []float32) {
	exactAddGo(codes, tab, stride, acc)
}

// scoreText sets out to the text-query MrSw scores of items from their
// centroid terms and fast-scan sums (see scoreTextGo).
func scoreText(sims []float32, nq int, sums []uint16, nb, base int, offsets []int, scale, bias, out []float32) {
	scoreTextGo(sims, nq, sums, nb, base, offsets, scale, bias, out)
}

//go:build !purego

package index

import "golang.org/x/sys/cpu"

// int8Kernels are the int8 kernels of amd64, widest first (int8.go picks
// the first this machine runs):
//   - avx512vnni: 8 rows against 12 query vectors at a time, VPDPBUSD on
//     512-bit registers (AVX-512 VNNI, e.g. Intel Xeon since Cascade Lake,
//     AMD Zen 4 and 5);
//   - avxvnni: 2 rows against 12, VEX-encoded VPDPBUSD on 256-bit
//     registers (AVX-VNNI without AVX-512, e.g. Intel Core since Alder
//     Lake);
//   - avx2: dots12AVX2, one row against 12 with VPMADDWD on the query's
//     codes widened to int16.
//
// VPDPBUSD multiplies unsigned bytes by signed ones, so the VNNI kernels
// flip the top bit of each row byte (the unsigned code x+128) and take off
// 128 times the sum of the query's codes over the span (packedQuery.sums):
// the result is exact.
var int8Kernels = []*int8Kernel{
	{name: "avx512vnni", has: hasAVX512Asm && cpu.X86.HasAVX512VNNI, bytes: true, dots: vnniDots(8, dots8x12VNNI512)},
	{name: "avxvnni", has: hasDotsAsm && cpu.X86.HasAVXVNNI, bytes: true, dots: vnniDots(2, dots2x12AVXVNNI)},
	{name: "avx2", has: hasDotsAsm, dots: func(codes []int8, nv, stride int, p *packedQuery, k0, span int, out []int32) {
		for g, qg := range p.q16 {
			dots12(codes[k0:], nv, stride, qg[k0*12:], span, out[g*nv*12:(g+1)*nv*12])
		}
	}},
	goInt8,
}

// vnniTile is the signature of the VNNI kernels in int8_amd64.s: for the
// tile's rows r (at v + r*stride) and each of the groups groups of 12
// query vectors (group g at q + g*gstride, chunk-major as in
// packedQuery.q8, starting at the span's first chunk), they add to
// out[g*ostride+r*12+w] the dot product over dlen elements (a positive
// multiple of 16) of row r and query w, less corr[g*12+w] (128 times the
// sum of that query's codes over the span).
type vnniTile func(v *int8, stride int, q *int8, dlen int, out *int32, groups, gstride, ostride int, corr *int32)

// dots8x12VNNI512 is implemented in int8_amd64.s (8 rows a tile).
//
//go:noescape
func dots8x12VNNI512(v *int8, stride int, q *int8, dlen int, out *int32, groups, gstride, ostride int, corr *int32)

// dots2x12AVXVNNI is implemented in int8_amd64.s (2 rows a tile).
//
//go:noescape
func dots2x12AVXVNNI(v *int8, stride int, q *int8, dlen int, out *int32, groups, gstride, ostride int, corr *int32)

// vnniDots returns the int8Kernel.dots of a VNNI tile of rows rows: whole
// tiles straight into out; the rows left over (fewer than a tile) through
// one more tile, over the last rows rows when there are that many (the
// overlap is scored twice and kept once), else over a copy padded with
// zero rows.
func vnniDots(rows int, tile vnniTile) func(codes []int8, nv, stride int, p *packedQuery, k0, span int, out []int32) {
	return func(codes []int8, nv, stride int, p *packedQuery, k0, span int, out []int32) {
		ng, cd := p.ng, p.cd
		nc := cd / 16
		_ = codes[(nv-1)*stride+k0+span-1]
		_ = p.q8[(ng-1)*12*cd+(k0+span)*12-1]
		_ = out[ng*nv*12-1]
		var cbuf [8 * 12]int32
		corr := cbuf[:]
		if ng > 8 {
			corr = make([]int32, ng*12)
		}
		c0, c1 := k0/16, (k0+span)/16
		for g := range ng {
			s := p.sums[g*(nc+1)*12:]
			for w := range 12 {
				corr[g*12+w] = s[c1*12+w] - s[c0*12+w]
			}
		}
		full := nv / rows * rows
		for r := 0; r < full; r += rows {
			tile(&codes[r*stride+k0], stride, &p.q8[k0*12], span, &out[r*12], ng, 12*cd, nv*12, &corr[0])
		}
		if full == nv {
			return
		}
		// The rows left over: results of a whole tile into t, groups
		// rows*12 apart.
		var tbuf [8 * 8 * 12]int32
		t := tbuf[:]
		if ng*rows*12 > len(tbuf) {
			t = make([]int32, ng*rows*12)
		}
		t = t[:ng*rows*12]
		clear(t)
		first := 0 // the tile's row that is row full of out
		if nv >= rows {
			first = rows - (nv - full)
			tile(&codes[(nv-rows)*stride+k0], stride, &p.q8[k0*12], span, &t[0], ng, 12*cd, rows*12, &corr[0])
		} else {
			padded := make([]int8, rows*span)
			for r := range nv {
				copy(padded[r*span:(r+1)*span], codes[r*stride+k0:r*stride+k0+span])
			}
			tile(&padded[0], span, &p.q8[k0*12], span, &t[0], ng, 12*cd, rows*12, &corr[0])
		}
		left := nv - full
		for g := range ng {
			o := out[g*nv*12+full*12 : (g+1)*nv*12]
			for i, x := range t[(g*rows+first)*12 : (g*rows+first+left)*12] {
				o[i] += x
			}
		}
	}
}

//go:build !purego

package index

import "golang.org/x/sys/cpu"

// hasDotsAsm reports whether dots12AVX2 (and the compressed search's
// kernels, reskernels_amd64.s) can run here; hasFMAAsm whether
// dots12fAVX2 can; hasAVX512Asm whether dots4x12fAVX512 can.
var (
	hasDotsAsm   = cpu.X86.HasAVX2
	hasFMAAsm    = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	hasAVX512Asm = hasFMAAsm && cpu.X86.HasAVX512F
)

// FloatKernel names the kernel that scores float32 vectors on this
// machine: "avx512", "avx2" or "go" (the portable loops). GODEBUG's
// cpu.avx512f=off or cpu.avx2=off chooses a narrower one, to compare them.
func FloatKernel() string {
	switch {
	case hasAVX512Asm:
		return "avx512"
	case hasFMAAsm:
		return "avx2"
	}
	return "go"
}

// dots12fAVX2 is implemented in dots_amd64.s.
//
//go:noescape
func dots12fAVX2(v *float32, nv, stride int, q *float32, dlen int, out *float32)

// dots12f adds to out[g*ostride+r*rstride+w] the dot products over dlen
// elements of the nv float32 rows of v (stride apart) with the 12 queries
// of each of the ng groups packed in q (see dots12fGo), group g at
// q[g*gstride:], with AVX2 and FMA where the machine has them: 4 rows at a
// time through dots4x12fAVX512 where it has AVX-512 too, or else
// dots4x12fAVX2; the rest through dots12fAVX2.
func dots12f(v []float32, nv, stride int, q []float32, ng, gstride, dlen int, out []float32, ostride, rstride int) {
	if nv == 0 || dlen == 0 || ng == 0 {
		return
	}
	if !hasFMAAsm {
		dots12fGroupsGo(v, nv, stride, q, ng, gstride, dlen, out, ostride, rstride)
		return
	}
	_ = v[(nv-1)*stride+dlen-1]
	_ = q[(ng-1)*gstride+12*dlen-1]
	_ = out[(ng-1)*ostride+(nv-1)*rstride+11]
	tile := dots4x12fAVX2
	if hasAVX512Asm {
		tile = dots4x12fAVX512
	}
	r := 0
	for ; r+4 <= nv; r += 4 {
		tile(&v[r*stride], stride, &q[0], dlen, &out[r*rstride], ng, gstride, ostride, rstride)
	}
	if r == nv {
		return
	}
	for g := range ng {
		var t [3 * 12]float32
		dots12fAVX2(&v[r*stride], nv-r, stride, &q[g*gstride], dlen, &t[0])
		for i := range nv - r {
			o := out[g*ostride+(r+i)*rstride:]
			for w, x := range t[i*12 : i*12+12] {
				o[w] += x
			}
		}
	}
}

// dots4x12fAVX2 is implemented in dots_amd64.s.
//
//go:noescape
func dots4x12fAVX2(v *float32, stride int, q *float32, dlen int, out *float32, groups, gstride, ostride, rstride int)

// dots4x12fAVX512 is implemented in dots_amd64.s.
//
//go:noescape
func dots4x12fAVX512(v *float32, stride int, q *float32, dlen int, out *float32, groups, gstride, ostride, rstride int)

// dots12AVX2 is implemented in dots_amd64.s.
//
//go:noescape
func dots12AVX2(v *int8, nv, stride int, q *int16, dlen int, out *int32)

// dots12 adds to out[r*12+w] the integer dot products over dlen elements
// of the nv int8 rows of v (stride apart) with 12 packed queries (see
// dots12Go), with AVX2 where the machine has it.
func dots12(v []int8, nv, stride int, q []int16, dlen int, out []int32) {
	if nv == 0 || dlen == 0 {
		return
	}
	if hasDotsAsm {
		_ = v[(nv-1)*stride+dlen-1]
		_ = q[12*dlen-1]
		_ = out[12*nv-1]
		dots12AVX2(&v[0], nv, stride, &q[0], dlen, &out[0])
		return
	}
	dots12Go(v, nv, stride, q, dlen, out)
}

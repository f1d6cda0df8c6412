//go:build !purego

package index

import "golang.org/x/sys/cpu"

// hasDotsAsm reports whether dots12AVX2 can run here; hasFMAAsm whether
// dots12fAVX2 can.
var (
	hasDotsAsm = cpu.X86.HasAVX2
	hasFMAAsm  = cpu.X86.HasAVX2 && cpu.X86.HasFMA
)

// dots12fAVX2 is implemented in dots_amd64.s.
//
//go:noescape
func dots12fAVX2(v *float32, nv, stride int, q *float32, dlen int, out *float32)

// dots12f adds to out[r*12+w] the dot products over dlen elements of the
// nv float32 rows of v (stride apart) with 12 packed queries (see
// dots12fGo), with AVX2 and FMA where the machine has them.
func dots12f(v []float32, nv, stride int, q []float32, dlen int, out []float32) {
	if nv == 0 || dlen == 0 {
		return
	}
	if hasFMAAsm {
		_ = v[(nv-1)*stride+dlen-1]
		_ = q[12*dlen-1]
		_ = out[12*nv-1]
		dots12fAVX2(&v[0], nv, stride, &q[0], dlen, &out[0])
		return
	}
	dots12fGo(v, nv, stride, q, dlen, out)
}

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

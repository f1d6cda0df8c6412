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
func dots12fAVX2(v *float32, nv int, q *float32, d int, out *float32)

// dots12f computes out[r*12+w] for the nv float32 vectors of v (see
// dots12fGo), with AVX2 and FMA where the machine has them.
func dots12f(v []float32, nv int, q []float32, d int, out []float32) {
	if nv == 0 {
		return
	}
	if hasFMAAsm {
		_ = v[nv*d-1]
		_ = q[12*d-1]
		_ = out[12*nv-1]
		dots12fAVX2(&v[0], nv, &q[0], d, &out[0])
		return
	}
	dots12fGo(v, nv, q, d, out)
}

// dots12AVX2 is implemented in dots_amd64.s.
//
//go:noescape
func dots12AVX2(v *int8, nv int, q *int16, d int, out *int32)

// dots12 computes out[r*12+w] for the nv vectors of v (see dots12Go),
// with AVX2 where the machine has it.
func dots12(v []int8, nv int, q []int16, d int, out []int32) {
	if nv == 0 {
		return
	}
	if hasDotsAsm {
		_ = v[nv*d-1]
		_ = q[12*d-1]
		_ = out[12*nv-1]
		dots12AVX2(&v[0], nv, &q[0], d, &out[0])
		return
	}
	dots12Go(v, nv, q, d, out)
}

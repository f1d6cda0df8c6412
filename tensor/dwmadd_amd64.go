//go:build !purego

package tensor

import "golang.org/x/sys/cpu"

// hasMaddFMA reports whether the depthwise convolution's multiply-adds
// run in AVX2 with FMA (dwmadd_amd64.s).
var hasMaddFMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func madd4FMA(dst, a0, b0, a1, b1, a2, b2, a3, b3 *float32, n int)

//go:noescape
func madd1FMA(dst, a, b *float32, n int)

// dwMadd1 adds a*b to dst elementwise; a and b are at least as long as
// dst. With AVX2 and FMA each product is fused into its sum (one rounding
// where dwMadd1Go rounds twice).
func dwMadd1(dst, a, b []float32) {
	n := len(dst)
	if hasMaddFMA && n > 0 {
		_, _ = a[n-1], b[n-1]
		madd1FMA(&dst[0], &a[0], &b[0], n)
		return
	}
	dwMadd1Go(dst, a, b)
}

// dwMadd4 adds a0*b0 + a1*b1 + a2*b2 + a3*b3 to dst elementwise, in AVX2
// with FMA where the CPU has them (four fused multiply-adds into dst, in
// that order).
func dwMadd4(dst, a0, b0, a1, b1, a2, b2, a3, b3 []float32) {
	n := len(dst)
	if hasMaddFMA && n > 0 {
		_, _, _, _ = a0[n-1], b0[n-1], a1[n-1], b1[n-1]
		_, _, _, _ = a2[n-1], b2[n-1], a3[n-1], b3[n-1]
		madd4FMA(&dst[0], &a0[0], &b0[0], &a1[0], &b1[0], &a2[0], &b2[0], &a3[0], &b3[0], n)
		return
	}
	dwMadd4Go(dst, a0, b0, a1, b1, a2, b2, a3, b3)
}

//go:build !purego

package detect

import "golang.org/x/sys/cpu"

var hasFMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func dwRowFMA(o, x, w *float32, n, C, xstep int)

// dwRow is dwRowGo, with AVX2 and FMA where the CPU has them (the fused
// multiply-add rounds once where the portable kernel rounds twice).
func dwRow(o, x, w []float32, n, C, xstep int) {
	if n <= 0 {
		return
	}
	// The slices must hold what the kernel touches.
	_ = o[(n-1)*C+C-1]
	_ = x[(n-1)*xstep+C-1]
	_ = w[C-1]
	if hasFMA {
		dwRowFMA(&o[0], &x[0], &w[0], n, C, xstep)
		return
	}
	dwRowGo(o, x, w, n, C, xstep)
}

//go:noescape
func dwInt4FMA(o, x, w *float32, groups, c8, k, xstep, rowstride, C int)

// dwInterior is dwInteriorGo, with AVX2 and FMA where the CPU has them
// and there are at least 8 channels.
func dwInterior(o, x, w []float32, groups, C, k, xstep, rowstride int) {
	if groups <= 0 {
		return
	}
	// The slices must hold what the kernel touches.
	_ = o[4*groups*C-1]
	_ = x[(4*groups-1)*xstep+(k-1)*rowstride+k*C-1]
	_ = w[k*k*C-1]
	c8 := 0
	if hasFMA {
		c8 = C &^ 7
	}
	if c8 > 0 {
		dwInt4FMA(&o[0], &x[0], &w[0], groups, c8, k, xstep, rowstride, C)
	}
	switch {
	case c8 == C:
	case c8 > 0:
		// The last 8 channels again (the kernel writes its outputs, so
		// those it did already come out the same): the channels over a
		// multiple of 8 (2 of the head's 18) at the kernel's speed.
		dwInt4FMA(&o[C-8], &x[C-8], &w[C-8], groups, 8, k, xstep, rowstride, C)
	default:
		dwInteriorGo(o, x, w, groups, C, k, xstep, rowstride, c8)
	}
}

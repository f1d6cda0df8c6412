//go:build !amd64 || purego

package detect

func dwRow(o, x, w []float32, n, C, xstep int) {
	if n <= 0 {
		return
	}
	dwRowGo(o, x, w, n, C, xstep)
}

func dwInterior(o, x, w []float32, groups, C, k, xstep, rowstride int) {
	if groups <= 0 {
		return
	}
	dwInteriorGo(o, x, w, groups, C, k, xstep, rowstride, 0)
}

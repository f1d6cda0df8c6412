//go:build !amd64 || purego

package detect

func dwRow(o, x, w []float32, n, C, xstep int) {
	if n <= 0 {
		return
	}
	dwRowGo(o, x, w, n, C, xstep)
}

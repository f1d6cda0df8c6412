//go:build !amd64 || purego

package detect

// biasAct sets dst[r*C+j] = a(src[r*C+j] + bias[j]) for every row r of
// dst (len(dst)/C rows; bias nil adds nothing). dst may be src.
func biasAct(dst, src, bias []float32, C int, a act) {
	if C <= 0 {
		return
	}
	n := len(dst) / C * C
	if a.kind == "" && bias == nil {
		copy(dst[:n], src[:n])
		return
	}
	biasActGo(dst[:n], src[:n], bias, C, 0, a)
}

// scaleCols sets dst[r*C+j] = src[r*C+j] * y[j] for every row r of dst.
func scaleCols(dst, src, y []float32, C int) {
	if C <= 0 {
		return
	}
	n := len(dst) / C * C
	scaleColsGo(dst[:n], src[:n], y, C, 0)
}

//go:build !purego

package detect

//go:noescape
func biasActAVX2(dst, src, bias *float32, rows, C, mode int, add, mul float32)

// zeros8 is the bias of an activation without one, run as rows of 8.
var zeros8 [8]float32

// biasAct sets dst[r*C+j] = a(src[r*C+j] + bias[j]) for every row r of
// dst (len(dst)/C rows; bias nil adds nothing). dst may be src. With AVX2
// and FMA the columns up to a multiple of 8 go through the vector kernel.
func biasAct(dst, src, bias []float32, C int, a act) {
	if C <= 0 {
		return
	}
	n := len(dst) / C * C
	dst, src = dst[:n], src[:n]
	if !hasFMA || n == 0 || (a.kind == "" && bias == nil) {
		if a.kind != "" || bias != nil {
			biasActGo(dst, src, bias, C, 0, a)
		} else if &dst[0] != &src[0] {
			copy(dst, src)
		}
		return
	}
	if bias == nil {
		v := n &^ 7
		if v > 0 {
			biasActAVX2(&dst[0], &src[0], &zeros8[0], v/8, 8, a.mode(), a.add, a.mul)
		}
		if n > v {
			biasActGo(dst[v:], src[v:], nil, n-v, 0, a)
		}
		return
	}
	_ = bias[C-1]
	if C >= 8 {
		biasActAVX2(&dst[0], &src[0], &bias[0], n/C, C, a.mode(), a.add, a.mul)
	}
	if C%8 != 0 {
		biasActGo(dst, src, bias, C, C&^7, a)
	}
}

// scaleCols sets dst[r*C+j] = src[r*C+j] * y[j] for every row r of dst.
func scaleCols(dst, src, y []float32, C int) {
	if C <= 0 {
		return
	}
	n := len(dst) / C * C
	dst, src = dst[:n], src[:n]
	_ = y[C-1]
	c8 := 0
	if hasFMA && n > 0 && C >= 8 {
		c8 = C &^ 7
		biasActAVX2(&dst[0], &src[0], &y[0], n/C, C, modeScale, 0, 0)
	}
	if c8 < C {
		scaleColsGo(dst, src, y, C, c8)
	}
}

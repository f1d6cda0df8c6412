package detect

// mode numbers the activations for the vector kernel.
func (a act) mode() int {
	switch a.kind {
	case "relu":
		return 1
	case "relu6":
		return 2
	case "hswish":
		return 3
	case "sigmoid":
		return 4
	}
	return 0
}

// modeScale is the vector kernel's mode that multiplies each row by a
// vector (scaleCols), numbered after the activations of act.mode.
const modeScale = 5

// one computes the activation of a single value; the vector kernel computes
// the same operations in the same order (the sigmoid excepted: there a
// polynomial of 2^f within 2e-7 of exp).
func (a act) one(v float32) float32 {
	switch a.kind {
	case "relu":
		return max(v, 0)
	case "relu6":
		return min(max(v, 0), 6)
	case "sigmoid":
		return sigmoid(v)
	case "hswish":
		return (a.mul * v) * min(max(v+a.add, 0), 6)
	}
	return v
}

// biasActGo sets dst[r*C+j] = a(src[r*C+j] + bias[j]) for the columns
// j >= j0 of every row (bias nil: nothing added).
func biasActGo(dst, src, bias []float32, C, j0 int, a act) {
	for r := 0; r+C <= len(dst); r += C {
		d, s := dst[r+j0:r+C], src[r+j0:r+C]
		if bias == nil {
			for j, v := range s {
				d[j] = a.one(v)
			}
			continue
		}
		b := bias[j0:C]
		for j, v := range s {
			d[j] = a.one(v + b[j])
		}
	}
}

// scaleColsGo sets dst[r*C+j] = src[r*C+j] * y[j] for the columns j >= j0
// of every row.
func scaleColsGo(dst, src, y []float32, C, j0 int) {
	yy := y[j0:C]
	for r := 0; r+C <= len(dst); r += C {
		d, s := dst[r+j0:r+C], src[r+j0:r+C]
		for j, v := range s {
			d[j] = v * yy[j]
		}
	}
}

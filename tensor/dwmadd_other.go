//go:build !amd64 || purego

package tensor

// hasMaddFMA is false: the depthwise convolution's multiply-adds run in Go.
const hasMaddFMA = false

func dwMadd1(dst, a, b []float32) { dwMadd1Go(dst, a, b) }

func dwMadd4(dst, a0, b0, a1, b1, a2, b2, a3, b3 []float32) {
	dwMadd4Go(dst, a0, b0, a1, b1, a2, b2, a3, b3)
}

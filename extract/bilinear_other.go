//go:build !amd64 || purego

package extract

const hasAVX2 = false

func bilinearAVX2(acc, p00, p01, p10, p11 *float32, w *[4]float32, n int) {
	panic("extract: no vector kernel")
}

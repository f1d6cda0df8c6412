//go:build !amd64 || purego

package colsum

const useAVX2 = false

func addAVX2(acc *float64, x *float32, rows, n, stride int) {
	panic("colsum: no vector kernel")
}

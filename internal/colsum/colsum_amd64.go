//go:build !purego

package colsum

import "golang.org/x/sys/cpu"

var useAVX2 = cpu.X86.HasAVX2

// addAVX2 adds to acc[j], for j < n (a multiple of 4), the values
// x[r*stride+j] of rows r < rows, in row order, converted to float64.
//
//go:noescape
func addAVX2(acc *float64, x *float32, rows, n, stride int)

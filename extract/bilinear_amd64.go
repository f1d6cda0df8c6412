//go:build !purego

package extract

import "golang.org/x/sys/cpu"

var hasAVX2 = cpu.X86.HasAVX2

// bilinearAVX2 sets acc[c] += w[0]*p00[c] + w[1]*p01[c] + w[2]*p10[c] +
// w[3]*p11[c] for c < n (a multiple of 8), each product and sum rounded
// in that order, as the loop of bilinearAdd does.
//
//go:noescape
func bilinearAVX2(acc, p00, p01, p10, p11 *float32, w *[4]float32, n int)

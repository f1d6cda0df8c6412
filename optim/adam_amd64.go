//go:build !purego

package optim

import "golang.org/x/sys/cpu"

var hasAVX2 = cpu.X86.HasAVX2

// adamConsts are the per-call constants of adamAVX2, in its order.
type adamConsts struct {
	scale, beta1, beta2, omb1, omb2, eps, stepSize, bc2Sqrt, l2OrDecay float32
}

//go:noescape
func adamAVX2(p, grad, m, v *float32, n int, c *adamConsts, mode int, zero bool)

// adamKernel is adamKernelGo, 8 elements at a time with AVX2 where the CPU
// has it (the same operations in the same order: the same bits).
func adamKernel(p, grad, m, v []float32, u *update, beta1, beta2, omb1, omb2, eps float32, zero bool, scale float32) {
	n := len(p)
	grad, m, v = grad[:n], m[:n], v[:n]
	n8 := 0
	if hasAVX2 {
		n8 = n &^ 7
	}
	if n8 > 0 {
		c := adamConsts{scale: scale, beta1: beta1, beta2: beta2, omb1: omb1, omb2: omb2, eps: eps, stepSize: u.stepSize, bc2Sqrt: u.bc2Sqrt}
		mode := 0
		switch {
		case u.decoupled:
			mode, c.l2OrDecay = 2, u.decayMul
		case u.l2 != 0:
			mode, c.l2OrDecay = 1, u.l2
		}
		adamAVX2(&p[0], &grad[0], &m[0], &v[0], n8, &c, mode, zero)
	}
	if n8 < n {
		adamKernelGo(p[n8:], grad[n8:], m[n8:], v[n8:], u, beta1, beta2, omb1, omb2, eps, zero, scale)
	}
}

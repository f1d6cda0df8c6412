//go:build !amd64 || purego

package optim

// adamKernel is adamKernelGo on CPUs without the vector kernel.
func adamKernel(p, grad, m, v []float32, u *update, beta1, beta2, omb1, omb2, eps float32, zero bool, scale float32) {
	adamKernelGo(p, grad, m, v, u, beta1, beta2, omb1, omb2, eps, zero, scale)
}

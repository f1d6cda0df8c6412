//go:build !linux

package gemm

// threadCPU is unavailable on this platform.
func threadCPU() float64 { return 0 }

// threadCPUAvailable reports whether threadCPU works here.
func threadCPUAvailable() bool { return false }

//go:build !amd64 || purego

package index

// hasDotsAsm and hasFMAAsm are false: no assembly kernels for this
// architecture.
var (
	hasDotsAsm = false
	hasFMAAsm  = false
)

// FloatKernel names the kernel that scores float32 vectors on this
// machine: here always "go", the portable loops.
func FloatKernel() string { return "go" }

// dots12f adds to out[g*ostride+r*rstride+w] the dot products of rows
// and the queries of ng groups (see dots12fGroupsGo).
func dots12f(v []float32, nv, stride int, q []float32, ng, gstride, dlen int, out []float32, ostride, rstride int) {
	dots12fGroupsGo(v, nv, stride, q, ng, gstride, dlen, out, ostride, rstride)
}

// int8Kernels holds only the portable loops: no assembly kernels for this
// architecture.
var int8Kernels = []*int8Kernel{goInt8}

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

// dots12 adds to out[r*12+w] the integer dot products of rows and queries
// (see dots12Go).
func dots12(v []int8, nv, stride int, q []int16, dlen int, out []int32) {
	dots12Go(v, nv, stride, q, dlen, out)
}

//go:build !amd64 || purego

package index

// hasDotsAsm is false: no assembly kernel for this architecture.
var hasDotsAsm = false

// dots12 computes out[r*12+w] for the nv vectors of v (see dots12Go).
func dots12(v []int8, nv int, q []int16, d int, out []int32) { dots12Go(v, nv, q, d, out) }

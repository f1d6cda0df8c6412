//go:build !amd64 || purego

package index

// hasDotsAsm and hasFMAAsm are false: no assembly kernels for this
// architecture.
var (
	hasDotsAsm = false
	hasFMAAsm  = false
)

// dots12f computes out[r*12+w] for the nv float32 vectors of v (see
// dots12fGo).
func dots12f(v []float32, nv int, q []float32, d int, out []float32) { dots12fGo(v, nv, q, d, out) }

// dots12 computes out[r*12+w] for the nv vectors of v (see dots12Go).
func dots12(v []int8, nv int, q []int16, d int, out []int32) { dots12Go(v, nv, q, d, out) }

// Package half converts IEEE 754 half-precision (binary16) values to
// float32, for the readers of external formats that store them (npy,
// PyTorch checkpoints, TF.js weights).
package half

import "math"

// ToFloat32 converts the half-precision value with bits h exactly:
// subnormals, signed zeros, infinities and NaNs (their payload kept)
// included.
func ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch exp {
	case 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case 0: // zero or subnormal: mant * 2^-24, exact in float32
		v := float32(mant) / (1 << 24)
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

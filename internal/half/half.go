// Package half converts IEEE 754 half-precision (binary16) values to
// float32 and back, for the formats that store them (npy, safetensors,
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

// FromFloat32 returns the IEEE half-precision value nearest to f, as its
// bits: rounded to nearest, ties to even; values beyond the largest finite
// half (65504) that round away from it become ±Inf; subnormal halves are
// rounded as any other; the sign of zero is kept; a NaN stays a NaN (a
// quiet one, with the top of its payload).
func FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff { // Inf or NaN
		if mant == 0 {
			return sign | 0x7c00
		}
		return sign | 0x7c00 | 0x200 | uint16(mant>>13)
	}
	e := exp - 127 + 15 // the half's biased exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// A subnormal half (or zero): the value is m * 2^-24 with m =
		// (1.mant) * 2^(exp-127+24) = (mant | 1<<23) >> (14 - e).
		s := uint(14 - e)
		if s > 24 { // below half the smallest subnormal, float32 subnormals included
			return sign
		}
		m := mant | 1<<23
		q := m >> s
		rem, halfway := m&(1<<s-1), uint32(1)<<(s-1)
		if rem > halfway || rem == halfway && q&1 == 1 {
			q++ // may carry into the smallest normal, 0x0400: right
		}
		return sign | uint16(q)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // may carry into the exponent, up to 0x7c00 (Inf): right
	}
	return sign | uint16(h)
}

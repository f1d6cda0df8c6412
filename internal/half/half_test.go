package half

import (
	"math"
	"sort"
	"testing"
)

// TestToFloat32 checks a few values by hand, then every one of the 65,536
// bit patterns against binary16's definition computed in float64.
func TestToFloat32(t *testing.T) {
	cases := []struct {
		h    uint16
		want float32
	}{
		{0x0000, 0}, {0x3c00, 1}, {0xc000, -2}, {0x3555, 0.33325195}, {0x7bff, 65504},
		{0x0001, 5.9604645e-08}, {0x8001, -5.9604645e-08}, {0x03ff, float32(math.Ldexp(1023, -24))},
		{0x0400, float32(math.Ldexp(1, -14))}, {0x7c00, float32(math.Inf(1))}, {0xfc00, float32(math.Inf(-1))},
	}
	for _, c := range cases {
		if got := ToFloat32(c.h); got != c.want {
			t.Errorf("ToFloat32(%#04x) = %v, want %v", c.h, got, c.want)
		}
	}
	if got := ToFloat32(0x8000); got != 0 || !math.Signbit(float64(got)) {
		t.Errorf("ToFloat32(0x8000) = %v, want -0", got)
	}
	for i := range 1 << 16 {
		h := uint16(i)
		exp, mant := int(h>>10)&0x1f, float64(h&0x3ff)
		var want float64
		switch {
		case exp == 0x1f && mant == 0:
			want = math.Inf(1)
		case exp == 0x1f:
			want = math.NaN()
		case exp == 0:
			want = math.Ldexp(mant, -24)
		default:
			want = math.Ldexp(1+mant/1024, exp-15)
		}
		if h>>15 != 0 {
			want = -want
		}
		got := ToFloat32(h)
		if math.IsNaN(want) {
			if !math.IsNaN(float64(got)) || math.Float32bits(got)&0x7fffff != uint32(h&0x3ff)<<13 {
				t.Fatalf("ToFloat32(%#04x) = %v (bits %#x), want a NaN with its payload", h, got, math.Float32bits(got))
			}
			continue
		}
		if float64(got) != want || math.Signbit(float64(got)) != (h>>15 != 0) {
			t.Fatalf("ToFloat32(%#04x) = %v, want %v", h, got, want)
		}
	}
}

// refFloat16 is the half-precision value nearest to f by its definition,
// found among every finite half (ties to the even bit pattern, beyond the
// range to Inf as IEEE rounds: at or past 65520, halfway to 2^16); f is
// not a NaN.
func refFloat16(f float32) uint16 {
	var sign uint16
	if math.Signbit(float64(f)) {
		sign = 0x8000
	}
	a := math.Abs(float64(f))
	// The positive finite halves 0x0000..0x7bff increase with their bits.
	lo := sort.Search(0x7c00, func(i int) bool { return float64(ToFloat32(uint16(i))) >= a })
	if lo == 0x7c00 {
		if a >= 65520 {
			return sign | 0x7c00
		}
		return sign | 0x7bff
	}
	if lo == 0 || float64(ToFloat32(uint16(lo))) == a {
		return sign | uint16(lo)
	}
	below, above := float64(ToFloat32(uint16(lo-1))), float64(ToFloat32(uint16(lo)))
	switch {
	case a-below < above-a:
		return sign | uint16(lo-1)
	case a-below > above-a:
		return sign | uint16(lo)
	case lo%2 == 0:
		return sign | uint16(lo)
	}
	return sign | uint16(lo-1)
}

func TestFromFloat32(t *testing.T) {
	tests := []struct {
		name string
		in   float32
		want uint16
	}{
		{"zero", 0, 0x0000},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000},
		{"one", 1, 0x3c00},
		{"minus two", -2, 0xc000},
		{"a third", 1.0 / 3, 0x3555},
		{"max finite", 65504, 0x7bff},
		{"below the overflow tie", 65519.996, 0x7bff},
		{"the overflow tie rounds to even: Inf", 65520, 0x7c00},
		{"overflow", 1e6, 0x7c00},
		{"negative overflow", -1e30, 0xfc00},
		{"Inf", float32(math.Inf(1)), 0x7c00},
		{"-Inf", float32(math.Inf(-1)), 0xfc00},
		{"tie between 1 and its successor: down to even", 1 + 1.0/2048, 0x3c00},
		{"tie between 0x3c01 and 0x3c02: up to even", 1 + 3.0/2048, 0x3c02},
		{"just above a tie", math.Nextafter32(1+1.0/2048, 2), 0x3c01},
		{"smallest normal", float32(math.Ldexp(1, -14)), 0x0400},
		{"largest subnormal", float32(math.Ldexp(1023, -24)), 0x03ff},
		{"rounds up into the normals", float32(math.Ldexp(1023.5, -24)), 0x0400},
		{"smallest subnormal", float32(math.Ldexp(1, -24)), 0x0001},
		{"negative smallest subnormal", -float32(math.Ldexp(1, -24)), 0x8001},
		{"half the smallest subnormal: a tie, to zero", float32(math.Ldexp(1, -25)), 0x0000},
		{"just above half the smallest subnormal", math.Nextafter32(float32(math.Ldexp(1, -25)), 1), 0x0001},
		{"1.5 subnormal units: a tie, to 2", float32(math.Ldexp(1.5, -24)), 0x0002},
		{"2.5 subnormal units: a tie, to 2", float32(math.Ldexp(2.5, -24)), 0x0002},
		{"far below the subnormals", 1e-20, 0x0000},
		{"negative, far below", -1e-20, 0x8000},
		{"a float32 subnormal", math.Float32frombits(1), 0x0000},
	}
	for _, tc := range tests {
		if got := FromFloat32(tc.in); got != tc.want {
			t.Errorf("%s: FromFloat32(%v) = %#04x, want %#04x", tc.name, tc.in, got, tc.want)
		}
		if got := refFloat16(tc.in); got != tc.want {
			t.Errorf("%s: the reference gives %#04x for %v, the table %#04x", tc.name, got, tc.in, tc.want)
		}
	}
	for _, nan := range []float32{float32(math.NaN()), math.Float32frombits(0x7f800001), math.Float32frombits(0xffc00000)} {
		h := FromFloat32(nan)
		if h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
			t.Errorf("FromFloat32(NaN %#x) = %#04x, not a NaN", math.Float32bits(nan), h)
		}
	}
}

// TestFromFloat32All: every half converts back to itself, and float32
// values spread over every exponent round as the definition says.
func TestFromFloat32All(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := ToFloat32(h)
		got := FromFloat32(f)
		if math.IsNaN(float64(f)) {
			if got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Fatalf("NaN %#04x became %#04x", h, got)
			}
			continue
		}
		if got != h {
			t.Fatalf("FromFloat32(%v) = %#04x, want %#04x, its bits", f, got, h)
		}
	}
	for b := uint64(0); b < 1<<32; b += 4093 {
		f := math.Float32frombits(uint32(b))
		if math.IsNaN(float64(f)) {
			continue
		}
		if got, want := FromFloat32(f), refFloat16(f); got != want {
			t.Fatalf("FromFloat32(%v, bits %#08x) = %#04x, want %#04x", f, b, got, want)
		}
	}
}

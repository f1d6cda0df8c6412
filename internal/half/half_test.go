package half

import (
	"math"
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

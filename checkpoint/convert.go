package checkpoint

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"unsafe"
)

// littleEndian reports whether float32 slices can be copied to and from the
// file's bytes as they are.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// bytesOf views a float32 slice as its bytes (native order).
func bytesOf(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

// writeF32 writes x as little-endian float32 values.
func writeF32(w io.Writer, x []float32) error {
	if littleEndian {
		_, err := w.Write(bytesOf(x))
		return err
	}
	buf := make([]byte, 0, 1<<16)
	for len(x) > 0 {
		n := min(len(x), cap(buf)/4)
		buf = buf[:0]
		for _, v := range x[:n] {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		x = x[n:]
	}
	return nil
}

// decode converts raw little-endian data of dtype into dst, which holds
// exactly the tensor's elements.
func decode(dst []float32, raw []byte, dtype string) error {
	switch dtype {
	case "F32":
		if littleEndian {
			copy(bytesOf(dst), raw)
			return nil
		}
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case "F16":
		for i := range dst {
			dst[i] = F16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	case "BF16":
		for i := range dst {
			dst[i] = BF16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	case "F64":
		for i := range dst {
			dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:])))
		}
	default:
		return fmt.Errorf("dtype %s cannot be read as float32", dtype)
	}
	return nil
}

// F16ToF32 converts an IEEE 754 half-precision value, given by its bits, to
// float32 exactly (subnormals, infinities and NaNs included).
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch exp {
	case 0x1f: // infinity or NaN: keep the payload
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case 0: // zero or subnormal: mant * 2^-24, exact in float32
		f := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// BF16ToF32 converts a bfloat16 value, given by its bits, to float32: the
// bits are float32's upper half.
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

package checkpoint

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"unsafe"

	"github.com/xmr-project/xmr/internal/half"
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
			dst[i] = half.ToFloat32(binary.LittleEndian.Uint16(raw[2*i:]))
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

// BF16ToF32 converts a bfloat16 value, given by its bits, to float32: the
// bits are float32's upper half.
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

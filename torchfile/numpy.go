package torchfile

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/xmr-project/xmr/internal/half"
)

// npDType is a numpy.dtype of a plain number, as numpy pickles it to
// rebuild a numpy scalar (a numpy.float64 in a config, say).
type npDType struct {
	kind      byte // 'f', 'i', 'u', 'b'
	size      int
	bigEndian bool
}

// newNpDType reads numpy.dtype's first argument ("f8", "i4", "b1", ...).
func newNpDType(s string) (*npDType, error) {
	if len(s) != 2 || s[1] < '1' || s[1] > '8' {
		return nil, fmt.Errorf("numpy.dtype %q: only plain numbers (f2, f4, f8, i1..i8, u1..u8, b1) are read", s)
	}
	d := &npDType{kind: s[0], size: int(s[1] - '0')}
	ok := false
	switch d.kind {
	case 'f':
		ok = d.size == 2 || d.size == 4 || d.size == 8
	case 'i', 'u':
		ok = d.size == 1 || d.size == 2 || d.size == 4 || d.size == 8
	case 'b':
		ok = d.size == 1
	}
	if !ok {
		return nil, fmt.Errorf("numpy.dtype %q: only plain numbers (f2, f4, f8, i1..i8, u1..u8, b1) are read", s)
	}
	return d, nil
}

// setState takes the byte order from the dtype's pickled state (version,
// byteorder, ...).
func (d *npDType) setState(state Value) error {
	t, ok := state.(Tuple)
	if !ok || len(t) < 2 {
		return fmt.Errorf("numpy.dtype state is a %s, not a tuple", typeName(state))
	}
	order, ok := t[1].(string)
	if !ok {
		return fmt.Errorf("numpy.dtype byte order is a %s", typeName(t[1]))
	}
	switch order {
	case "<", "|", "=":
		d.bigEndian = false
	case ">":
		d.bigEndian = true
	default:
		return fmt.Errorf("numpy.dtype byte order %q", order)
	}
	return nil
}

// npScalar builds numpy.core.multiarray.scalar(dtype, bytes): the number
// the raw bytes hold.
func npScalar(args Tuple) (Value, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("numpy scalar with %d arguments, want 2", len(args))
	}
	d, ok := args[0].(*npDType)
	if !ok {
		return nil, fmt.Errorf("numpy scalar of a %s, not a dtype", typeName(args[0]))
	}
	var b []byte
	switch x := args[1].(type) {
	case []byte:
		b = x
	case string: // protocol 2 writes the bytes as latin-1 text through _codecs.encode; protocol 0 as a str
		for _, r := range x {
			if r > 0xff {
				return nil, fmt.Errorf("numpy scalar data is not bytes")
			}
			b = append(b, byte(r))
		}
	default:
		return nil, fmt.Errorf("numpy scalar data is a %s", typeName(args[1]))
	}
	if len(b) != d.size {
		return nil, fmt.Errorf("numpy scalar of %d bytes for a %d-byte dtype", len(b), d.size)
	}
	var order binary.ByteOrder = binary.LittleEndian
	if d.bigEndian {
		order = binary.BigEndian
	}
	var u uint64
	switch d.size {
	case 1:
		u = uint64(b[0])
	case 2:
		u = uint64(order.Uint16(b))
	case 4:
		u = uint64(order.Uint32(b))
	case 8:
		u = order.Uint64(b)
	}
	switch d.kind {
	case 'b':
		return u != 0, nil
	case 'u':
		if u > math.MaxInt64 {
			return nil, fmt.Errorf("numpy uint64 scalar %d is beyond int64", u)
		}
		return int64(u), nil
	case 'i':
		sh := 64 - 8*uint(d.size)
		return int64(u<<sh) >> sh, nil
	}
	switch d.size {
	case 2:
		return float64(half.ToFloat32(uint16(u))), nil
	case 4:
		return float64(math.Float32frombits(uint32(u))), nil
	}
	return math.Float64frombits(u), nil
}

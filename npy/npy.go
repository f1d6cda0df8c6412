// Package npy reads and writes NumPy .npy arrays: format versions 1.0, 2.0
// and 3.0, the simple numeric dtypes (float16/32/64, signed and unsigned
// integers, bool) in either byte order, C or Fortran order.
//
// Arrays are read as float32 (Read, File.ReadFloat32) or int
// (File.ReadInts), Fortran order reordered to C order; little-endian float32
// files in C order can be memory-mapped instead (Map). Streams, such as the
// entries of an .npz archive, are read through a Reader. Writers produce
// version 1.0, little-endian, C order, with the header padded so that the
// data starts at a multiple of 64 bytes, as numpy writes it; WriteFile
// writes atomically, and Header.Bytes serves writers that stream the data
// themselves.
//
// Input is checked before memory is allocated for it: the header length is
// bounded, the declared data must fit in 128 TiB, and a file must hold
// exactly the data its header declares. Bad input gives an error that says
// what is wrong (naming the file, for the functions that take a path), never
// a panic.
package npy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// magic starts every .npy file.
const magic = "\x93NUMPY"

// maxHeaderLen bounds the header length accepted from a version 2.0 or 3.0
// file (numpy itself refuses headers over 10000 bytes unless told
// otherwise).
const maxHeaderLen = 1 << 20

// maxDims is the most dimensions an array may have, NumPy's own limit.
const maxDims = 64

// maxDataBytes bounds the data size a header may declare (128 TiB), which
// keeps every size computation far from overflow.
const maxDataBytes = 1 << 47

// DType is the element type of an array, as an .npy header's descr gives it
// ('<f4', '>i8', '|b1', ...).
type DType struct {
	Kind      byte // 'f' float, 'i' signed integer, 'u' unsigned integer, 'b' bool
	Size      int  // bytes per element
	BigEndian bool // byte order of multi-byte elements
}

// The dtypes that the writers of this package produce.
var (
	Float32 = DType{Kind: 'f', Size: 4}
	Int32   = DType{Kind: 'i', Size: 4}
)

// ParseDType parses a descr naming one of the supported dtypes: float16,
// float32, float64, (u)int8..64 and bool. The byte order is '<' (little),
// '>' (big), '=' (this machine's) or '|' (not applicable).
func ParseDType(descr string) (DType, error) {
	var d DType
	t := descr
	if t != "" {
		switch t[0] {
		case '<', '|':
			t = t[1:]
		case '=':
			d.BigEndian = !hostLE
			t = t[1:]
		case '>':
			d.BigEndian = true
			t = t[1:]
		}
	}
	if len(t) == 2 {
		d.Kind = t[0]
		d.Size = int(t[1]) - '0'
	}
	if !d.valid() {
		return DType{}, fmt.Errorf("unsupported dtype %q (want a float, integer or bool type)", descr)
	}
	if d.Size == 1 {
		d.BigEndian = false
	}
	return d, nil
}

// valid reports whether d is one of the supported dtypes.
func (d DType) valid() bool {
	switch d.Kind {
	case 'f':
		return d.Size == 2 || d.Size == 4 || d.Size == 8
	case 'i', 'u':
		return d.Size == 1 || d.Size == 2 || d.Size == 4 || d.Size == 8
	case 'b':
		return d.Size == 1
	}
	return false
}

// Descr returns the dtype as a header writes it, e.g. "<f4" or "|b1".
func (d DType) Descr() string {
	order := byte('<')
	switch {
	case d.Size == 1:
		order = '|'
	case d.BigEndian:
		order = '>'
	}
	return string(order) + string(d.Kind) + strconv.Itoa(d.Size)
}

// String returns NumPy's name of the dtype, e.g. "float32".
func (d DType) String() string {
	switch d.Kind {
	case 'f':
		return "float" + strconv.Itoa(8*d.Size)
	case 'i':
		return "int" + strconv.Itoa(8*d.Size)
	case 'u':
		return "uint" + strconv.Itoa(8*d.Size)
	case 'b':
		return "bool"
	}
	return fmt.Sprintf("dtype(%q, %d)", d.Kind, d.Size)
}

// Header describes the array of an .npy file.
type Header struct {
	DType   DType
	Fortran bool  // data in column-major order
	Shape   []int // empty for a scalar

	dataOff int64 // bytes before the data, as read; 0 for a header not read
}

// Len returns the number of elements, the product of the shape.
func (h Header) Len() int64 {
	n := int64(1)
	for _, d := range h.Shape {
		n *= int64(d)
	}
	return n
}

// DataSize returns the size of the data section in bytes.
func (h Header) DataSize() int64 { return h.Len() * int64(h.DType.Size) }

// String describes the array, e.g. "(5000,36,2048) float32".
func (h Header) String() string { return FormatShape(h.Shape) + " " + h.DType.String() }

// Bytes returns the header as numpy writes it: format version 1.0 (2.0 if
// the dictionary outgrows 1.0's 16-bit length), the dictionary padded with
// spaces and ended by a newline so that the data starts at a multiple of 64
// bytes. Writers that stream an array write Bytes and then the Len elements
// of the data.
func (h Header) Bytes() []byte {
	order := "False"
	if h.Fortran {
		order = "True"
	}
	dict := "{'descr': '" + h.DType.Descr() + "', 'fortran_order': " + order + ", 'shape': " + pyTuple(h.Shape, ", ") + ", }"
	pre, major := 10, byte(1)
	if len(dict)+64 > math.MaxUint16 {
		pre, major = 12, 2
	}
	total := pre + len(dict) + 1
	pad := (64 - total%64) % 64
	hlen := len(dict) + pad + 1
	b := make([]byte, 0, total+pad)
	b = append(b, magic...)
	b = append(b, major, 0)
	if major == 1 {
		b = binary.LittleEndian.AppendUint16(b, uint16(hlen))
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(hlen))
	}
	b = append(b, dict...)
	b = append(b, bytes.Repeat([]byte{' '}, pad)...)
	return append(b, '\n')
}

// FormatShape formats a shape as the messages of this package do:
// "(5000,36,2048)", "(5,)", "()".
func FormatShape(shape []int) string { return pyTuple(shape, ",") }

// pyTuple formats a shape as a Python tuple with sep between the
// dimensions: "(5, 36)", "(5,)", "()".
func pyTuple[T int | int64](shape []T, sep string) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, d := range shape {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(strconv.FormatInt(int64(d), 10))
	}
	if len(shape) == 1 {
		b.WriteByte(',')
	}
	b.WriteByte(')')
	return b.String()
}

// checkShape checks that shape has no negative dimension and holds n
// elements.
func checkShape(shape []int, n int) error {
	p := 1
	for _, d := range shape {
		if d < 0 {
			return fmt.Errorf("negative dimension in shape %s", pyTuple(shape, ","))
		}
		p *= d
	}
	if p != n {
		return fmt.Errorf("shape %s needs %d elements, have %d", pyTuple(shape, ","), p, n)
	}
	return nil
}

// truncated returns the error for a data section of only have bytes.
func (h Header) truncated(have int64) error {
	return fmt.Errorf("truncated: header says %s = %d bytes of data, file has %d", h, h.DataSize(), have)
}

// readHeader reads the header at the start of r and leaves r at the data.
func readHeader(r io.Reader) (Header, error) {
	var h Header
	var pre [8]byte
	if n, err := io.ReadFull(r, pre[:]); err != nil {
		if n == 0 && err == io.EOF {
			return h, errors.New("not an .npy file: empty")
		}
		if err != io.ErrUnexpectedEOF {
			return h, err
		}
		return h, fmt.Errorf("not an .npy file: %d bytes, too short for a header", n)
	}
	if string(pre[:6]) != magic {
		return h, fmt.Errorf("not an .npy file: starts with %q, not %q", pre[:6], magic)
	}
	major, minor := pre[6], pre[7]
	var l [4]byte
	var hlen int
	switch major {
	case 1:
		if _, err := io.ReadFull(r, l[:2]); err != nil {
			return h, errors.New("truncated .npy header")
		}
		hlen = int(binary.LittleEndian.Uint16(l[:2]))
		h.dataOff = 10
	case 2, 3:
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return h, errors.New("truncated .npy header")
		}
		n := binary.LittleEndian.Uint32(l[:])
		if n > maxHeaderLen {
			return h, fmt.Errorf(".npy header length %d is over the %d-byte limit", n, maxHeaderLen)
		}
		hlen = int(n)
		h.dataOff = 12
	default:
		return h, fmt.Errorf("unsupported .npy format version %d.%d", major, minor)
	}
	raw := make([]byte, hlen)
	if n, err := io.ReadFull(r, raw); err != nil {
		return h, fmt.Errorf("truncated .npy header: %d of %d bytes", n, hlen)
	}
	h.dataOff += int64(hlen)
	descr, fortran, shape, err := parseDict(raw)
	if err != nil {
		return h, fmt.Errorf("bad .npy header %s: %w", quoteHeader(raw), err)
	}
	if h.DType, err = ParseDType(descr); err != nil {
		return h, err
	}
	h.Fortran = fortran
	h.Shape = make([]int, len(shape))
	count := int64(1)
	for i, d := range shape {
		if d < 0 {
			return h, fmt.Errorf("bad .npy header: negative dimension in shape %s", pyTuple(shape, ","))
		}
		if d > 0 && count > maxDataBytes/int64(h.DType.Size)/d {
			return h, fmt.Errorf("bad .npy header: shape %s is too large", pyTuple(shape, ","))
		}
		count *= d
		h.Shape[i] = int(d)
	}
	if count > math.MaxInt {
		return h, fmt.Errorf("bad .npy header: shape %s is too large for this machine", pyTuple(shape, ","))
	}
	return h, nil
}

// quoteHeader quotes a header for an error message, shortened if long.
func quoteHeader(b []byte) string {
	b = bytes.TrimRight(b, " \n")
	if len(b) > 200 {
		return strconv.Quote(string(b[:200])) + "..."
	}
	return strconv.Quote(string(b))
}

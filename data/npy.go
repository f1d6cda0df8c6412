package data

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/sbinet/npyio/npy"
)

// This file reads and writes NumPy .npy arrays. Headers are parsed by
// github.com/sbinet/npyio after a bounds check of our own (npyio trusts its
// input); the data section is memory-mapped when it is little-endian float32
// in C order, and otherwise read in chunks and converted to float32.

// errNoMmap says that a file cannot be memory-mapped here.
var errNoMmap = errors.New("memory mapping not available")

// maxHeaderLen bounds the .npy header length accepted (numpy itself refuses
// headers over 10000 bytes unless told otherwise).
const maxHeaderLen = 1 << 20

// maxDataBytes bounds the data size a header may declare (128 TiB), which
// keeps every size computation far from overflow.
const maxDataBytes = 1 << 47

// chunkBytes is the size of the chunks in which data sections are read.
const chunkBytes = 4 << 20

// hostLE reports whether this machine is little-endian, so that float32
// data can be used in place.
var hostLE = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// dtype is an array element type from an .npy header.
type dtype struct {
	str  string // as written in the header, e.g. "<f4"
	kind byte   // 'f' float, 'i' signed, 'u' unsigned integer, 'b' bool
	size int    // bytes per element
	big  bool   // big-endian
}

// parseDtype parses the simple numeric dtypes: float16/32/64, (u)int8..64
// and bool, in either byte order.
func parseDtype(s string) (dtype, error) {
	d := dtype{str: s}
	t := s
	if t != "" {
		switch t[0] {
		case '<', '|', '=':
			t = t[1:]
		case '>':
			d.big = true
			t = t[1:]
		}
	}
	if len(t) == 2 {
		d.kind = t[0]
		d.size = int(t[1] - '0')
	}
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
		return dtype{}, fmt.Errorf("unsupported dtype %q (want a float, integer or bool type)", s)
	}
	if d.size == 1 {
		d.big = false
	}
	return d, nil
}

// name returns the NumPy name of the type, e.g. "float32".
func (d dtype) name() string {
	switch d.kind {
	case 'f':
		return "float" + strconv.Itoa(8*d.size)
	case 'i':
		return "int" + strconv.Itoa(8*d.size)
	case 'u':
		return "uint" + strconv.Itoa(8*d.size)
	}
	return "bool"
}

// isFloat32LE reports whether the data can be used as []float32 in place.
func (d dtype) isFloat32LE() bool { return d.kind == 'f' && d.size == 4 && !d.big && hostLE }

// order returns the byte order of multi-byte elements.
func (d dtype) order() binary.ByteOrder {
	if d.big {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// at decodes the element at the start of b.
func (d dtype) at(b []byte) float64 {
	o := d.order()
	switch d.kind {
	case 'f':
		switch d.size {
		case 2:
			return float64(halfToFloat32(o.Uint16(b)))
		case 4:
			return float64(math.Float32frombits(o.Uint32(b)))
		default:
			return math.Float64frombits(o.Uint64(b))
		}
	case 'i':
		switch d.size {
		case 1:
			return float64(int8(b[0]))
		case 2:
			return float64(int16(o.Uint16(b)))
		case 4:
			return float64(int32(o.Uint32(b)))
		default:
			return float64(int64(o.Uint64(b)))
		}
	case 'u':
		switch d.size {
		case 1:
			return float64(b[0])
		case 2:
			return float64(o.Uint16(b))
		case 4:
			return float64(o.Uint32(b))
		default:
			return float64(o.Uint64(b))
		}
	}
	if b[0] != 0 {
		return 1
	}
	return 0
}

// toFloat32 converts len(dst) elements from src into dst.
func (d dtype) toFloat32(dst []float32, src []byte) {
	switch {
	case d.isFloat32LE():
		copy(bytesOf(dst), src)
	case d.kind == 'f' && d.size == 4:
		o := d.order()
		for i := range dst {
			dst[i] = math.Float32frombits(o.Uint32(src[4*i:]))
		}
	case d.kind == 'f' && d.size == 8 && !d.big:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:])))
		}
	default:
		for i := range dst {
			dst[i] = float32(d.at(src[i*d.size:]))
		}
	}
}

// halfToFloat32 converts an IEEE 754 half-precision value.
func halfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0: // zero or subnormal
		v := float32(mant) / (1 << 24)
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// bytesOf returns the memory of f as bytes.
func bytesOf(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

// npyHeader is the parsed header of an .npy stream.
type npyHeader struct {
	dtype   dtype
	fortran bool
	shape   []int
	offset  int64 // bytes before the data section
	count   int64 // number of elements
}

// nbytes returns the size of the data section.
func (h *npyHeader) nbytes() int64 { return h.count * int64(h.dtype.size) }

// describe returns e.g. "(5000,36,2048) float32".
func (h *npyHeader) describe() string { return shapeString(h.shape) + " " + h.dtype.name() }

// truncated returns the error for a data section of only have bytes.
func (h *npyHeader) truncated(have int64) error {
	return fmt.Errorf("truncated: header says %s = %d bytes of data, file has %d", h.describe(), h.nbytes(), have)
}

// shapeString formats a shape compactly: "(5000,36,2048)", "(5,)", "()".
func shapeString(shape []int) string { return pyTuple(shape, ",") }

// pyTuple formats a shape as a Python tuple with sep between the
// dimensions: "(5, 36)", "(5,)", "()".
func pyTuple(shape []int, sep string) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, d := range shape {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(strconv.Itoa(d))
	}
	if len(shape) == 1 {
		b.WriteByte(',')
	}
	b.WriteByte(')')
	return b.String()
}

// readNPYHeader reads the header at the start of r and leaves r at the data.
func readNPYHeader(r io.Reader) (npyHeader, error) {
	var h npyHeader
	var pre [10]byte
	if n, err := io.ReadFull(r, pre[:8]); err != nil {
		if n == 0 && err == io.EOF {
			return h, errors.New("not an .npy file: empty")
		}
		return h, fmt.Errorf("not an .npy file: %d bytes, too short for a header", n)
	}
	if !bytes.Equal(pre[:6], npy.Magic[:]) {
		return h, fmt.Errorf("not an .npy file: starts with %q, not \"\\x93NUMPY\"", pre[:6])
	}
	major, minor := pre[6], pre[7]
	var hlen int
	switch major {
	case 1:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return h, errors.New("truncated .npy header")
		}
		hlen = int(binary.LittleEndian.Uint16(pre[8:10]))
		h.offset = 10
	case 2, 3:
		var l [4]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return h, errors.New("truncated .npy header")
		}
		n := binary.LittleEndian.Uint32(l[:])
		if n > maxHeaderLen {
			return h, fmt.Errorf(".npy header length %d is over the %d-byte limit", n, maxHeaderLen)
		}
		hlen = int(n)
		h.offset = 12
	default:
		return h, fmt.Errorf("unsupported .npy format version %d.%d", major, minor)
	}
	raw := make([]byte, hlen)
	if n, err := io.ReadFull(r, raw); err != nil {
		return h, fmt.Errorf("truncated .npy header: %d of %d bytes", n, hlen)
	}
	h.offset += int64(hlen)
	dict, err := canonicalDict(raw)
	if err != nil {
		return h, err
	}
	descr, fortran, shape, err := parseDict(dict)
	if err != nil {
		return h, fmt.Errorf("bad .npy header %s: %w", quoteHeader(raw), err)
	}
	if h.dtype, err = parseDtype(descr); err != nil {
		return h, err
	}
	h.fortran = fortran
	h.shape = shape
	h.count = 1
	for _, d := range shape {
		if d < 0 {
			return h, fmt.Errorf("bad .npy header: negative dimension in shape %s", shapeString(shape))
		}
		if d > 0 && h.count > maxDataBytes/int64(h.dtype.size)/int64(d) {
			return h, fmt.Errorf("bad .npy header: shape %s is too large", shapeString(shape))
		}
		h.count *= int64(d)
	}
	return h, nil
}

// quoteHeader quotes a header for an error message, shortened if long.
func quoteHeader(b []byte) string {
	if len(b) > 200 {
		return strconv.Quote(string(b[:200])) + "..."
	}
	return strconv.Quote(string(b))
}

// canonicalDict checks that raw is a header dict in the layout numpy writes,
// {'descr': ..., 'fortran_order': ..., 'shape': (...), }, which is the
// layout npyio parses, and returns it with the trailing ", }" that some
// writers omit.
func canonicalDict(raw []byte) (string, error) {
	s := strings.TrimRight(string(raw), " \t\r\n\x00")
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("bad .npy header %s: %s", quoteHeader(raw), why)
	}
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return bad("not a Python dict")
	}
	if strings.Count(s, "{") != 1 || strings.Count(s, "}") != 1 || strings.ContainsAny(s, "\n[]") {
		return bad("nested or structured values are not supported")
	}
	body := strings.TrimRight(s[:len(s)-1], " ")
	body = strings.TrimSuffix(body, ",")
	s = body + ", }"
	const dk, ok, sk = "'descr': ", "'fortran_order': ", "'shape': "
	a, b, c := strings.Index(s, dk), strings.Index(s, ok), strings.Index(s, sk)
	e := len(s) - 1
	switch {
	case a < 0 || b < 0 || c < 0:
		return bad("want keys 'descr', 'fortran_order' and 'shape'")
	case !(a < b && b < c):
		return bad("keys not in numpy's order 'descr', 'fortran_order', 'shape'")
	case a+len(dk)+2 > b-2, b+len(ok) > c-2, c+len(sk)+2 > e-2:
		return bad("not in numpy's layout")
	case s[a+len(dk)] != '\'' || s[b-3] != '\'':
		return bad("descr is not a quoted string")
	case s[c+len(sk)] != '(' || s[e-3] != ')':
		return bad("shape is not a tuple")
	}
	return s, nil
}

// parseDict parses a canonical header dict with npyio. npyio may panic on
// input that canonicalDict lets through; that becomes an error here.
func parseDict(dict string) (descr string, fortran bool, shape []int, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("unparsable header (%v)", p)
		}
	}()
	var b bytes.Buffer
	b.Write(npy.Magic[:])
	b.Write([]byte{2, 0})
	var l [4]byte
	binary.LittleEndian.PutUint32(l[:], uint32(len(dict)+1))
	b.Write(l[:])
	b.WriteString(dict)
	b.WriteByte('\n')
	r, err := npy.NewReader(&b)
	if err != nil {
		return "", false, nil, err
	}
	return r.Header.Descr.Type, r.Header.Descr.Fortran, r.Header.Descr.Shape, nil
}

// streamData reads the h.count elements of the data section from r in
// chunks, calling fn with the raw bytes of each chunk and the index of its
// first element. A short section gives h.truncated.
func streamData(r io.Reader, h *npyHeader, fn func(raw []byte, first int64)) error {
	esz := int64(h.dtype.size)
	per := int64(chunkBytes) / esz
	buf := make([]byte, min(per, h.count)*esz)
	for done := int64(0); done < h.count; {
		k := min(per, h.count-done)
		n, err := io.ReadFull(r, buf[:k*esz])
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return h.truncated(done*esz + int64(n))
		}
		if err != nil {
			return err
		}
		fn(buf[:k*esz], done)
		done += k
	}
	return nil
}

// readFloat32 reads the data section from r as float32 in C order. When
// sized is false the section's length is unknown, and memory grows with
// the data actually read rather than trusting the header.
func readFloat32(r io.Reader, h *npyHeader, sized bool) ([]float32, error) {
	var out []float32
	if sized && h.dtype.isFloat32LE() {
		// Read straight into place.
		out = make([]float32, h.count)
		if n, err := io.ReadFull(r, bytesOf(out)); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil, h.truncated(int64(n))
			}
			return nil, err
		}
		if h.fortran {
			out = fortranToC(out, h.shape)
		}
		return out, nil
	}
	if sized || h.count <= 1<<20 {
		out = make([]float32, 0, h.count)
	}
	err := streamData(r, h, func(raw []byte, first int64) {
		k := len(raw) / h.dtype.size
		out = slices.Grow(out, k)[:int(first)+k]
		h.dtype.toFloat32(out[first:], raw)
	})
	if err != nil {
		return nil, err
	}
	if h.fortran {
		out = fortranToC(out, h.shape)
	}
	return out, nil
}

// readInts reads an integer or bool data section from r as ints.
func readInts(r io.Reader, h *npyHeader) ([]int, error) {
	if h.dtype.kind == 'f' {
		return nil, fmt.Errorf("dtype %s (%s): want an integer type", h.dtype.str, h.dtype.name())
	}
	var out []int
	if h.count <= 1<<20 {
		out = make([]int, 0, h.count)
	}
	err := streamData(r, h, func(raw []byte, first int64) {
		for i := 0; i < len(raw); i += h.dtype.size {
			out = append(out, int(h.dtype.at(raw[i:])))
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// fortranToC reorders column-major data of the given shape to row-major.
func fortranToC(src []float32, shape []int) []float32 {
	if len(shape) <= 1 || len(src) == 0 {
		return src
	}
	nd := len(shape)
	stride := make([]int, nd) // C-order strides
	s := 1
	for k := nd - 1; k >= 0; k-- {
		stride[k] = s
		s *= shape[k]
	}
	dst := make([]float32, len(src))
	idx := make([]int, nd)
	off := 0
	for _, v := range src { // src walks dimension 0 fastest
		dst[off] = v
		for k := 0; k < nd; k++ {
			idx[k]++
			off += stride[k]
			if idx[k] < shape[k] {
				break
			}
			off -= stride[k] * shape[k]
			idx[k] = 0
		}
	}
	return dst
}

// npyFile is an .npy file opened and its header read; f is positioned at
// the start of the data.
type npyFile struct {
	path string
	f    *os.File
	size int64
	h    npyHeader
}

// openNPY opens path and reads its header. It checks that the file holds
// exactly the data the header describes.
func openNPY(path string) (*npyFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, unwrapPathErr(err))
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	h, err := readNPYHeader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	have := st.Size() - h.offset
	if have < h.nbytes() {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", path, h.truncated(have))
	}
	if have > h.nbytes() {
		f.Close()
		return nil, fmt.Errorf("read %s: header says %s = %d bytes of data, file has %d: wrong shape or trailing garbage", path, h.describe(), h.nbytes(), have)
	}
	return &npyFile{path: path, f: f, size: st.Size(), h: h}, nil
}

// float32s returns the data as float32 in C order, mapping the file when
// allowed and possible (little-endian float32 in C order at a 4-byte
// aligned offset), and reading it otherwise. m is nil when not mapped.
func (nf *npyFile) float32s(allowMmap bool) (data []float32, m *mapping, err error) {
	h := &nf.h
	cOrder := !h.fortran || len(h.shape) <= 1
	if allowMmap && h.dtype.isFloat32LE() && cOrder && h.offset%4 == 0 && h.count > 0 {
		if m, err := mapFile(nf.f, nf.size); err == nil {
			p := unsafe.Pointer(&m.data[h.offset])
			return unsafe.Slice((*float32)(p), int(h.count)), m, nil
		}
	}
	if h.dtype.kind != 'f' {
		return nil, nil, fmt.Errorf("read %s: dtype %s (%s): want float16, float32 or float64", nf.path, h.dtype.str, h.dtype.name())
	}
	data, err = readFloat32(nf.f, h, true)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", nf.path, err)
	}
	return data, nil, nil
}

func (nf *npyFile) close() { nf.f.Close() }

// readNPYFloat32 reads a whole (small) float array from path into memory;
// float16 and float64 are converted, integers refused.
func readNPYFloat32(path string) ([]float32, []int, error) {
	nf, err := openNPY(path)
	if err != nil {
		return nil, nil, err
	}
	defer nf.close()
	data, _, err := nf.float32s(false)
	if err != nil {
		return nil, nil, err
	}
	return data, nf.h.shape, nil
}

// readNPYInts reads a whole integer array from path.
func readNPYInts(path string) ([]int, []int, error) {
	nf, err := openNPY(path)
	if err != nil {
		return nil, nil, err
	}
	defer nf.close()
	v, err := readInts(nf.f, &nf.h)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	return v, nf.h.shape, nil
}

// Array is an n-dimensional float32 array read from an .npy file, in C
// (row-major) order. Data may point into a memory-mapped file; see Close.
type Array struct {
	Shape []int
	Data  []float32

	m *mapping
}

// ReadNPY reads the .npy file at path as float32. Little-endian float32
// data in C order is memory-mapped (private copy-on-write); float16 and
// float64 data is converted and Fortran-order data reordered in memory.
// Integer arrays are refused.
func ReadNPY(path string) (*Array, error) {
	nf, err := openNPY(path)
	if err != nil {
		return nil, err
	}
	defer nf.close()
	data, m, err := nf.float32s(true)
	if err != nil {
		return nil, err
	}
	return &Array{Shape: nf.h.shape, Data: data, m: m}, nil
}

// Close releases the memory mapping behind Data, if any, and clears Data.
func (a *Array) Close() error {
	if a.m == nil {
		return nil
	}
	err := a.m.close()
	a.m, a.Data = nil, nil
	return err
}

// npyHeaderBytes returns a version 1.0 .npy header for the given dtype and
// shape, padded with spaces so the data starts at a multiple of 64 bytes.
func npyHeaderBytes(descr string, shape []int) []byte {
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, pyTuple(shape, ", "))
	total := 10 + len(dict) + 1
	pad := (64 - total%64) % 64
	b := make([]byte, 0, total+pad)
	b = append(b, npy.Magic[:]...)
	b = append(b, 1, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(dict)+pad+1))
	b = append(b, dict...)
	b = append(b, bytes.Repeat([]byte{' '}, pad)...)
	return append(b, '\n')
}

// checkShape checks that shape holds n elements.
func checkShape(shape []int, n int) error {
	p := 1
	for _, d := range shape {
		if d < 0 {
			return fmt.Errorf("negative dimension in shape %s", shapeString(shape))
		}
		p *= d
	}
	if p != n {
		return fmt.Errorf("shape %s needs %d elements, have %d", shapeString(shape), p, n)
	}
	return nil
}

// encodeNPYFloat32 writes a little-endian float32 .npy array to w.
func encodeNPYFloat32(w io.Writer, shape []int, data []float32) error {
	if _, err := w.Write(npyHeaderBytes("<f4", shape)); err != nil {
		return err
	}
	const per = chunkBytes / 4
	var tmp []byte
	for lo := 0; lo < len(data); lo += per {
		c := data[lo:min(lo+per, len(data))]
		b := bytesOf(c)
		if !hostLE {
			tmp = tmp[:0]
			for _, v := range c {
				tmp = binary.LittleEndian.AppendUint32(tmp, math.Float32bits(v))
			}
			b = tmp
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// WriteNPY writes data, of the given shape in C order, to path as a
// little-endian float32 .npy file (format version 1.0, data aligned to 64
// bytes), atomically.
func WriteNPY(path string, shape []int, data []float32) error {
	if err := checkShape(shape, len(data)); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return writeAtomic(path, func(w io.Writer) error { return encodeNPYFloat32(w, shape, data) })
}

// WriteNPYInt32 writes data, of the given shape in C order, to path as a
// little-endian int32 .npy file, atomically.
func WriteNPYInt32(path string, shape []int, data []int32) error {
	if err := checkShape(shape, len(data)); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return writeAtomic(path, func(w io.Writer) error {
		b := npyHeaderBytes("<i4", shape)
		for _, v := range data {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
		_, err := w.Write(b)
		return err
	})
}

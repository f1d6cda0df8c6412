package npy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
	"unsafe"

	"github.com/xmr-project/xmr/internal/half"
	"github.com/xmr-project/xmr/internal/infile"
	"github.com/xmr-project/xmr/mmap"
)

// chunkBytes is the size of the chunks in which data is read and converted.
const chunkBytes = 4 << 20

// growLimit is the most elements allocated up front for a stream whose
// length is not known; beyond it memory grows with the data actually read,
// so that a short stream with a huge header fails before allocating much.
const growLimit = 1 << 20

// hostLE reports whether this machine is little-endian, so that
// little-endian data can be used in place.
var hostLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// Reader reads one array from a stream, such as an entry of an .npz
// archive: NewReader reads the header, and one of the Read methods the data.
type Reader struct {
	Header Header
	r      io.Reader
}

// NewReader reads and checks the header at the start of r.
func NewReader(r io.Reader) (*Reader, error) {
	h, err := readHeader(r)
	if err != nil {
		return nil, err
	}
	return &Reader{Header: h, r: r}, nil
}

// ReadFloat32 reads the data of a float16, float32 or float64 array as
// float32 in C order; integer and bool arrays are refused. Memory grows
// with the data actually read, so a stream shorter than its header says
// fails without allocating the whole array.
func (r *Reader) ReadFloat32() ([]float32, error) {
	return r.Header.readFloat32(r.r, false)
}

// ReadInts reads the data of an integer or bool array as ints in C order;
// float arrays are refused.
func (r *Reader) ReadInts() ([]int, error) { return r.Header.readInts(r.r) }

// wantFloat refuses integer and bool arrays where floats are read.
func (h *Header) wantFloat() error {
	if h.DType.Kind != 'f' {
		return fmt.Errorf("dtype %s (%s): want float16, float32 or float64", h.DType.Descr(), h.DType)
	}
	return nil
}

// readFloat32 reads the data section from r as float32 in C order. sized
// says that r is known to hold the whole section, which is then allocated
// at once.
func (h *Header) readFloat32(r io.Reader, sized bool) ([]float32, error) {
	if err := h.wantFloat(); err != nil {
		return nil, err
	}
	n := h.Len()
	var out []float32
	if sized && h.DType == nativeFloat32() {
		// Read straight into place.
		out = make([]float32, n)
		if k, err := io.ReadFull(r, bytesOf(out)); err != nil {
			return nil, h.readErr(err, int64(k))
		}
	} else {
		if sized || n <= growLimit {
			out = make([]float32, 0, n)
		}
		err := h.stream(r, func(raw []byte, first int64) {
			k := len(raw) / h.DType.Size
			out = slices.Grow(out, k)[:int(first)+k]
			h.DType.ToFloat32(out[first:], raw)
		})
		if err != nil {
			return nil, err
		}
	}
	if h.Fortran {
		out = fortranToC(out, h.Shape)
	}
	return out, nil
}

// readInts reads an integer or bool data section from r as ints in C
// order.
func (h *Header) readInts(r io.Reader) ([]int, error) {
	if h.DType.Kind == 'f' {
		return nil, fmt.Errorf("dtype %s (%s): want an integer type", h.DType.Descr(), h.DType)
	}
	var out []int
	if h.Len() <= growLimit {
		out = make([]int, 0, h.Len())
	}
	err := h.stream(r, func(raw []byte, _ int64) {
		for i := 0; i < len(raw); i += h.DType.Size {
			out = append(out, h.DType.intAt(raw[i:]))
		}
	})
	if err != nil {
		return nil, err
	}
	if h.Fortran {
		out = fortranToC(out, h.Shape)
	}
	return out, nil
}

// stream reads the data section from r in chunks, calling fn with the raw
// bytes of each chunk and the index of its first element.
func (h *Header) stream(r io.Reader, fn func(raw []byte, first int64)) error {
	esz, n := int64(h.DType.Size), h.Len()
	per := int64(chunkBytes) / esz
	buf := make([]byte, min(per, n)*esz)
	for done := int64(0); done < n; {
		k := min(per, n-done)
		if got, err := io.ReadFull(r, buf[:k*esz]); err != nil {
			return h.readErr(err, done*esz+int64(got))
		}
		fn(buf[:k*esz], done)
		done += k
	}
	return nil
}

// readErr turns the error of a read that got only have bytes of the data
// section into the truncation error when the data ran out.
func (h *Header) readErr(err error, have int64) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return h.truncated(have)
	}
	return err
}

// nativeFloat32 is the dtype of []float32 on this machine.
func nativeFloat32() DType { return DType{Kind: 'f', Size: 4, BigEndian: !hostLE} }

// order returns the byte order of multi-byte elements.
func (d DType) order() binary.ByteOrder {
	if d.BigEndian {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// ToFloat32 converts the first len(dst) elements of src, raw data of dtype
// d, to float32 in dst. src must hold len(dst)*d.Size bytes or more.
func (d DType) ToFloat32(dst []float32, src []byte) {
	o := d.order()
	switch {
	case d.Kind != 'f':
		for i := range dst {
			dst[i] = float32(d.intAt(src[i*d.Size:]))
		}
	case d == nativeFloat32():
		copy(bytesOf(dst), src)
	case d.Size == 2:
		for i := range dst {
			dst[i] = half.ToFloat32(o.Uint16(src[2*i:]))
		}
	case d.Size == 4:
		for i := range dst {
			dst[i] = math.Float32frombits(o.Uint32(src[4*i:]))
		}
	default:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(o.Uint64(src[8*i:])))
		}
	}
}

// intAt decodes the integer or bool element at the start of b. uint64
// values beyond the int range wrap, as numpy's astype does.
func (d DType) intAt(b []byte) int {
	o := d.order()
	signed := d.Kind == 'i'
	switch d.Size {
	case 1:
		if d.Kind == 'b' && b[0] != 0 {
			return 1
		}
		if signed {
			return int(int8(b[0]))
		}
		return int(b[0])
	case 2:
		if signed {
			return int(int16(o.Uint16(b)))
		}
		return int(o.Uint16(b))
	case 4:
		if signed {
			return int(int32(o.Uint32(b)))
		}
		return int(o.Uint32(b))
	}
	return int(o.Uint64(b))
}

// bytesOf returns the memory of v as bytes, in this machine's byte order.
func bytesOf[T float32 | int32](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(v[0])))
}

// fortranToC reorders column-major data of the given shape to row-major.
func fortranToC[T any](src []T, shape []int) []T {
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
	dst := make([]T, len(src))
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

// File is an .npy file opened for reading, its header read and checked
// against the file's size. Its Read methods may be called more than once.
type File struct {
	Header Header

	path string
	f    *os.File
	size int64
}

// Open opens the .npy file at path and reads its header. The file must hold
// exactly the data the header describes: a shorter one is reported as
// truncated, a longer one as trailing garbage. Errors name the file.
func Open(path string) (*File, error) {
	f, err := infile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, unwrapPathErr(err))
	}
	nf, err := open(path, f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return nf, nil
}

func open(path string, f *os.File) (*File, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, unwrapPathErr(err)
	}
	h, err := readHeader(f)
	if err != nil {
		return nil, unwrapPathErr(err)
	}
	switch have := st.Size() - h.dataOff; {
	case have < h.DataSize():
		return nil, h.truncated(have)
	case have > h.DataSize():
		return nil, fmt.Errorf("header says %s = %d bytes of data, file has %d: wrong shape or trailing garbage", h, h.DataSize(), have)
	}
	return &File{Header: h, path: path, f: f, size: st.Size()}, nil
}

// Close closes the file. Arrays mapped from it stay valid until their own
// Close.
func (f *File) Close() error { return f.f.Close() }

// data returns a reader of the data section.
func (f *File) data() io.Reader {
	return io.NewSectionReader(f.f, f.Header.dataOff, f.Header.DataSize())
}

// ReadFloat32 reads a float16, float32 or float64 array into memory as
// float32 in C order; integer and bool arrays are refused.
func (f *File) ReadFloat32() ([]float32, error) {
	v, err := f.Header.readFloat32(f.data(), true)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.path, err)
	}
	return v, nil
}

// ReadFloat16Bits reads a float16 array into memory as the values' bits
// (half.ToFloat32 converts one), in C order: half the memory of
// ReadFloat32's float32 values. Other dtypes are refused.
func (f *File) ReadFloat16Bits() ([]uint16, error) {
	h := &f.Header
	if h.DType.Kind != 'f' || h.DType.Size != 2 {
		return nil, fmt.Errorf("read %s: dtype %s (%s): want float16", f.path, h.DType.Descr(), h.DType)
	}
	out := make([]uint16, 0, h.Len())
	o := h.DType.order()
	err := h.stream(f.data(), func(raw []byte, first int64) {
		for i := 0; i+2 <= len(raw); i += 2 {
			out = append(out, o.Uint16(raw[i:]))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.path, err)
	}
	if h.Fortran {
		out = fortranToC(out, h.Shape)
	}
	return out, nil
}

// ReadInts reads an integer or bool array as ints in C order; float arrays
// are refused.
func (f *File) ReadInts() ([]int, error) {
	v, err := f.Header.readInts(f.data())
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.path, err)
	}
	return v, nil
}

// Map returns the array as float32 in C order, memory-mapped (private copy
// on write) when the data is float32 in this machine's byte order, in C
// order at a 4-byte aligned offset, and the platform maps files; otherwise
// it reads the array as ReadFloat32 does.
func (f *File) Map() (*Array, error) {
	h := &f.Header
	cOrder := !h.Fortran || len(h.Shape) <= 1
	if h.DType == nativeFloat32() && cOrder && h.dataOff%4 == 0 && h.Len() > 0 {
		if b, err := mmap.Map(f.f, f.size, mmap.Private); err == nil {
			mmap.ReadAhead(b) // the callers read the whole array
			p := unsafe.Pointer(&b[h.dataOff])
			data := unsafe.Slice((*float32)(p), int(h.Len()))
			return &Array{Shape: slices.Clone(h.Shape), Data: data, mapped: b}, nil
		}
	}
	data, err := f.ReadFloat32()
	if err != nil {
		return nil, err
	}
	return &Array{Shape: slices.Clone(h.Shape), Data: data}, nil
}

// Array is an n-dimensional float32 array in C (row-major) order. Data may
// point into a memory-mapped file (see Map); writes to it then change this
// process's copy only, never the file.
type Array struct {
	Shape []int
	Data  []float32

	mapped []byte // the mapping Data points into, nil when read
}

// Mapped reports whether Data points into a memory-mapped file.
func (a *Array) Mapped() bool { return a.mapped != nil }

// Close releases the memory mapping behind Data, if any, and clears Data,
// which must not be used afterwards. It does nothing for an array read
// into memory, and may be called more than once.
func (a *Array) Close() error {
	if a.mapped == nil {
		return nil
	}
	err := mmap.Unmap(a.mapped)
	a.mapped, a.Data = nil, nil
	return err
}

// Read reads the float16, float32 or float64 array at path into memory as
// float32 in C order. Errors name the file.
func Read(path string) (*Array, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := f.ReadFloat32()
	if err != nil {
		return nil, err
	}
	return &Array{Shape: f.Header.Shape, Data: data}, nil
}

// Map returns the float array at path as float32 in C order, memory-mapped
// where File.Map can map it and read into memory otherwise. Close the
// array to release the mapping.
func Map(path string) (*Array, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Map()
}

// unwrapPathErr drops the *fs.PathError wrapper, whose path the caller's
// message already gives.
func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

package npy

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"unsafe"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/internal/half"
)

// Element is the type of the elements the writers write: float32 ('<f4')
// or int32 ('<i4').
type Element interface{ float32 | int32 }

// dtypeOf returns the dtype written for elements of type T.
func dtypeOf[T Element]() DType {
	var zero T
	if _, ok := any(zero).(float32); ok {
		return Float32
	}
	return Int32
}

// Write writes data, an array of the given shape in C order, to w as a
// little-endian .npy array (format version 1.0, the data aligned to 64
// bytes). The shape must hold exactly len(data) elements.
func Write[T Element](w io.Writer, shape []int, data []T) error {
	if err := checkShape(shape, len(data)); err != nil {
		return err
	}
	h := Header{DType: dtypeOf[T](), Shape: shape}
	if _, err := w.Write(h.Bytes()); err != nil {
		return err
	}
	b := bytesOf(data)
	if hostLE {
		_, err := w.Write(b)
		return err
	}
	// Swap each element's bytes, a chunk at a time.
	size := int(unsafe.Sizeof(data[0]))
	buf := make([]byte, min(len(b), chunkBytes))
	for len(b) > 0 {
		c := buf[:min(len(b), len(buf))]
		copy(c, b)
		for i := 0; i < len(c); i += size {
			slices.Reverse(c[i : i+size])
		}
		if _, err := w.Write(c); err != nil {
			return err
		}
		b = b[len(c):]
	}
	return nil
}

// WriteFile writes data as Write does to the file at path, atomically:
// readers see the old file or the complete new one, never part of it.
func WriteFile[T Element](path string, shape []int, data []T) error {
	if err := checkShape(shape, len(data)); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return atomicfile.Write(path, func(w io.Writer) error { return Write(w, shape, data) })
}

// Float16 is the dtype of IEEE half-precision floats ('<f2'), which Create
// writes: half the bytes of float32, for large arrays of activations.
var Float16 = DType{Kind: 'f', Size: 2}

// Writer streams one array into an .npy file, for arrays too large to hold
// in memory at once: Create writes the header, WriteFloat32 (or
// WriteFloat16Bits) appends values in C order, converted to the file's
// dtype, and Close publishes the file atomically once exactly the values
// the shape holds were written. Until then the destination is untouched;
// Abort, or a Close that fails, removes the temporary file. A Writer is
// not safe for concurrent use.
type Writer struct {
	path  string
	dtype DType
	want  int64 // the values the shape holds
	n     int64 // the values given to the Write methods
	f     *atomicfile.File
	buf   []byte
	err   error // the first error; the Write methods and Close return it
	done  bool  // Close or Abort was called
}

// Create starts writing an array of the given shape and dtype (Float16 or
// Float32, little-endian) to path, atomically as WriteFile does: the data
// goes to a temporary file in path's directory, which Close syncs and
// renames over path. Errors name the file.
func Create(path string, dtype DType, shape []int) (*Writer, error) {
	if dtype != Float16 && dtype != Float32 {
		return nil, fmt.Errorf("write %s: dtype %s: want float16 or float32, little-endian", path, dtype.Descr())
	}
	want := int64(1)
	for _, d := range shape {
		if d < 0 {
			return nil, fmt.Errorf("write %s: negative dimension in shape %s", path, FormatShape(shape))
		}
		if d > 0 && want > maxDataBytes/int64(dtype.Size)/int64(d) {
			return nil, fmt.Errorf("write %s: shape %s is too large", path, FormatShape(shape))
		}
		want *= int64(d)
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, err
	}
	h := Header{DType: dtype, Shape: slices.Clone(shape)}
	if _, err := f.Write(h.Bytes()); err != nil {
		f.Abort()
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &Writer{path: path, dtype: dtype, want: want, f: f}, nil
}

// Path returns the destination path.
func (w *Writer) Path() string { return w.path }

// count accounts for n more values; it fails, and the Writer with it, when
// they are more than the shape holds or the Writer failed before.
func (w *Writer) count(n int) error {
	switch {
	case w.done:
		return fmt.Errorf("write %s: the writer is closed", w.path)
	case w.err != nil:
		return w.err
	}
	if int64(n) > w.want-w.n {
		w.err = fmt.Errorf("write %s: more values than the shape holds: %d written, %d more given, the array has %d", w.path, w.n, n, w.want)
		return w.err
	}
	w.n += int64(n)
	return nil
}

// write writes b to the file, recording a failure.
func (w *Writer) write(b []byte) error {
	if _, err := w.f.Write(b); err != nil {
		w.err = fmt.Errorf("write %s: %w", w.path, err)
		return w.err
	}
	return nil
}

// chunkValues is the number of values converted at a time.
const chunkValues = 1 << 16

// WriteFloat32 appends v, converted to the file's dtype: to float16 by
// half.FromFloat32 (round to nearest, ties to even; beyond the range to ±Inf;
// NaN stays NaN). Writing more values than the shape holds is an error,
// after which the Writer writes nothing more and Close fails.
func (w *Writer) WriteFloat32(v []float32) error {
	return writeAs(w, v, half.FromFloat32, func(x float32) float32 { return x })
}

// WriteFloat16Bits appends v, half-precision values given by their bits
// (as half.FromFloat32 returns them): as they are to a float16 file, converted
// exactly to a float32 one. Its rules are WriteFloat32's.
func (w *Writer) WriteFloat16Bits(v []uint16) error {
	return writeAs(w, v, func(h uint16) uint16 { return h }, half.ToFloat32)
}

// writeAs appends v to w, each value converted by toHalf for a float16
// file and by toFloat for a float32 one.
func writeAs[T float32 | uint16](w *Writer, v []T, toHalf func(T) uint16, toFloat func(T) float32) error {
	if err := w.count(len(v)); err != nil {
		return err
	}
	for len(v) > 0 {
		c := v[:min(len(v), chunkValues)]
		v = v[len(c):]
		b := w.buf[:0]
		for _, x := range c {
			if w.dtype.Size == 2 {
				b = binary.LittleEndian.AppendUint16(b, toHalf(x))
			} else {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(toFloat(x)))
			}
		}
		w.buf = b
		if err := w.write(b); err != nil {
			return err
		}
	}
	return nil
}

// Close finishes the file: when exactly the values the shape holds were
// written, it syncs the temporary file and renames it over the
// destination; otherwise, or when a write failed, it removes the temporary
// file, leaves the destination as it was and returns the error. Calling
// it again returns an error; Abort after it does nothing.
func (w *Writer) Close() error {
	if w.done {
		return fmt.Errorf("write %s: the writer is closed", w.path)
	}
	w.done = true
	err := w.err
	if err == nil && w.n != w.want {
		err = fmt.Errorf("write %s: %d values written, the shape holds %d", w.path, w.n, w.want)
	}
	if err != nil {
		w.f.Abort()
		return err
	}
	if err := w.f.Commit(); err != nil {
		w.f.Abort()
		return err
	}
	return nil
}

// Abort removes the temporary file and leaves the destination as it was.
// It does nothing after Close, so that it can be deferred.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.f.Abort()
}

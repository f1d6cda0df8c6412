package npy

import (
	"fmt"
	"io"
	"slices"
	"unsafe"

	"github.com/xmr-project/xmr/atomicfile"
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

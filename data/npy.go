package data

import "github.com/xmr-project/xmr/npy"

// Array is an n-dimensional float32 array read from an .npy file, in C
// (row-major) order; Data may point into a memory-mapped file, which Close
// releases.
type Array = npy.Array

// ReadNPY reads the float .npy file at path as float32, memory-mapped
// (private copy-on-write) when it is little-endian float32 in C order and
// read into memory otherwise; see npy.Map.
func ReadNPY(path string) (*Array, error) { return npy.Map(path) }

// WriteNPY writes data, of the given shape in C order, to path as a
// little-endian float32 .npy file, atomically; see npy.WriteFile.
func WriteNPY(path string, shape []int, data []float32) error {
	return npy.WriteFile(path, shape, data)
}

// WriteNPYInt32 writes data, of the given shape in C order, to path as a
// little-endian int32 .npy file, atomically; see npy.WriteFile.
func WriteNPYInt32(path string, shape []int, data []int32) error {
	return npy.WriteFile(path, shape, data)
}

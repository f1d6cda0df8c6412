//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package mmap

import "os"

// Map returns ErrUnsupported: this platform has no memory maps, and callers
// read files instead.
func Map(f *os.File, size int64, mode Mode) ([]byte, error) { return nil, ErrUnsupported }

// Unmap does nothing: Map never maps on this platform.
func Unmap(b []byte) error { return nil }

// WillNeed does nothing: there are no mappings on this platform.
func WillNeed(b []byte) {}

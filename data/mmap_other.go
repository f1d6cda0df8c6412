//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package data

import "os"

// mapping is a memory map of a file; this platform has none, and the
// loaders read files into memory instead.
type mapping struct {
	data []byte
}

func mapFile(f *os.File, size int64) (*mapping, error) { return nil, errNoMmap }

func (m *mapping) close() error { return nil }

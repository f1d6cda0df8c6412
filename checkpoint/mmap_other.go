//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package checkpoint

import "os"

// mapFile fails: this platform has no memory maps and Open reads the file.
func mapFile(f *os.File, size int64) ([]byte, error) { return nil, errNoMmap }

// unmap is never called on this platform.
func unmap(b []byte) error { return nil }

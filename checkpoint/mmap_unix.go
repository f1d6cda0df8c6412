//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package checkpoint

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the first size bytes of f read-only.
func mapFile(f *os.File, size int64) ([]byte, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, errNoMmap
	}
	return unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
}

// unmap releases a mapping made by mapFile.
func unmap(b []byte) error { return unix.Munmap(b) }

//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package mmap

import (
	"os"

	"golang.org/x/sys/unix"
)

// Map maps the first size bytes of f. The callers here scan what they map,
// so the kernel is asked to read the mapping ahead (for mappings up to
// 8 GiB). The mapping outlives f: f may be closed once Map returns. Release
// it with Unmap; the file must not be truncated while it is mapped.
func Map(f *os.File, size int64, mode Mode) ([]byte, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, ErrUnsupported
	}
	prot, flags := unix.PROT_READ, unix.MAP_SHARED
	if mode == Private {
		prot, flags = unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), prot, flags)
	if err != nil {
		return nil, err
	}
	if size <= willNeedMax {
		_ = unix.Madvise(b, unix.MADV_WILLNEED) // advice only: failure is harmless
	}
	return b, nil
}

// Unmap releases a mapping made by Map. The memory must not be used
// afterwards.
func Unmap(b []byte) error {
	if b == nil {
		return nil
	}
	return unix.Munmap(b)
}

//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package data

import (
	"os"

	"golang.org/x/sys/unix"
)

// willNeedMax is the largest mapping read ahead in full.
const willNeedMax = 8 << 30

// mapping is a private, copy-on-write memory map of a whole file.
type mapping struct {
	data []byte
}

// mapFile maps the first size bytes of f. Pages are private: writes change
// this process's copy, never the file.
func mapFile(f *os.File, size int64) (*mapping, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, errNoMmap
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	// Ask the kernel to read ahead, as the caller scans everything at once;
	// not for files so large that reading all ahead would evict the start.
	if size <= willNeedMax {
		_ = unix.Madvise(b, unix.MADV_WILLNEED)
	}
	return &mapping{data: b}, nil
}

func (m *mapping) close() error {
	if m.data == nil {
		return nil
	}
	err := unix.Munmap(m.data)
	m.data = nil
	return err
}

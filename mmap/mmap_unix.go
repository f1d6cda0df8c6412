//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package mmap

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Map maps the first size bytes of f; the pages are read as they are
// touched (ReadAhead asks for them all at once). The mapping outlives f: f
// may be closed once Map returns. Release it with Unmap; the file must not
// be truncated while it is mapped.
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

// WillNeed asks the kernel to start reading the pages under b, a part of a
// mapping made by Map, so that many scattered reads proceed at once
// rather than one page fault at a time. It is advice: errors are ignored.
func WillNeed(b []byte) {
	if len(b) == 0 {
		return
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&b[0]))
	back := int(start & (page - 1)) // to the page's start: within the mapping, which starts on a page
	_ = unix.Madvise(unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&b[0]), -back)), back+len(b)), unix.MADV_WILLNEED)
}

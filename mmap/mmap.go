// Package mmap maps whole files into memory, read-only or as a private
// copy-on-write view, on the platforms that have mmap; elsewhere Map returns
// ErrUnsupported and callers read the file instead.
package mmap

import "errors"

// ErrUnsupported is returned by Map for a file that cannot be mapped: on a
// platform without mmap, and for empty files or sizes beyond the address
// space.
var ErrUnsupported = errors.New("memory mapping not available")

// Mode says what a mapping allows.
type Mode int

const (
	// ReadOnly pages fault on write; they are shared with the page cache.
	ReadOnly Mode = iota
	// Private pages may be written: a write changes this process's copy of
	// the page, never the file.
	Private
)

// willNeedMax is the largest mapping Map asks the kernel to read ahead in
// full; reading a larger one ahead would evict its start before it is used.
const willNeedMax = 8 << 30

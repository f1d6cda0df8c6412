// Package mmap maps whole files into memory, read-only or as a private
// copy-on-write view, on the platforms that have mmap; elsewhere Map returns
// ErrUnsupported and callers read the file instead.
package mmap

import (
	"errors"
	"fmt"
	"io"

	"github.com/xmr-project/xmr/internal/infile"
)

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

// ReadAheadMax is the most bytes ReadAhead asks the kernel to read ahead;
// reading more ahead would evict the start before it is used.
const ReadAheadMax = 8 << 30

// ReadAhead asks the kernel to read b, a mapping made by Map that the
// caller will scan, ahead in full, if it is at most ReadAheadMax bytes.
// It is advice: errors are ignored.
func ReadAhead(b []byte) {
	if len(b) <= ReadAheadMax {
		WillNeed(b)
	}
}

// ReadFile returns the content of the regular file at path, mapped
// read-only where the platform allows (mapped is true, and Unmap releases
// it) and read into memory otherwise (empty files included). Anything
// else, a FIFO included, is refused at once, without waiting for a writer
// (package infile). Errors name the path.
func ReadFile(path string) (data []byte, mapped bool, err error) {
	f, err := infile.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if data, err = Map(f, st.Size(), ReadOnly); err == nil {
		ReadAhead(data)
		return data, true, nil
	}
	if data, err = io.ReadAll(f); err != nil {
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	return data, false, nil
}

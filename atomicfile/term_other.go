//go:build !linux

package atomicfile

import (
	"io/fs"
	"os"

	"golang.org/x/term"
)

// isTerminal reports whether fi, a character device, is the terminal of
// the process's standard input, output or error. The device is not opened
// to ask it, since opening some devices acts.
func isTerminal(fi fs.FileInfo) bool {
	for fd, f := range []*os.File{os.Stdin, os.Stdout, os.Stderr} {
		if f == nil {
			continue
		}
		if sfi, err := f.Stat(); err == nil && os.SameFile(fi, sfi) && term.IsTerminal(fd) {
			return true
		}
	}
	return false
}

// Package infile opens the files that xmr reads as inputs: data files,
// checkpoints, vocabularies, dictionaries. It refuses anything that is not
// a regular file before reading a byte, and it does so without waiting:
// open(2) of a FIFO that has no writer blocks until one comes, in a way
// that neither a context nor SIGTERM interrupts, so a plain os.Open of a
// FIFO named like a data file would hang the command for good.
//
// Open opens with O_NONBLOCK, which an open of a FIFO needs in order to
// return at once and which changes nothing for a regular file, and with
// O_NOCTTY, so that a terminal named as an input never becomes the
// process's controlling one; then it checks the open handle (not the name,
// which could be swapped between a check and the open) with fstat(2).
package infile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/xmr-project/xmr/atomicfile"
)

// ErrNotRegular is wrapped by the error Open returns for a path that is
// not a regular file; the message names the kind of file found.
var ErrNotRegular = errors.New("not a regular file")

// Open opens the regular file at path for reading. A path that is a FIFO,
// a socket, a device node or a directory, also through a symbolic link, is
// refused with an *fs.PathError that wraps ErrNotRegular and reads
// "open PATH: not a regular file (a FIFO)". Other errors are os.Open's
// (errors.Is(err, fs.ErrNotExist) holds for a missing file).
func Open(path string) (*os.File, error) {
	f, _, err := open(path)
	return f, err
}

// open is Open that also returns the file's size.
func open(path string) (*os.File, int64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if err != nil {
		// open(2) of a socket fails (ENXIO): say what is there instead.
		if st, serr := os.Stat(path); serr == nil && !st.Mode().IsRegular() && !st.IsDir() {
			return nil, 0, &fs.PathError{Op: "open", Path: path, Err: notRegular(st.Mode())}
		}
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, &fs.PathError{Op: "open", Path: path, Err: notRegular(st.Mode())}
	}
	return f, st.Size(), nil
}

// notRegular is ErrNotRegular with the kind of file that m describes.
func notRegular(m fs.FileMode) error {
	return fmt.Errorf("%w (%s)", ErrNotRegular, atomicfile.Describe(m))
}

// ReadFile reads the regular file at path whole, as os.ReadFile does, after
// Open's check.
func ReadFile(path string) ([]byte, error) {
	f, size, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DirFS returns a file system of the files under dir, as os.DirFS does,
// whose Open opens with Open: a name that is not a regular file (a
// directory included) is refused. Names are fs.ValidPath names.
func DirFS(dir string) fs.FS { return dirFS(dir) }

type dirFS string

func (d dirFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	f, err := Open(filepath.Join(string(d), filepath.FromSlash(name)))
	if err != nil {
		return nil, err
	}
	return f, nil
}

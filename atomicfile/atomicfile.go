// Package atomicfile writes files so that readers see either the old content
// or the complete new content, never a half-written file: data goes to a
// temporary file in the same directory, is synced, and is renamed over the
// destination; the directory is synced after the rename.
//
// Write and WriteBytes do it all in one call. Create returns a File for
// writers that stream their output and give several files their final
// names together: Close each, then Commit each. Publish gives a file that
// was grown and synced in place (a resumable OUT.partial) its final name
// by the same rules.
//
// A destination that exists and is not a regular file is never replaced:
// a FIFO or a terminal (IsStream) is written directly, as a stream, and
// anything else (a device node such as /dev/null, a socket, a directory) is
// refused.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
)

// Write creates path atomically with the bytes that write produces. If write
// returns an error, the destination is left untouched and the temporary file
// is removed. A stream destination (IsStream) is written directly: what
// write produced before an error has reached it.
func Write(path string, write func(w io.Writer) error) (err error) {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Abort()
		}
	}()
	if err = write(f); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Commit()
}

// WriteBytes creates path atomically with content b.
func WriteBytes(path string, b []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// File is a file being written atomically. What is written goes, buffered,
// to a temporary file beside the destination; Close makes it durable and
// Commit renames it into place. Until Commit the destination is untouched,
// and Abort removes the temporary file. A File on a stream (IsStream)
// writes to the destination itself: Close flushes and closes it, Commit
// does nothing more, and Abort only closes it.
type File struct {
	path     string // as given
	dest     string // what is replaced: path, or the file its link names
	tmp      *os.File
	w        *bufio.Writer
	stream   bool
	closed   bool
	closeErr error
}

// Create starts writing path atomically. If path exists and is a FIFO or a
// terminal, it is opened for writing as a stream; a FIFO that no process
// has open for reading is an error, not a wait. If it exists and is any
// other kind of file but a regular one, Create refuses it: a device node,
// a socket or a directory is never replaced by a regular file.
//
// A symbolic link to a regular file is written through: the file it names
// is replaced and the link is kept (as /dev/stdout, a link, names the file
// that standard output was redirected to).
func Create(path string) (*File, error) {
	dest, stream, err := destination(path)
	if err != nil {
		return nil, err
	}
	if stream != nil {
		return openStream(path, stream)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), tempPattern(dest))
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &File{path: path, dest: dest, tmp: tmp, w: bufio.NewWriterSize(tmp, 1<<20)}, nil
}

// tempPattern is the os.CreateTemp pattern of dest's temporary files,
// beside it: ".NAME.tmp-*".
func tempPattern(dest string) string { return "." + filepath.Base(dest) + ".tmp-*" }

// Temporaries returns the temporary files of path that Create made and no
// Commit or Abort removed: what a killed writer left. Only a caller that
// knows no writer of path is alive (it holds the directory's lock) may
// remove them.
func Temporaries(path string) []string {
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), tempPattern(path)))
	return matches
}

// RemoveTemporaries removes the temporary files of path (Temporaries: what
// killed writers left) and logs each. path's base name may be a pattern
// (filepath.Match), for files whose names vary. The same rule holds: only
// a caller that holds the directory's lock may call it.
func RemoveTemporaries(path string) {
	for _, p := range Temporaries(path) {
		if err := os.Remove(p); err != nil {
			slog.Warn("cannot remove a killed run's temporary file", "file", p, "err", err)
			continue
		}
		slog.Info("removed a killed run's temporary file", "file", p)
	}
}

// destination resolves path by the rules of Create: for a FIFO or a
// terminal it returns the stream's FileInfo; for any other existing file
// but a regular one a *NotRegularError; otherwise the file to replace,
// path itself or, for a symbolic link to a regular file, the file it
// names.
func destination(path string) (dest string, stream fs.FileInfo, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return path, nil, nil // a new file (or an error the write will report)
	}
	if !fi.Mode().IsRegular() {
		if !IsStream(fi) {
			return "", nil, fmt.Errorf("write %s: %w", path, &NotRegularError{Path: path, Mode: fi.Mode()})
		}
		return path, fi, nil
	}
	if lfi, err := os.Lstat(path); err == nil && lfi.Mode()&fs.ModeSymlink != 0 {
		if dest, err = filepath.EvalSymlinks(path); err != nil {
			return "", nil, fmt.Errorf("write %s: %w", path, err)
		}
		return dest, nil, nil
	}
	return path, nil, nil
}

// openStream opens the FIFO or terminal path for writing, without waiting
// for a reader.
func openStream(path string, fi fs.FileInfo) (*File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		if fi.Mode()&fs.ModeNamedPipe != 0 && errors.Is(err, syscall.ENXIO) {
			return nil, fmt.Errorf("write %s: no process has this FIFO open for reading: start the reader first", path)
		}
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &File{path: path, tmp: f, w: bufio.NewWriterSize(f, 1<<16), stream: true}, nil
}

// IsStream reports whether fi, the information of an existing destination,
// is a FIFO or a terminal: such a destination is written directly, as a
// stream, since replacing it would break the pipe or the terminal.
func IsStream(fi fs.FileInfo) bool {
	m := fi.Mode()
	switch {
	case m&fs.ModeNamedPipe != 0:
		return true
	case m&fs.ModeDevice != 0 && m&fs.ModeCharDevice != 0:
		return isTerminal(fi)
	}
	return false
}

// NotRegularError is the error of a destination that exists and is
// neither a regular file nor a stream: it is refused, not replaced.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file: refusing to replace it", e.Path, Describe(e.Mode))
}

// Describe names the kind of file of mode m, with an article: "a regular
// file", "a directory", "a character device", ...
func Describe(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

// Name returns the destination path.
func (f *File) Name() string { return f.path }

// Write writes p to the temporary file.
func (f *File) Write(p []byte) (int, error) { return f.w.Write(p) }

// Close flushes, syncs and closes the temporary file, which then has the
// destination's permissions (0644); the destination is not yet touched.
// Closing again returns the first Close's result.
func (f *File) Close() error {
	if !f.closed {
		f.closed = true
		f.closeErr = f.finish()
	}
	return f.closeErr
}

func (f *File) finish() error {
	if err := f.w.Flush(); err != nil {
		if f.stream {
			f.tmp.Close()
		}
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	if f.stream {
		// A pipe or a terminal cannot be synced; closing it is all.
		if err := f.tmp.Close(); err != nil {
			return fmt.Errorf("close %s: %w", f.path, err)
		}
		return nil
	}
	if err := f.tmp.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", f.path, err)
	}
	if err := f.tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", f.path, err)
	}
	if err := os.Chmod(f.tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("chmod %s: %w", f.path, err)
	}
	return nil
}

// Commit closes the file if needed, renames it over the destination and
// syncs the directory. On a stream it only closes it.
func (f *File) Commit() error {
	if err := f.Close(); err != nil {
		return err
	}
	if f.stream {
		return nil
	}
	if err := os.Rename(f.tmp.Name(), f.dest); err != nil {
		return fmt.Errorf("rename into %s: %w", f.path, err)
	}
	if err := SyncDir(filepath.Dir(f.dest)); err != nil {
		return fmt.Errorf("%s is in place, but: %w", f.path, err)
	}
	return nil
}

// SyncDir makes the entries of directory dir durable (a rename into it,
// a removal), as fsync(2) of the directory does.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// Abort closes and removes the temporary file, leaving the destination as
// it was. It does nothing after a successful Commit. On a stream it closes
// it: what was written has reached the reader.
func (f *File) Abort() {
	f.tmp.Close()
	if !f.stream {
		os.Remove(f.tmp.Name())
	}
}

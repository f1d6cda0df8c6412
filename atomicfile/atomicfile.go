// Package atomicfile writes files so that readers see either the old content
// or the complete new content, never a half-written file: data goes to a
// temporary file in the same directory, is synced, and is renamed over the
// destination; the directory is synced after the rename.
//
// Write and WriteBytes do it all in one call. Create returns a File for
// writers that stream their output and give several files their final
// names together: Close each, then Commit each.
package atomicfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write creates path atomically with the bytes that write produces. If write
// returns an error, the destination is left untouched and the temporary file
// is removed.
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
// and Abort removes the temporary file.
type File struct {
	path     string
	tmp      *os.File
	w        *bufio.Writer
	closed   bool
	closeErr error
}

// Create starts writing path atomically.
func Create(path string) (*File, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &File{path: path, tmp: tmp, w: bufio.NewWriterSize(tmp, 1<<20)}, nil
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
		return fmt.Errorf("write %s: %w", f.path, err)
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
// syncs the directory.
func (f *File) Commit() error {
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.tmp.Name(), f.path); err != nil {
		return fmt.Errorf("rename into %s: %w", f.path, err)
	}
	if err := SyncDir(filepath.Dir(f.path)); err != nil {
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
// it was. It does nothing after a successful Commit.
func (f *File) Abort() {
	f.tmp.Close()
	os.Remove(f.tmp.Name())
}

package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Publish gives tmp, a complete file that its writer has synced (a file
// grown in place and resumed, such as OUT.partial), the name path by the
// rules of Create: a path that exists and is neither a regular file nor a
// stream (IsStream) is refused with a *NotRegularError and tmp is kept; a
// symbolic link to a regular file is written through (the file it names
// is replaced, the link is kept); a FIFO or a terminal gets tmp's content
// written to it. tmp is renamed into place where it can be (same file
// system), and otherwise copied atomically beside the destination and
// removed; the directory is synced after.
func Publish(tmp, path string) error {
	dest := path
	if fi, err := os.Stat(path); err == nil {
		if !fi.Mode().IsRegular() {
			if !IsStream(fi) {
				return fmt.Errorf("write %s: %w", path, &NotRegularError{Path: path, Mode: fi.Mode()})
			}
			return copyOver(tmp, path)
		}
		if lfi, err := os.Lstat(path); err == nil && lfi.Mode()&fs.ModeSymlink != 0 {
			if dest, err = filepath.EvalSymlinks(path); err != nil {
				return fmt.Errorf("write %s: %w", path, err)
			}
		}
	}
	if err := os.Rename(tmp, dest); err != nil {
		if errors.Is(err, syscall.EXDEV) {
			return copyOver(tmp, path)
		}
		return fmt.Errorf("rename %s into %s: %w", tmp, path, err)
	}
	if err := SyncDir(filepath.Dir(dest)); err != nil {
		return fmt.Errorf("%s is in place, but: %w", path, err)
	}
	return nil
}

// copyOver writes tmp's content to path with Write, then removes tmp.
func copyOver(tmp, path string) error {
	err := Write(path, func(w io.Writer) error {
		f, err := os.Open(tmp)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	})
	if err != nil {
		return err
	}
	if err := os.Remove(tmp); err != nil {
		return fmt.Errorf("%s is in place, but: %w", path, err)
	}
	return nil
}

package atomicfile

import (
	"errors"
	"fmt"
	"io"
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
	dest, stream, err := destination(path)
	if err != nil {
		return err
	}
	if stream != nil {
		return copyOver(tmp, path)
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

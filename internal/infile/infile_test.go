//go:build unix

package infile

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// within runs fn and fails the test if it has not returned after a
// generous while: a FIFO opened without O_NONBLOCK would wait for ever, and
// the test must fail rather than hang. The limit is not a speed check.
func within[T any](t *testing.T, what string, fn func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still waits after 30s (open(2) of a FIFO blocking?)", what)
		panic("unreachable")
	}
}

// world makes a directory holding one of each kind of file, and returns it.
func world(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "regular.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := os.Symlink("fifo", filepath.Join(dir, "link-to-fifo")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("regular.txt", filepath.Join(dir, "link-to-regular")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A socket's path must be short (108 bytes on Linux): make it
	// relative to dir.
	t.Chdir(dir)
	l, err := net.Listen("unix", "socket")
	if err == nil {
		t.Cleanup(func() { l.Close() })
	}
	return dir
}

func TestOpen(t *testing.T) {
	dir := world(t)
	for _, c := range []struct {
		name string
		path string // relative to dir unless absolute
		want string // "" for the content "hello\n"
		is   error  // what errors.Is must find
	}{
		{name: "regular file", path: "regular.txt"},
		{name: "link to a regular file", path: "link-to-regular"},
		{name: "empty file", path: "empty.txt", want: "<empty>"},
		{name: "FIFO without a writer", path: "fifo", want: "not a regular file (a FIFO)", is: ErrNotRegular},
		{name: "link to a FIFO", path: "link-to-fifo", want: "not a regular file (a FIFO)", is: ErrNotRegular},
		{name: "directory", path: "sub", want: "not a regular file (a directory)", is: ErrNotRegular},
		{name: "device", path: "/dev/null", want: "not a regular file (a character device)", is: ErrNotRegular},
		{name: "socket", path: "socket", want: "not a regular file (a socket)", is: ErrNotRegular},
		{name: "missing file", path: "missing.txt", want: "no such file or directory", is: fs.ErrNotExist},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := c.path
			if !filepath.IsAbs(path) {
				path = filepath.Join(dir, path)
			}
			if _, err := os.Lstat(path); c.name == "socket" && err != nil {
				t.Skipf("no socket: %v", err)
			}
			// Open, then read what it opened.
			b, err := within(t, "Open("+c.path+")", func() ([]byte, error) {
				f, err := Open(path)
				if err != nil {
					return nil, err
				}
				defer f.Close()
				return io.ReadAll(f)
			})
			check(t, "Open", path, c.want, c.is, b, err)
			b, err = within(t, "ReadFile("+c.path+")", func() ([]byte, error) { return ReadFile(path) })
			check(t, "ReadFile", path, c.want, c.is, b, err)
		})
	}
}

// check compares what Open or ReadFile returned with a row of TestOpen.
func check(t *testing.T, fn, path, want string, is error, b []byte, err error) {
	t.Helper()
	switch {
	case is == nil && err != nil:
		t.Errorf("%s(%s): %v", fn, path, err)
	case is == nil && want == "" && string(b) != "hello\n":
		t.Errorf("%s(%s) read %q, want %q", fn, path, b, "hello\n")
	case is == nil && want == "<empty>" && len(b) != 0:
		t.Errorf("%s(%s) read %q, want nothing", fn, path, b)
	case is != nil && !errors.Is(err, is):
		t.Errorf("%s(%s) = %v, want an error wrapping %v", fn, path, err, is)
	case is != nil && err.Error() != "open "+path+": "+want:
		t.Errorf("%s(%s) = %q, want %q", fn, path, err, "open "+path+": "+want)
	}
}

// TestDirFS: names in a DirFS open through Open, so that fs.Stat and
// fs.ReadFile refuse a FIFO without waiting for a writer.
func TestDirFS(t *testing.T) {
	fsys := DirFS(world(t))
	b, err := fs.ReadFile(fsys, "regular.txt")
	if err != nil || string(b) != "hello\n" {
		t.Errorf("ReadFile(regular.txt) = %q, %v", b, err)
	}
	for _, name := range []string{"fifo", "link-to-fifo", "sub"} {
		_, err := within(t, "fs.Stat("+name+")", func() (fs.FileInfo, error) { return fs.Stat(fsys, name) })
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("fs.Stat(%s) = %v, want ErrNotRegular", name, err)
		}
	}
	for _, name := range []string{"../x", "/etc/passwd", "a/../../x"} {
		if _, err := fsys.Open(name); !errors.Is(err, fs.ErrInvalid) || !strings.Contains(err.Error(), name) {
			t.Errorf("Open(%q) = %v, want fs.ErrInvalid naming it", name, err)
		}
	}
}

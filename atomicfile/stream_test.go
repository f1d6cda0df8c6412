//go:build linux

package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mknodChar makes a character device node dir/name with the device numbers
// of /dev/full (1, 7), or skips the test when the process may not.
func mknodChar(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 7))); err != nil {
		t.Skipf("cannot make a device node here (needs root, or CAP_MKNOD): %v", err)
	}
	return path
}

// TestRefusesNonRegular: a device node, a directory and a socket are
// refused, with the kind of file named, and left as they were.
func TestRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	dev := mknodChar(t, dir, "full")
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, kind string }{{dev, "a character device"}, {sub, "a directory"}} {
		err := WriteBytes(c.path, []byte("x"))
		var nre *NotRegularError
		if !errors.As(err, &nre) || !strings.Contains(err.Error(), c.kind) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("WriteBytes(%s) = %v, want a NotRegularError naming it as %s", c.path, err, c.kind)
		}
	}
	st, err := os.Stat(dev)
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("the device node is now %v (%v)", st.Mode(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("directory holds %v, want only the node and sub", ents)
	}
	// Through a symbolic link too.
	link := filepath.Join(dir, "link")
	if err := os.Symlink(dev, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(link, []byte("x")); err == nil {
		t.Error("a link to a device node was replaced")
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link is now %v (%v)", st.Mode(), err)
	}
}

// TestFIFOStream: a FIFO is written directly and stays a FIFO; one that
// nobody reads is an error at once, not a wait.
func TestFIFOStream(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- WriteBytes(fifo, []byte("nobody reads")) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "no process has this FIFO open for reading") {
			t.Errorf("write to an unread FIFO: %v, want an error saying nobody reads it", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("write to an unread FIFO waits")
	}

	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make(chan string, 1)
	// A FIFO read with no writer yet reads as the end: hold a writer open
	// until the write is done.
	hold, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	want := strings.Repeat("streamed through the pipe\n", 10000) // more than a pipe's buffer
	if err := WriteBytes(fifo, []byte(want)); err != nil {
		t.Fatal(err)
	}
	hold.Close()
	if s := <-got; s != want {
		t.Errorf("read %d bytes from the FIFO, want %d", len(s), len(want))
	}
	if st, err := os.Stat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO is now %v (%v)", st.Mode(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %v, want only the FIFO", ents)
	}
}

// TestTerminalStream: a terminal (a pseudo-terminal here) is written
// directly and stays a device.
func TestTerminalStream(t *testing.T) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	defer master.Close()
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Skipf("ptsname: %v", err)
	}
	pts := filepath.Join("/dev/pts", strconv.Itoa(n))
	st, err := os.Stat(pts)
	if err != nil {
		t.Skipf("%s: %v", pts, err)
	}
	if !IsStream(st) {
		t.Fatalf("%s (%v) is not taken for a terminal", pts, st.Mode())
	}
	if err := WriteBytes(pts, []byte("to the terminal")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	k, err := master.Read(buf)
	if err != nil || !strings.Contains(string(buf[:k]), "to the terminal") {
		t.Errorf("the terminal got %q, %v", buf[:k], err)
	}
	if st, err := os.Stat(pts); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("%s is now %v (%v)", pts, st.Mode(), err)
	}
}

// TestWritesThroughLinks: a symbolic link to a regular file keeps being a
// link; the file it names gets the content.
func TestWritesThroughLinks(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(sub, "target.json")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(filepath.Join("sub", "target.json"), link); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(link, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link is now %v (%v)", st.Mode(), err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "new" {
		t.Fatalf("the target holds %q (%v), want new", b, err)
	}
	if ents, _ := os.ReadDir(sub); len(ents) != 1 {
		t.Errorf("%s holds %v, want only the target", sub, ents)
	}
}

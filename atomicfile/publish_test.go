package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestPublish: Publish renames a finished file into place, writes through
// a symbolic link to a regular file (keeping the link), and refuses a
// destination that is not a regular file, keeping the finished file.
func TestPublish(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	finished := func(content string) string {
		t.Helper()
		tmp := filepath.Join(dir, "out.partial")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return tmp
	}
	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	// A new file, then over an old one.
	out := filepath.Join(dir, "out")
	for _, content := range []string{"one", "two"} {
		tmp := finished(content)
		if err := Publish(tmp, out); err != nil {
			t.Fatal(err)
		}
		if got := read(out); got != content {
			t.Errorf("out holds %q, want %q", got, content)
		}
		if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there (%v)", tmp, err)
		}
	}

	// Through a link to a regular file in another directory.
	target := filepath.Join(other, "target")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := Publish(finished("new"), link); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link is now %v (%v), want it kept", fi.Mode(), err)
	}
	if got := read(target); got != "new" {
		t.Errorf("the link's file holds %q, want %q", got, "new")
	}

	// A directory is refused, and the finished file kept.
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := finished("kept")
	var nre *NotRegularError
	if err := Publish(tmp, sub); !errors.As(err, &nre) {
		t.Errorf("Publish over a directory = %v, want a NotRegularError", err)
	}
	if fi, err := os.Stat(sub); err != nil || !fi.IsDir() {
		t.Errorf("the directory is now %v (%v)", fi.Mode(), err)
	}
	if got := read(tmp); got != "kept" {
		t.Errorf("the finished file holds %q, want it kept", got)
	}
}

// TestPublishCopy: copyOver, Publish's way across file systems, writes
// through a link and removes the finished file.
func TestPublishCopy(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.WriteFile(tmp, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := copyOver(tmp, link); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "new" {
		t.Errorf("target holds %q (%v), want %q", b, err, "new")
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link is now %v (%v), want it kept", fi.Mode(), err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there (%v)", tmp, err)
	}
}

package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.bin")
	if err := WriteBytes(path, []byte("old")); err != nil {
		t.Fatal(err)
	}
	// A failing writer leaves the old content and no temporary file.
	boom := errors.New("boom")
	err := Write(path, func(w io.Writer) error {
		w.Write([]byte("half-written"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v does not wrap the writer's", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("after a failed write the file holds %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
	if err := WriteBytes(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("file holds %q, want new", b)
	}
	if err := WriteBytes(filepath.Join(dir, "missing", "f"), nil); err == nil {
		t.Fatal("writing into a missing directory succeeded")
	}
}

func TestFile(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	fa, err := Create(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := Create(b)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(fa, "streamed ")
	io.WriteString(fa, "content")
	io.WriteString(fb, "dropped")
	if err := fa.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a); !os.IsNotExist(err) {
		t.Fatalf("destination exists before Commit: %v", err)
	}
	if err := fa.Commit(); err != nil {
		t.Fatal(err)
	}
	fb.Abort()
	if got, err := os.ReadFile(a); err != nil || string(got) != "streamed content" {
		t.Fatalf("after Commit: %q, %v", got, err)
	}
	if st, _ := os.Stat(a); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 || ents[0].Name() != "a" || fa.Name() != a {
		t.Fatalf("directory holds %v, want only a", ents)
	}
	fa.Abort() // after Commit: harmless
	if _, err := os.Stat(a); err != nil {
		t.Fatalf("Abort after Commit removed the file: %v", err)
	}
}

// TestSyncDir syncs a directory and names the one it cannot open.
func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "gone")
	err := SyncDir(missing)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("SyncDir(%s) = %v, want an error naming it", missing, err)
	}
}

// TestTemporaries: a Create without Commit or Abort (a killed writer)
// leaves a temporary that Temporaries finds; other files' are not listed.
func TestTemporaries(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "last.safetensors")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Create(filepath.Join(dir, "last.safetensors.bak"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Abort()
	if got := Temporaries(path); len(got) != 1 || filepath.Dir(got[0]) != dir {
		t.Errorf("Temporaries = %v, want the one temporary of %s", got, path)
	}
	f.Abort()
	if got := Temporaries(path); len(got) != 0 {
		t.Errorf("after Abort, Temporaries = %v, want none", got)
	}
}

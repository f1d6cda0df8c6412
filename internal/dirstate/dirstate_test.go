package dirstate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSnapshotDiff checks that Diff names each file added, removed,
// resized or touched under a directory, including in a subdirectory, and
// that skipped names are left out.
func TestSnapshotDiff(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a", "1")
	write("sub/b", "22")
	write("touched", "x")
	write("xmr.lock", "123")
	before, err := Snapshot(dir, "xmr.lock")
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(before, before); d != "" {
		t.Fatalf("Diff of a snapshot with itself: %q", d)
	}
	write("sub/b", "333")
	write("c", "")
	write("xmr.lock", "4567")
	if err := os.Remove(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "touched"), later, later); err != nil {
		t.Fatal(err)
	}
	after, err := Snapshot(dir, "xmr.lock")
	if err != nil {
		t.Fatal(err)
	}
	d := Diff(before, after)
	for _, want := range []string{"a: removed", "c: added", "sub/b: 3 bytes", "touched: 1 bytes"} {
		if !strings.Contains(d, want) {
			t.Errorf("Diff lacks %q:\n%s", want, d)
		}
	}
	if strings.Contains(d, "xmr.lock") || strings.Count(d, "\n") != 3 {
		t.Errorf("Diff:\n%s", d)
	}
	if _, err := Snapshot(filepath.Join(dir, "missing")); err == nil {
		t.Error("Snapshot of a missing directory succeeded")
	}
}

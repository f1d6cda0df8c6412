package mmap

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestMap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	content := []byte("hello, mapped world")
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []Mode{ReadOnly, Private} {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Map(f, int64(len(content)), mode)
		f.Close()
		if errors.Is(err, ErrUnsupported) {
			t.Skip("no memory maps on this platform")
		}
		if err != nil {
			t.Fatalf("mode %d: %v", mode, err)
		}
		if string(b) != string(content) {
			t.Errorf("mode %d: mapped %q", mode, b)
		}
		if mode == Private {
			b[0] = 'J' // stays in this process
		}
		if err := Unmap(b); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := os.ReadFile(p); string(got) != string(content) {
		t.Errorf("a write to a private mapping reached the file: %q", got)
	}
}

func TestMapEmpty(t *testing.T) {
	p := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Map(f, 0, ReadOnly); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Map of an empty file: %v, want ErrUnsupported", err)
	}
}

// TestWillNeed advises parts of a mapping that start inside a page and
// empty ones: advice never fails or faults.
func TestWillNeed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, make([]byte, 3*os.Getpagesize()+17), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := Map(f, int64(3*os.Getpagesize()+17), ReadOnly)
	if errors.Is(err, ErrUnsupported) {
		t.Skip("no memory maps here")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(b)
	WillNeed(b[100 : 2*os.Getpagesize()+5])
	WillNeed(b[len(b)-1:])
	WillNeed(b[:0])
	if b[len(b)-1] != 0 {
		t.Fatal("mapping changed")
	}
}

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

package mmap

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
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
// TestWillNeed: WillNeed is advice with no result, so what can be checked
// is that ranges not aligned to pages, the last partial page and an empty
// range are accepted (no fault, no panic) and the mapping still reads the
// file's bytes.
func TestWillNeed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	content := make([]byte, 3*os.Getpagesize()+17)
	for i := range content {
		content[i] = byte(i % 251)
	}
	if err := os.WriteFile(path, content, 0o644); err != nil {
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
	if !bytes.Equal(b, content) {
		t.Fatal("the mapping no longer reads the file")
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	full, empty := filepath.Join(dir, "full"), filepath.Join(dir, "empty")
	if err := os.WriteFile(full, []byte("twelve bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, want, err string
	}{
		{"regular", full, "twelve bytes", ""},
		{"empty (read, not mapped)", empty, "", ""},
		{"directory", dir, "", dir + ": not a regular file"},
		{"missing", filepath.Join(dir, "none"), "", "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data, mapped, err := ReadFile(c.path)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != c.want {
				t.Errorf("content %q, want %q", data, c.want)
			}
			if mapped {
				if len(data) == 0 {
					t.Error("an empty file reported as mapped")
				}
				if err := Unmap(data); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

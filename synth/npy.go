package synth

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// npyHeader returns a NumPy format 1.0 header for a C-order array of the
// given dtype descr ('<f4', '<i4') and shape: the magic "\x93NUMPY", version
// 1.0, the little-endian uint16 length of the dictionary, and the dictionary
// padded with spaces and a final newline so that the data starts at a
// multiple of 64 bytes.
func npyHeader(descr string, shape ...int) []byte {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	tuple := strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, tuple)
	total := 10 + len(dict) + 1
	pad := (64 - total%64) % 64
	dict += strings.Repeat(" ", pad) + "\n"
	h := make([]byte, 0, 10+len(dict))
	h = append(h, "\x93NUMPY\x01\x00"...)
	h = append(h, byte(len(dict)), byte(len(dict)>>8))
	return append(h, dict...)
}

// tempFile is an output file streamed to a temporary name in the final
// directory and renamed into place by commit; abort removes it. An
// interrupted run therefore never leaves a partial file under a final name.
type tempFile struct {
	final string
	f     *os.File
	w     *bufio.Writer
}

func createTemp(final string) (*tempFile, error) {
	f, err := os.CreateTemp(filepath.Dir(final), "."+filepath.Base(final)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", final, err)
	}
	return &tempFile{final: final, f: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

func (t *tempFile) Write(p []byte) (int, error) { return t.w.Write(p) }

// finish flushes, syncs and closes the temporary file.
func (t *tempFile) finish() error {
	if err := t.w.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", t.final, err)
	}
	if err := t.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", t.final, err)
	}
	if err := t.f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", t.final, err)
	}
	return os.Chmod(t.f.Name(), 0o644)
}

// commit renames the finished file to its final name.
func (t *tempFile) commit() error {
	if err := os.Rename(t.f.Name(), t.final); err != nil {
		return fmt.Errorf("rename into %s: %w", t.final, err)
	}
	return nil
}

// abort closes and removes the temporary file.
func (t *tempFile) abort() {
	t.f.Close()
	os.Remove(t.f.Name())
}

package data

import (
	"path/filepath"
	"slices"
	"testing"
)

func TestNPYWrappers(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.npy")
	if err := WriteNPY(p, []int{2, 2}, []float32{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	a, err := ReadNPY(p)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !slices.Equal(a.Shape, []int{2, 2}) || !slices.Equal(a.Data, []float32{1, 2, 3, 4}) {
		t.Errorf("got %v %v", a.Shape, a.Data)
	}
	q := filepath.Join(dir, "i.npy")
	if err := WriteNPYInt32(q, []int{3}, []int32{1, 2}); err == nil {
		t.Error("WriteNPYInt32 accepted 2 values for shape (3,)")
	}
	_, err = ReadNPY(q)
	wantErr(t, err, q, "no such file")
}

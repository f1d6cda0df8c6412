package npy

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/internal/half"
)

// entries returns the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestWriterRoundTrip writes arrays in pieces with Create and reads them
// with Read: float16 values as Float16Bits rounds them, float32 values as
// they are.
func TestWriterRoundTrip(t *testing.T) {
	in := []float32{0, 1, -2, 0.1, 65504, 70000, -1e9, float32(math.Ldexp(1, -24)), float32(math.Ldexp(1, -25)),
		1 + 1.0/2048, 1 + 3.0/2048, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(-1)), 3.14159, 1e-6}
	want16 := []float32{0, 1, -2, 0.099975586, 65504, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Ldexp(1, -24)), 0,
		1, 1 + 2.0/1024, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(-1)), 3.140625, float32(math.Ldexp(17, -24))}
	same := func(a, b float32) bool {
		if math.IsNaN(float64(a)) || math.IsNaN(float64(b)) {
			return math.IsNaN(float64(a)) && math.IsNaN(float64(b))
		}
		return math.Float32bits(a) == math.Float32bits(b)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		dtype DType
		want  []float32
	}{{Float16, want16}, {Float32, in}} {
		path := filepath.Join(dir, tc.dtype.String()+".npy")
		w, err := Create(path, tc.dtype, []int{2, 4, 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, piece := range [][]float32{in[:3], nil, in[3:11], in[11:]} {
			if err := w.WriteFloat32(piece); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("%s: the destination exists before Close: %v", tc.dtype, err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		w.Abort() // after Close: nothing
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if f.Header.DType.Descr() != tc.dtype.Descr() || !slices.Equal(f.Header.Shape, []int{2, 4, 2}) {
			t.Errorf("header %s", f.Header)
		}
		got, err := f.ReadFloat32()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if !same(got[i], tc.want[i]) {
				t.Errorf("%s: value %d (%v) reads %v, want %v", tc.dtype, i, in[i], got[i], tc.want[i])
			}
		}
		if names := entries(t, dir); slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, ".tmp-") }) {
			t.Errorf("temporary files left: %v", names)
		}
	}
	// Half-precision bits go in as they are, to either dtype.
	bits := []uint16{0x3c00, 0x8001, 0x7bff, 0xfc00}
	for _, dt := range []DType{Float16, Float32} {
		path := filepath.Join(dir, "bits-"+dt.String()+".npy")
		w, err := Create(path, dt, []int{4})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteFloat16Bits(bits); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		a, err := Read(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range bits {
			if a.Data[i] != half.ToFloat32(b) {
				t.Errorf("%s: bits %#04x read as %v", dt, b, a.Data[i])
			}
		}
	}
	// An empty array.
	path := filepath.Join(dir, "empty.npy")
	w, err := Create(path, Float16, []int{0, 16, 16, 120})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if a, err := Read(path); err != nil || len(a.Data) != 0 || !slices.Equal(a.Shape, []int{0, 16, 16, 120}) {
		t.Errorf("empty array: %v, %v", a, err)
	}
}

// TestWriterErrors: too few or too many values, and Abort, leave the
// destination as it was and no temporary file.
func TestWriterErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.npy")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		if b, err := os.ReadFile(path); err != nil || string(b) != "old" {
			t.Errorf("%s: the destination changed: %q, %v", what, b, err)
		}
		if names := entries(t, dir); !slices.Equal(names, []string{"a.npy"}) {
			t.Errorf("%s: the directory holds %v", what, names)
		}
	}

	w, err := Create(path, Float16, []int{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFloat32(make([]float32, 5)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, w.Close(), "write "+path, "5 values written, the shape holds 6")
	check("too few")
	wantErr(t, w.Close(), "closed")
	wantErr(t, w.WriteFloat32([]float32{1}), "closed")

	w, err = Create(path, Float16, []int{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFloat32(make([]float32, 4)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, w.WriteFloat16Bits(make([]uint16, 3)), "write "+path, "more values than the shape holds: 4 written, 3 more given, the array has 6")
	wantErr(t, w.WriteFloat32(make([]float32, 2)), "more values than the shape holds") // the Writer failed for good
	wantErr(t, w.Close(), "more values than the shape holds")
	check("too many")

	w, err = Create(path, Float32, []int{3})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFloat32([]float32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	check("Abort")
	w.Abort()
	wantErr(t, w.Close(), "closed")
	check("Close after Abort")

	_, err = Create(path, Int32, []int{3})
	wantErr(t, err, "write "+path, "<i4", "want float16 or float32")
	_, err = Create(path, DType{Kind: 'f', Size: 2, BigEndian: true}, []int{3})
	wantErr(t, err, ">f2")
	_, err = Create(path, Float16, []int{3, -1})
	wantErr(t, err, "negative dimension in shape (3,-1)")
	_, err = Create(path, Float16, []int{1 << 30, 1 << 30, 1 << 30})
	wantErr(t, err, "too large")
	_, err = Create(filepath.Join(dir, "missing", "a.npy"), Float16, []int{3})
	wantErr(t, err, filepath.Join(dir, "missing", "a.npy"))
	check("refused")
}

// TestReadFloat16Bits reads a float16 file back as its bits, in C order
// (a Fortran-order file transposed), and refuses a float32 one.
func TestReadFloat16Bits(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "h.npy")
	vals := []float32{0, 1, -2, 0.5, 65504, 1.0 / 3}
	w, err := Create(path, Float16, []int{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFloat32(vals); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.ReadFloat16Bits()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if got[i] != half.FromFloat32(v) {
			t.Errorf("value %d: bits %#04x, want %#04x", i, got[i], half.FromFloat32(v))
		}
	}
	// Fortran order: the same values stored column by column.
	fpath := filepath.Join(dir, "f.npy")
	raw := []byte{}
	for _, i := range []int{0, 3, 1, 4, 2, 5} {
		h := half.FromFloat32(vals[i])
		raw = append(raw, byte(h), byte(h>>8))
	}
	if err := os.WriteFile(fpath, npyBytes(dictFor("<f2", true, "(2, 3)"), raw), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err = Open(fpath); err != nil {
		t.Fatal(err)
	}
	fo, err := f.ReadFloat16Bits()
	f.Close()
	if err != nil || !slices.Equal(fo, got) {
		t.Errorf("Fortran order: %v, %v; want %v", fo, err, got)
	}
	f32 := filepath.Join(dir, "f32.npy")
	if err := WriteFile(f32, []int{2}, []float32{1, 2}); err != nil {
		t.Fatal(err)
	}
	if f, err = Open(f32); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadFloat16Bits(); err == nil || !strings.Contains(err.Error(), "want float16") {
		t.Errorf("a float32 file read as float16 bits: %v", err)
	}
}

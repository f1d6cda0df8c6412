package npy

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The fuzz targets feed arbitrary bytes to the readers: each must return an
// error, never panic or allocate without bound. Run one with e.g.
//
//	go test ./npy -run '^$' -fuzz FuzzRead -fuzztime 1m

// seeds returns well-formed and broken .npy streams.
func seeds() [][]byte {
	return [][]byte{
		encode([]int{2, 3, 4}, make([]float32, 24)),
		encode([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6}),
		encode([]int{3}, []int32{1, -1, 7}),
		npyBytes(dictFor("<f8", false, "(2,)"), floats("<f8", 1, 2)),
		npyBytes(dictFor(">f4", true, "(2, 1)"), floats(">f4", 1, 2)),
		npyBytes(dictFor("<f2", false, "(1,)"), []byte{0, 0x3c}),
		npyBytes(dictFor("|b1", true, "(2, 2)"), []byte{0, 1, 1, 0}),
		npyBytes(dictFor(">u8", false, "()"), make([]byte, 8)),
		npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", floats("<f4", 1)),
		npyBytes(`{"shape": (1L,), "descr": "<f4", "fortran_order": False}`, floats("<f4", 1)),
		npyBytes(dictFor("<f4", false, "(5000, 36, 2048)"), nil),
		npyBytes(dictFor("<f4", false, "(-1,)"), nil),
		[]byte("\x93NUMPY\x02\x00\x10\x00\x00\x00{'descr': '<f4'"),
		[]byte("\x93NUMPY\x01\x00"),
	}
}

// FuzzRead reads arbitrary bytes as a stream and as a file, as float32 and
// as ints, mapped and not.
func FuzzRead(f *testing.F) {
	for _, s := range seeds() {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := NewReader(bytes.NewReader(b)); err == nil {
			h := r.Header
			if h.Len() < 0 || h.DataSize() > maxDataBytes || h.dataOff > int64(len(b)) {
				t.Fatalf("header %s accepted: %d elements, %d bytes at %d", h, h.Len(), h.DataSize(), h.dataOff)
			}
			if v, err := r.ReadFloat32(); err == nil && int64(len(v)) != h.Len() {
				t.Fatalf("stream %s: %d elements", h, len(v))
			}
			r, _ := NewReader(bytes.NewReader(b))
			if v, err := r.ReadInts(); err == nil && int64(len(v)) != h.Len() {
				t.Fatalf("stream %s: %d ints", h, len(v))
			}
		}
		p := filepath.Join(dir, "x.npy")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		nf, err := Open(p)
		if err != nil {
			return
		}
		defer nf.Close()
		in, errIn := nf.ReadFloat32()
		a, errMap := nf.Map()
		if (errIn == nil) != (errMap == nil) {
			t.Fatalf("ReadFloat32: %v, but Map: %v", errIn, errMap)
		}
		if errMap == nil {
			if int64(len(a.Data)) != nf.Header.Len() || !slices.Equal(a.Shape, nf.Header.Shape) {
				t.Fatalf("shape %v with %d elements", a.Shape, len(a.Data))
			}
			for i := range in { // NaNs differ from themselves
				if in[i] != a.Data[i] && in[i] == in[i] {
					t.Fatalf("element %d: read %v, mapped %v", i, in[i], a.Data[i])
				}
			}
			a.Close()
		}
		nf.ReadInts()
	})
}

// FuzzRoundTrip checks that what Write writes reads back unchanged.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, uint8(2))
	f.Add([]byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, raw []byte, rows uint8) {
		v := make([]int32, len(raw)/4)
		for i := range v {
			v[i] = int32(uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24)
		}
		shape := []int{len(v)}
		if r := int(rows); r > 0 && len(v)%r == 0 {
			shape = []int{r, len(v) / r}
		}
		r, err := NewReader(bytes.NewReader(encode(shape, v)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadInts()
		if err != nil || !slices.Equal(r.Header.Shape, shape) || len(got) != len(v) {
			t.Fatalf("shape %v: got %v %v, %v", shape, r.Header.Shape, got, err)
		}
		for i := range v {
			if got[i] != int(v[i]) {
				t.Fatalf("element %d: %d, want %d", i, got[i], v[i])
			}
		}
	})
}

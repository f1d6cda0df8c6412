package data

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sbinet/npyio"
)

// readNPYBytes reads an .npy stream fully as float32, as the npz path does.
func readNPYBytes(b []byte) ([]int, []float32, error) {
	r := bytes.NewReader(b)
	h, err := readNPYHeader(r)
	if err != nil {
		return nil, nil, err
	}
	v, err := readFloat32(r, &h, false)
	return h.shape, v, err
}

func TestReadNPYStream(t *testing.T) {
	six := []float32{1, 2, 3, 4, 5, 6}
	tests := []struct {
		name  string
		file  []byte
		shape []int
		want  []float32
	}{
		{"f4 C", npyBytes(dictFor("<f4", false, "(2, 3)"), f32le(six...)), []int{2, 3}, six},
		{"no trailing comma", npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", f32le(six...)), []int{2, 3}, six},
		{"1-d", npyBytes(dictFor("<f4", false, "(6,)"), f32le(six...)), []int{6}, six},
		{"scalar", npyBytes(dictFor("<f4", false, "()"), f32le(7)), nil, []float32{7}},
		{"empty", npyBytes(dictFor("<f4", false, "(0, 36, 2048)"), nil), []int{0, 36, 2048}, []float32{}},
		{"big-endian", npyBytes(dictFor(">f4", false, "(2, 3)"), f32be(six...)), []int{2, 3}, six},
		{"float64", npyBytes(dictFor("<f8", false, "(2, 3)"), f64le(six...)), []int{2, 3}, six},
		{"float16", npyBytes(dictFor("<f2", false, "(3,)"), []byte{0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38}), []int{3}, []float32{1, -2, 0.5}},
		// Fortran order: column-major (2,3) [[1,2,3],[4,5,6]] is 1,4,2,5,3,6.
		{"fortran", npyBytes(dictFor("<f4", true, "(2, 3)"), f32le(1, 4, 2, 5, 3, 6)), []int{2, 3}, six},
		{"int32", npyBytes(dictFor("<i4", false, "(2,)"), []byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}), []int{2}, []float32{1, -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shape, got, err := readNPYBytes(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(shape, tt.shape) || !slices.Equal(got, tt.want) {
				t.Fatalf("got %v %v, want %v %v", shape, got, tt.shape, tt.want)
			}
		})
	}
}

func TestReadNPYVersions(t *testing.T) {
	for _, major := range []byte{2, 3} {
		dict := dictFor("<f4", false, "(2,)") + "\n"
		var b bytes.Buffer
		b.WriteString("\x93NUMPY")
		b.Write([]byte{major, 0})
		binary.Write(&b, binary.LittleEndian, uint32(len(dict)))
		b.WriteString(dict)
		b.Write(f32le(1, 2))
		shape, v, err := readNPYBytes(b.Bytes())
		if err != nil || !slices.Equal(shape, []int{2}) || !slices.Equal(v, []float32{1, 2}) {
			t.Fatalf("version %d: %v %v %v", major, shape, v, err)
		}
	}
}

func TestReadNPYErrors(t *testing.T) {
	tests := []struct {
		name string
		file []byte
		frag string
	}{
		{"empty", nil, "empty"},
		{"short", []byte("\x93NUM"), "too short"},
		{"magic", []byte("PK\x03\x04 not numpy at all"), "not an .npy file"},
		{"version", []byte("\x93NUMPY\x09\x00\x10\x00"), "version 9.0"},
		{"header truncated", []byte("\x93NUMPY\x01\x00\x40\x00{'descr'"), "truncated .npy header"},
		{"huge header", []byte("\x93NUMPY\x02\x00\xff\xff\xff\x7f"), "over the"},
		{"not a dict", npyBytes("hello", nil), "not a Python dict"},
		{"structured", npyBytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", nil), "structured"},
		{"missing key", npyBytes("{'descr': '<f4', 'shape': (2,), }", nil), "want keys"},
		{"key order", npyBytes("{'shape': (2,), 'fortran_order': False, 'descr': '<f4', }", nil), "order"},
		{"bad order value", npyBytes("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", nil), "fortran_order"},
		{"dtype", npyBytes(dictFor("<U8", false, "(2,)"), nil), `unsupported dtype "<U8"`},
		{"object", npyBytes(dictFor("|O", false, "(2,)"), nil), "unsupported dtype"},
		{"negative", npyBytes(dictFor("<f4", false, "(-2, 3)"), nil), "negative dimension"},
		{"huge shape", npyBytes(dictFor("<f4", false, "(100000000, 100000000, 100000000)"), nil), "too large"},
		{"bad shape", npyBytes(dictFor("<f4", false, "(2, x)"), nil), "bad .npy header"},
		{"truncated data", npyBytes(dictFor("<f4", false, "(2, 3)"), f32le(1, 2, 3)), "truncated: header says (2,3) float32 = 24 bytes of data, file has 12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := readNPYBytes(tt.file)
			wantErr(t, err, tt.frag)
		})
	}
}

func TestNPYFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.npy")
	data := make([]float32, 4*3*5)
	for i := range data {
		data[i] = float32(i) - 7.5
	}
	if err := WriteNPY(p, []int{4, 3, 5}, data); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(p)
	if off := len(raw) - 4*len(data); off%64 != 0 {
		t.Errorf("data starts at byte %d, not 64-aligned", off)
	}
	a, err := ReadNPY(p)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !slices.Equal(a.Shape, []int{4, 3, 5}) || !slices.Equal(a.Data, data) {
		t.Fatalf("round trip: %v %v", a.Shape, a.Data[:5])
	}
	if a.m == nil {
		t.Log("not memory-mapped on this platform")
	}
	// Writes to a mapped array stay private.
	a.Data[0] = 42
	b, err := ReadNPY(p)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Data[0] != data[0] {
		t.Fatalf("write to mapped data reached the file: %v", b.Data[0])
	}
	if err := WriteNPY(p, []int{4, 4}, data); err == nil {
		t.Fatal("WriteNPY accepted a shape that disagrees with the data")
	}

	// numpy (checked by hand) and npyio read our files; we read npyio's.
	var v []float32
	f, _ := os.Open(p)
	defer f.Close()
	if err := npyio.Read(f, &v); err != nil || !slices.Equal(v, data) {
		t.Fatalf("npyio cannot read WriteNPY output: %v", err)
	}
	var buf bytes.Buffer
	if err := npyio.Write(&buf, data); err != nil {
		t.Fatal(err)
	}
	q := filepath.Join(dir, "b.npy")
	writeFile(t, q, buf.Bytes())
	c, err := ReadNPY(q)
	if err != nil || !slices.Equal(c.Data, data) {
		t.Fatalf("cannot read npyio output: %v", err)
	}
	c.Close()
}

func TestNPYFileErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		file []byte
		frag string
	}{
		{"truncated", npyBytes(dictFor("<f4", false, "(5000, 36, 2048)"), f32le(1, 2, 3)), "truncated: header says (5000,36,2048) float32 = 1474560000 bytes of data, file has 12"},
		{"trailing", npyBytes(dictFor("<f4", false, "(1,)"), f32le(1, 2)), "trailing garbage"},
		{"ints", npyBytes(dictFor("<i8", false, "(1,)"), make([]byte, 8)), "dtype <i8 (int64)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, tt.name+".npy")
			writeFile(t, p, tt.file)
			_, err := ReadNPY(p)
			wantErr(t, err, p, tt.frag)
		})
	}
	_, err := ReadNPY(filepath.Join(dir, "absent.npy"))
	wantErr(t, err, "absent.npy", "no such file")
}

func TestHalfToFloat32(t *testing.T) {
	tests := []struct {
		h    uint16
		want float32
	}{
		{0x0000, 0}, {0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, 5.9604645e-08},
		{0x7c00, float32(math.Inf(1))}, {0xfc00, float32(math.Inf(-1))},
	}
	for _, tt := range tests {
		if got := halfToFloat32(tt.h); got != tt.want {
			t.Errorf("halfToFloat32(%#x) = %v, want %v", tt.h, got, tt.want)
		}
	}
	if v := halfToFloat32(0x7e00); v == v {
		t.Errorf("halfToFloat32(NaN) = %v", v)
	}
}

func TestFortranToC(t *testing.T) {
	// A (2,3,4) array a[i,j,k] = 100i+10j+k stored column-major.
	shape := []int{2, 3, 4}
	var src, want []float32
	for k := range 4 {
		for j := range 3 {
			for i := range 2 {
				src = append(src, float32(100*i+10*j+k))
			}
		}
	}
	for i := range 2 {
		for j := range 3 {
			for k := range 4 {
				want = append(want, float32(100*i+10*j+k))
			}
		}
	}
	if got := fortranToC(src, shape); !slices.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

func TestFirstNonFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(-1))
	big := make([]float32, 3<<20)
	tests := []struct {
		name string
		v    []float32
		at   int
		want int
	}{
		{"clean", make([]float32, 10), -1, -1},
		{"nan head", make([]float32, 10), 0, 0},
		{"inf tail", make([]float32, 11), 10, 10},
		{"big clean", big, -1, -1},
		{"big late", big, len(big) - 3, len(big) - 3},
		{"big early", big, 5, 5},
	}
	for _, tt := range tests {
		v := slices.Clone(tt.v)
		if tt.at >= 0 {
			v[tt.at] = nan
			if tt.at%2 == 0 {
				v[tt.at] = inf
			}
		}
		if got := parallelFirstNonFinite(v); got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, got, tt.want)
		}
	}
	// The largest finite float32 is finite.
	if got := firstNonFinite([]float32{math.MaxFloat32, -math.MaxFloat32}); got != -1 {
		t.Errorf("MaxFloat32 reported non-finite at %d", got)
	}
}

func TestFirstNonFiniteEveryPosition(t *testing.T) {
	buf := make([]float32, 80)
	for off := range 2 { // aligned and unaligned starts
		for n := range 70 {
			v := buf[off : off+n]
			if got := firstNonFinite(v); got != -1 {
				t.Fatalf("off %d n %d clean: %d", off, n, got)
			}
			for p := range n {
				for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
					v[p] = bad
					if p+3 < n {
						v[p+3] = bad
					}
					if got := firstNonFinite(v); got != p {
						t.Fatalf("off %d n %d bad at %d: got %d", off, n, p, got)
					}
					clear(v)
				}
			}
		}
	}
}

package npy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbinet/npyio"
)

// npyBytes returns an .npy stream with the given header dict, written
// verbatim with format version 1.0, and data.
func npyBytes(dict string, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString(magic + "\x01\x00")
	h := dict + "\n"
	binary.Write(&b, binary.LittleEndian, uint16(len(h)))
	b.WriteString(h)
	b.Write(data)
	return b.Bytes()
}

// dictFor returns a header dict as numpy writes it.
func dictFor(descr string, fortran bool, shape string) string {
	f := "False"
	if fortran {
		f = "True"
	}
	return fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, f, shape)
}

// floats encodes v as the data of a float array of the given dtype.
func floats(descr string, v ...float32) []byte {
	d, err := ParseDType(descr)
	if err != nil || d.Kind != 'f' || d.Size == 2 {
		panic(fmt.Sprintf("floats: dtype %q", descr))
	}
	o := d.order().(binary.AppendByteOrder)
	var b []byte
	for _, x := range v {
		if d.Size == 4 {
			b = o.AppendUint32(b, math.Float32bits(x))
		} else {
			b = o.AppendUint64(b, math.Float64bits(float64(x)))
		}
	}
	return b
}

// encode returns the .npy stream Write writes.
func encode[T Element](shape []int, data []T) []byte {
	var b bytes.Buffer
	if err := Write(&b, shape, data); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// readStream reads an .npy stream fully as float32, as a Reader does.
func readStream(b []byte) ([]int, []float32, error) {
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, nil, err
	}
	v, err := r.ReadFloat32()
	return r.Header.Shape, v, err
}

// wantErr fails unless err is non-nil and contains every fragment.
func wantErr(t *testing.T, err error, frags ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", frags)
	}
	for _, f := range frags {
		if !strings.Contains(err.Error(), f) {
			t.Fatalf("error %q does not contain %q", err, f)
		}
	}
}

func TestParseDType(t *testing.T) {
	tests := []struct {
		descr string
		want  DType
		name  string
		back  string // Descr of the result
	}{
		{"<f4", DType{'f', 4, false}, "float32", "<f4"},
		{">f8", DType{'f', 8, true}, "float64", ">f8"},
		{"<f2", DType{'f', 2, false}, "float16", "<f2"},
		{"|i1", DType{'i', 1, false}, "int8", "|i1"},
		{">u1", DType{'u', 1, false}, "uint8", "|u1"},
		{"<i8", DType{'i', 8, false}, "int64", "<i8"},
		{">u2", DType{'u', 2, true}, "uint16", ">u2"},
		{"|b1", DType{'b', 1, false}, "bool", "|b1"},
		{"f4", DType{'f', 4, false}, "float32", "<f4"},
	}
	for _, tt := range tests {
		d, err := ParseDType(tt.descr)
		if err != nil || d != tt.want || d.String() != tt.name || d.Descr() != tt.back {
			t.Errorf("ParseDType(%q) = %+v (%s, %s), %v; want %+v (%s, %s)", tt.descr, d, d, d.Descr(), err, tt.want, tt.name, tt.back)
		}
	}
	for _, bad := range []string{"", "<", "<f3", "<f16", "<U8", "|O", "<c8", "<b2", "V8", "<M8"} {
		if _, err := ParseDType(bad); err == nil {
			t.Errorf("ParseDType(%q) accepted", bad)
		}
	}
}

func TestReadStream(t *testing.T) {
	six := []float32{1, 2, 3, 4, 5, 6}
	tests := []struct {
		name  string
		file  []byte
		shape []int
		want  []float32
	}{
		{"f4 C", npyBytes(dictFor("<f4", false, "(2, 3)"), floats("<f4", six...)), []int{2, 3}, six},
		{"no trailing comma", npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", floats("<f4", six...)), []int{2, 3}, six},
		{"keys in any order", npyBytes("{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}", floats("<f4", six...)), []int{2, 3}, six},
		{"double quotes, spaces", npyBytes(`{ "descr" : "<f4" , "fortran_order" : False , "shape" : ( 2 , 3 , ) , }`, floats("<f4", six...)), []int{2, 3}, six},
		{"python 2 longs", npyBytes(dictFor("<f4", false, "(2L, 3L)"), floats("<f4", six...)), []int{2, 3}, six},
		{"1-d", npyBytes(dictFor("<f4", false, "(6,)"), floats("<f4", six...)), []int{6}, six},
		{"scalar", npyBytes(dictFor("<f4", false, "()"), floats("<f4", 7)), []int{}, []float32{7}},
		{"empty", npyBytes(dictFor("<f4", false, "(0, 36, 2048)"), nil), []int{0, 36, 2048}, []float32{}},
		{"big-endian", npyBytes(dictFor(">f4", false, "(2, 3)"), floats(">f4", six...)), []int{2, 3}, six},
		{"float64", npyBytes(dictFor("<f8", false, "(2, 3)"), floats("<f8", six...)), []int{2, 3}, six},
		{"float16", npyBytes(dictFor("<f2", false, "(3,)"), []byte{0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38}), []int{3}, []float32{1, -2, 0.5}},
		// Fortran order: column-major (2,3) [[1,2,3],[4,5,6]] is 1,4,2,5,3,6.
		{"fortran", npyBytes(dictFor("<f4", true, "(2, 3)"), floats("<f4", 1, 4, 2, 5, 3, 6)), []int{2, 3}, six},
		{"written", encode([]int{2, 3}, six), []int{2, 3}, six},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shape, got, err := readStream(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(shape, tt.shape) || !slices.Equal(got, tt.want) {
				t.Fatalf("got %v %v, want %v %v", shape, got, tt.shape, tt.want)
			}
		})
	}
}

func TestReadInts(t *testing.T) {
	tests := []struct {
		name string
		file []byte
		want []int
	}{
		{"int32", encode([]int{3}, []int32{1, -1, 1 << 30}), []int{1, -1, 1 << 30}},
		{"int8", npyBytes(dictFor("|i1", false, "(2,)"), []byte{0x7f, 0x80}), []int{127, -128}},
		{"uint8", npyBytes(dictFor("|u1", false, "(2,)"), []byte{0x7f, 0x80}), []int{127, 128}},
		{"int16 big", npyBytes(dictFor(">i2", false, "(2,)"), []byte{0xff, 0xfe, 0x01, 0x00}), []int{-2, 256}},
		{"uint32", npyBytes(dictFor("<u4", false, "(1,)"), []byte{0xff, 0xff, 0xff, 0xff}), []int{1<<32 - 1}},
		{"int64", npyBytes(dictFor("<i8", false, "(2,)"), []byte{2, 0, 0, 0, 0, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), []int{2, -2}},
		{"bool", npyBytes(dictFor("|b1", false, "(3,)"), []byte{0, 1, 7}), []int{0, 1, 1}},
		{"fortran", npyBytes(dictFor("|i1", true, "(2, 3)"), []byte{1, 4, 2, 5, 3, 6}), []int{1, 2, 3, 4, 5, 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.ReadInts()
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestReadVersions(t *testing.T) {
	for _, major := range []byte{2, 3} {
		dict := dictFor("<f4", false, "(2,)") + "\n"
		var b bytes.Buffer
		b.WriteString(magic)
		b.Write([]byte{major, 0})
		binary.Write(&b, binary.LittleEndian, uint32(len(dict)))
		b.WriteString(dict)
		b.Write(floats("<f4", 1, 2))
		shape, v, err := readStream(b.Bytes())
		if err != nil || !slices.Equal(shape, []int{2}) || !slices.Equal(v, []float32{1, 2}) {
			t.Fatalf("version %d: %v %v %v", major, shape, v, err)
		}
	}
}

func TestReadErrors(t *testing.T) {
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
		{"unknown key", npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", nil), `unknown key "x"`},
		{"key twice", npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'descr': '<f4'}", nil), `"descr" given twice`},
		{"unquoted key", npyBytes("{descr: '<f4'}", nil), "quoted key"},
		{"no colon", npyBytes("{'descr' '<f4'}", nil), "want ':'"},
		{"no comma", npyBytes("{'descr': '<f4' 'fortran_order': False}", nil), "want ',' or '}'"},
		{"text after", npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} }", nil), "text after"},
		{"unterminated string", npyBytes("{'descr': '<f4}", nil), "quoted string"},
		{"bad order value", npyBytes("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", nil), "fortran_order"},
		{"order prefix", npyBytes("{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,), }", nil), "fortran_order"},
		{"dtype", npyBytes(dictFor("<U8", false, "(2,)"), nil), `unsupported dtype "<U8"`},
		{"object", npyBytes(dictFor("|O", false, "(2,)"), nil), "unsupported dtype"},
		{"negative", npyBytes(dictFor("<f4", false, "(-2, 3)"), nil), "negative dimension in shape (-2,3)"},
		{"huge shape", npyBytes(dictFor("<f4", false, "(100000000, 100000000, 100000000)"), nil), "too large"},
		{"huge dimension", npyBytes(dictFor("<f4", false, "(1000000000000000000000,)"), nil), "bad dimension"},
		{"many dimensions", npyBytes(dictFor("<f4", false, "("+strings.Repeat("1, ", 65)+")"), nil), "more than 64 dimensions"},
		{"bad shape", npyBytes(dictFor("<f4", false, "(2, x)"), nil), "bad .npy header"},
		{"shape not a tuple", npyBytes(dictFor("<f4", false, "[2, 3]"), nil), "shape: not a tuple"},
		{"truncated data", npyBytes(dictFor("<f4", false, "(2, 3)"), floats("<f4", 1, 2, 3)), "truncated: header says (2,3) float32 = 24 bytes of data, file has 12"},
		{"ints as floats", npyBytes(dictFor("<i4", false, "(2,)"), make([]byte, 8)), "dtype <i4 (int32): want float16, float32 or float64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := readStream(tt.file)
			wantErr(t, err, tt.frag)
		})
	}
	r, err := NewReader(bytes.NewReader(encode([]int{1}, []float32{1})))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.ReadInts()
	wantErr(t, err, "dtype <f4 (float32): want an integer type")
}

func TestHeaderBytes(t *testing.T) {
	tests := []struct {
		h    Header
		dict string
	}{
		{Header{DType: Float32, Shape: []int{5000, 36, 2048}}, "{'descr': '<f4', 'fortran_order': False, 'shape': (5000, 36, 2048), }"},
		{Header{DType: Int32, Shape: []int{7}}, "{'descr': '<i4', 'fortran_order': False, 'shape': (7,), }"},
		{Header{DType: DType{'f', 8, true}, Fortran: true, Shape: []int{2, 3}}, "{'descr': '>f8', 'fortran_order': True, 'shape': (2, 3), }"},
		{Header{DType: DType{'b', 1, false}}, "{'descr': '|b1', 'fortran_order': False, 'shape': (), }"},
	}
	for _, tt := range tests {
		b := tt.h.Bytes()
		if len(b)%64 != 0 || string(b[:8]) != magic+"\x01\x00" || int(binary.LittleEndian.Uint16(b[8:])) != len(b)-10 {
			t.Errorf("%s: header %q is not a 64-byte aligned version 1.0 header", tt.h, b)
		}
		if got := strings.TrimRight(string(b[10:]), " \n"); got != tt.dict || b[len(b)-1] != '\n' {
			t.Errorf("%s: dict %q, want %q", tt.h, got, tt.dict)
		}
		r, err := NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", tt.h, err)
		}
		if got := r.Header; got.DType != tt.h.DType || got.Fortran != tt.h.Fortran || !slices.Equal(got.Shape, tt.h.Shape) {
			t.Errorf("%s: reads back as %+v", tt.h, got)
		}
	}
	// A dictionary too long for format 1.0 gets format 2.0.
	long := Header{DType: Float32, Shape: slices.Repeat([]int{1 << 40}, 6000)}
	b := long.Bytes()
	if string(b[6:8]) != "\x02\x00" || len(b)%64 != 0 || int(binary.LittleEndian.Uint32(b[8:])) != len(b)-12 {
		t.Errorf("long header: version %d.%d, %d bytes", b[6], b[7], len(b))
	}
}

func TestFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.npy")
	data := make([]float32, 4*3*5)
	for i := range data {
		data[i] = float32(i) - 7.5
	}
	if err := WriteFile(p, []int{4, 3, 5}, data); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(p)
	if off := len(raw) - 4*len(data); off%64 != 0 {
		t.Errorf("data starts at byte %d, not 64-aligned", off)
	}
	for _, read := range []func(string) (*Array, error){Read, Map} {
		a, err := read(p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Shape, []int{4, 3, 5}) || !slices.Equal(a.Data, data) {
			t.Fatalf("round trip: %v %v", a.Shape, a.Data[:5])
		}
		// Writes to a mapped array stay private.
		a.Data[0] = 42
		b, err := Read(p)
		if err != nil {
			t.Fatal(err)
		}
		if b.Data[0] != data[0] {
			t.Fatalf("write to mapped data reached the file: %v", b.Data[0])
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if a, _ := Read(p); a.Mapped() {
		t.Error("Read mapped the file")
	}
	if a, _ := Map(p); !a.Mapped() && hostLE {
		t.Log("not memory-mapped on this platform")
	}

	// A File reads its data as often as asked.
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 2 {
		if v, err := f.ReadFloat32(); err != nil || !slices.Equal(v, data) {
			t.Fatalf("ReadFloat32: %v", err)
		}
	}
	_, err = f.ReadInts()
	wantErr(t, err, p, "want an integer type")

	if err := WriteFile(p, []int{4, 4}, data); err == nil {
		t.Fatal("WriteFile accepted a shape that disagrees with the data")
	}
	if err := WriteFile(p, []int{-4, -15}, data); err == nil {
		t.Fatal("WriteFile accepted negative dimensions")
	}
	q := filepath.Join(dir, "i.npy")
	if err := WriteFile(q, []int{2, 2}, []int32{1, -2, 3, math.MaxInt32}); err != nil {
		t.Fatal(err)
	}
	g, err := Open(q)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if v, err := g.ReadInts(); err != nil || !slices.Equal(v, []int{1, -2, 3, math.MaxInt32}) || g.Header.String() != "(2,2) int32" {
		t.Fatalf("int32 round trip: %s %v %v", g.Header, v, err)
	}
	_, err = g.ReadFloat32()
	wantErr(t, err, q, "dtype <i4 (int32): want float16, float32 or float64")
}

// TestNpyio checks that github.com/sbinet/npyio, an independent
// implementation, reads what Write writes and that Read reads what it
// writes.
func TestNpyio(t *testing.T) {
	data := []float32{1.5, -2, 3, 4, 5, 6}
	var v []float32
	if err := npyio.Read(bytes.NewReader(encode([]int{2, 3}, data)), &v); err != nil || !slices.Equal(v, data) {
		t.Fatalf("npyio cannot read Write's output: %v %v", v, err)
	}
	var buf bytes.Buffer
	if err := npyio.Write(&buf, data); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "b.npy")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := Map(p)
	if err != nil || !slices.Equal(a.Data, data) {
		t.Fatalf("cannot read npyio's output: %v", err)
	}
	a.Close()
}

func TestFileErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		file []byte
		frag string
	}{
		{"truncated", npyBytes(dictFor("<f4", false, "(5000, 36, 2048)"), floats("<f4", 1, 2, 3)), "truncated: header says (5000,36,2048) float32 = 1474560000 bytes of data, file has 12"},
		{"trailing", npyBytes(dictFor("<f4", false, "(1,)"), floats("<f4", 1, 2)), "trailing garbage"},
		{"ints", npyBytes(dictFor("<i8", false, "(1,)"), make([]byte, 8)), "dtype <i8 (int64)"},
		{"not npy", []byte("hello"), "not an .npy file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, tt.name+".npy")
			if err := os.WriteFile(p, tt.file, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, read := range []func(string) (*Array, error){Read, Map} {
				_, err := read(p)
				wantErr(t, err, "read "+p+": ", tt.frag)
			}
		})
	}
	_, err := Read(filepath.Join(dir, "absent.npy"))
	wantErr(t, err, "read "+filepath.Join(dir, "absent.npy")+": open: ", "no such file")
	_, err = Read(dir)
	wantErr(t, err, "read "+dir+": ")
}

func TestWriteBigEndianHost(t *testing.T) {
	// Write swaps bytes on big-endian machines; check that path here.
	defer func(le bool) { hostLE = le }(hostLE)
	hostLE = false
	var b bytes.Buffer
	if err := Write(&b, []int{2}, []float32{1, -2}); err != nil {
		t.Fatal(err)
	}
	want := append(Header{DType: Float32, Shape: []int{2}}.Bytes(), floats(">f4", 1, -2)...)
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("got % x\nwant % x", b.Bytes(), want)
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

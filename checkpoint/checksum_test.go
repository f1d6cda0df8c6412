package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// finiteSample is sample without its infinite value.
func finiteSample() []Entry {
	s := sample()
	s[1].Data = []float32{1, -2, 3}
	return s
}

// dataOffset returns where tensor name's data starts in a file.
func dataOffset(t *testing.T, file []byte, name string) int {
	t.Helper()
	h, err := parseHeader(file, int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	return int(h.dataStart + h.infos[name].Begin)
}

// TestCorruptionDetected damages saved files as a disk, a copy or a
// careless edit would: every damage to a tensor's data is an error naming
// the tensor, from LoadInto, Tensor and Verify alike.
func TestCorruptionDetected(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, finiteSample(), map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	nan := math.Float32bits(float32(math.NaN()))
	cases := []struct {
		name   string
		damage func(b []byte)
		tensor string
		want   string
	}{
		{"one bit flipped", func(b []byte) { b[dataOffset(t, b, "txt_enc.fc.weight")+1234] ^= 0x10 }, "txt_enc.fc.weight", "is corrupt: CRC-32C"},
		{"sixteen finite weights overwritten", func(b []byte) {
			off := dataOffset(t, b, "txt_enc.fc.weight")
			for i := range 16 {
				binary.LittleEndian.PutUint32(b[off+4*i*37:], math.Float32bits(0.25))
			}
		}, "txt_enc.fc.weight", "is corrupt"},
		{"a weight set to NaN", func(b []byte) { binary.LittleEndian.PutUint32(b[dataOffset(t, b, "img_enc.fc.bias")+4:], nan) }, "img_enc.fc.bias", "is corrupt"},
		{"scalar zeroed", func(b []byte) { clear(b[dataOffset(t, b, "scale"):][:4]) }, "scale", "is corrupt"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := bytes.Clone(good)
			c.damage(b)
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".safetensors")
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := Open(path)
			if err != nil {
				t.Fatalf("Open: %v (the header is intact)", err)
			}
			defer f.Close()
			want := []Entry{}
			for _, e := range finiteSample() {
				want = append(want, Entry{Name: e.Name, Shape: e.Shape, Data: make([]float32, len(e.Data))})
			}
			_, _, terr := f.Tensor(c.tensor)
			for what, err := range map[string]error{"LoadInto": f.LoadInto(want, LoadOptions{}), "Tensor": terr, "Verify": f.Verify()} {
				if err == nil || !strings.Contains(err.Error(), `"`+c.tensor+`" is corrupt`) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
					t.Errorf("%s: %v; want an error naming the file and tensor %q", what, err, c.tensor)
				}
			}
			for _, e := range want {
				for _, v := range e.Data {
					if v != 0 {
						t.Fatalf("LoadInto wrote %s despite the error", e.Name)
					}
				}
			}
		})
	}
}

// TestNoChecksums reads files without checksums, as other tools and xmr
// before checksums write them: they load, unverified, but NaN and infinite
// weights are still refused.
func TestNoChecksums(t *testing.T) {
	hdr := `{"__metadata__":{"format":"xmr-model/2"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`
	var data []byte
	data = binary.LittleEndian.AppendUint32(data, math.Float32bits(1))
	data = binary.LittleEndian.AppendUint32(data, math.Float32bits(2))
	data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(math.NaN())))
	f, err := newFile("old.safetensors", handFile(hdr, data))
	if err != nil {
		t.Fatal(err)
	}
	if f.HasChecksums() || f.Verify() != nil {
		t.Fatalf("HasChecksums %v, Verify %v", f.HasChecksums(), f.Verify())
	}
	a := []Entry{{Name: "a", Shape: []int{2}, Data: make([]float32, 2)}}
	if err := f.LoadInto(a, LoadOptions{AllowUnexpected: true}); err != nil || a[0].Data[1] != 2 {
		t.Fatalf("LoadInto: %v %v", a[0].Data, err)
	}
	err = f.LoadInto([]Entry{{Name: "b", Shape: []int{1}, Data: make([]float32, 1)}}, LoadOptions{AllowUnexpected: true})
	if err == nil || !strings.Contains(err.Error(), `tensor "b": element 0 is NaN; weights must be finite`) {
		t.Fatalf("NaN weight: %v", err)
	}
}

func TestBadChecksumMetadata(t *testing.T) {
	f32 := make([]byte, 4)
	cases := []struct{ meta, want string }{
		{`"crc32c":"[1]"`, "want a JSON object"},
		{`"crc32c":"{\"a\":\"xyz\"}"`, `"a": "xyz" is not 8 hex digits`},
		{`"crc32c":"{\"a\":\"0000000g\"}"`, `is not 8 hex digits`},
		{`"crc32c":"{}"`, `tensor "a": no checksum`},
		{`"crc32c":"{\"a\":\"00000000\",\"b\":\"00000000\"}"`, `checksum of tensor "b", which the file lacks`},
	}
	for _, c := range cases {
		_, err := newFile("x", handFile(`{"__metadata__":{`+c.meta+`},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32))
		if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.meta, err, c.want)
		}
	}
}

func TestChecksums(t *testing.T) {
	if got := CRC32C([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("CRC32C check value %08x, want e3069283", got)
	}
	c := Checksums{"x": 0xe3069283, "a": 1}
	s := c.Marshal()
	if s != `{"a":"00000001","x":"e3069283"}` {
		t.Fatalf("Marshal = %s", s)
	}
	back, err := ParseChecksums(s)
	if err != nil || len(back) != 2 || back["x"] != 0xe3069283 {
		t.Fatalf("ParseChecksums = %v, %v", back, err)
	}
	if err := back.Verify("x", []byte("123456789")); err != nil {
		t.Fatal(err)
	}
	if err := back.Verify("x", []byte("123456780")); err == nil || !strings.Contains(err.Error(), `"x" is corrupt`) {
		t.Fatalf("Verify of changed bytes: %v", err)
	}
	if err := back.Verify("y", nil); err == nil {
		t.Fatal("Verify of an unknown name succeeded")
	}
}

package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/internal/half"
	"github.com/xmr-project/xmr/tools"
)

func sample() []Entry {
	big := make([]float32, 3*1000)
	for i := range big {
		big[i] = float32(math.Sin(float64(i)))
	}
	return []Entry{
		{Name: "txt_enc.fc.weight", Shape: []int{3, 1000}, Data: big},
		{Name: "img_enc.fc.bias", Shape: []int{3}, Data: []float32{1, -2, float32(math.Inf(1))}},
		{Name: "scale", Shape: []int{}, Data: []float32{0.5}},
		{Name: "empty", Shape: []int{0, 4}, Data: []float32{}},
	}
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "best.safetensors")
	cfg := `{"model": "teran", "embed": 1024}`
	if err := Save(path, sample(), map[string]string{metaTestConfig: cfg, "epoch": "3"}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, want := f.Names(), []string{"empty", "img_enc.fc.bias", "scale", "txt_enc.fc.weight"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	if got := f.Metadata(); got[metaTestConfig] != cfg || got["epoch"] != "3" || got[MetaChecksums] == "" || len(got) != 3 {
		t.Fatalf("Metadata() = %v", got)
	}
	if !f.HasChecksums() || f.Verify() != nil {
		t.Fatalf("HasChecksums %v, Verify %v", f.HasChecksums(), f.Verify())
	}
	for _, e := range sample() {
		data, shape, err := f.Tensor(e.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(shape, e.Shape) || !reflect.DeepEqual(data, e.Data) {
			t.Fatalf("%s: got %v %v, want %v %v", e.Name, shape, data[:min(len(data), 4)], e.Shape, e.Data[:min(len(e.Data), 4)])
		}
		in, ok := f.Info(e.Name)
		if !ok || in.DType != "F32" || in.Numel() != len(e.Data) {
			t.Fatalf("Info(%s) = %+v, %v", e.Name, in, ok)
		}
	}
	// LoadInto fills buffers of the model, but refuses the infinite bias.
	want := sample()
	for _, e := range want {
		clear(e.Data)
	}
	err = f.LoadInto(want, LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), `tensor "img_enc.fc.bias": element 2 is +Inf; weights must be finite`) {
		t.Fatalf("LoadInto of an infinite weight: %v", err)
	}
	want = append(want[:1], want[2:]...)
	if err := f.LoadInto(want, LoadOptions{AllowUnexpected: true}); err != nil {
		t.Fatal(err)
	}
	if finite := sample(); !reflect.DeepEqual(want, append(finite[:1], finite[2:]...)) {
		t.Fatal("LoadInto did not restore the tensors")
	}
	if _, _, err := f.Tensor("nope"); err == nil || !strings.Contains(err.Error(), `no tensor "nope"`) {
		t.Fatalf("missing tensor: %v", err)
	}
	// Load is Open + LoadInto + Metadata.
	meta, err := Load(path, want[:1], LoadOptions{AllowUnexpected: true})
	if err != nil || meta[metaTestConfig] != cfg {
		t.Fatalf("Load: %v, %v", meta, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Tensor("scale"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Tensor after Close: %v", err)
	}
}

// TestByteExact pins the bytes Write produces: the same as Python's
// safetensors writes for F32 tensors (compact JSON, metadata first, tensors
// in order, space padding).
func TestByteExact(t *testing.T) {
	var buf bytes.Buffer
	err := Write(&buf, []Entry{{Name: "b", Shape: []int{2}, Data: []float32{1, -2}}, {Name: "a", Shape: []int{}, Data: []float32{0.5}}}, map[string]string{"config": "x"})
	if err != nil {
		t.Fatal(err)
	}
	// The checksums are CRC-32C of 0.5 and of 1, -2 (little-endian float32),
	// computed by a bitwise implementation of the Castagnoli polynomial.
	hdr := `{"__metadata__":{"config":"x","crc32c":"{\"a\":\"26973e52\",\"b\":\"aa36f2c9\"}"},"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`
	for len(hdr)%8 != 0 {
		hdr += " "
	}
	var want []byte
	want = binary.LittleEndian.AppendUint64(want, uint64(len(hdr)))
	want = append(want, hdr...)
	for _, v := range []float32{0.5, 1, -2} {
		want = binary.LittleEndian.AppendUint32(want, math.Float32bits(v))
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("Write produced\n%q\nwant\n%q", buf.Bytes(), want)
	}
}

// handFile builds a file per the specification from a header written by
// hand and raw data.
func handFile(header string, data []byte) []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

func le16(vs ...uint16) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint16(b, v)
	}
	return b
}

func TestHalfPrecisionAndOtherDTypes(t *testing.T) {
	// Key order, spacing, metadata position and an unpadded header as other
	// writers may produce them; unknown fields are ignored.
	hdr := `{ "h": {"dtype": "F16", "shape": [2, 4], "data_offsets": [0, 16]},
	  "ids": {"shape": [2], "dtype": "I64", "data_offsets": [16, 32]},
	  "bf": {"dtype": "BF16", "shape": [3], "data_offsets": [32, 38], "extra": 1},
	  "d": {"dtype": "F64", "shape": [1], "data_offsets": [38, 46]},
	  "__metadata__": {"format": "pt"} }`
	var data []byte
	// 1, -2, 1/3 rounded, smallest subnormal, largest finite, +Inf, -0, 0.5
	data = append(data, le16(0x3C00, 0xC000, 0x3555, 0x0001, 0x7BFF, 0x7C00, 0x8000, 0x3800)...)
	data = binary.LittleEndian.AppendUint64(data, 7)
	data = binary.LittleEndian.AppendUint64(data, 1<<40)
	data = append(data, le16(0x3F80, 0xC040, 0x4049)...) // 1, -3, 3.140625
	data = binary.LittleEndian.AppendUint64(data, math.Float64bits(0.1))
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(path, handFile(hdr, data), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Metadata()["format"] != "pt" {
		t.Fatalf("metadata %v", f.Metadata())
	}
	h, shape, err := f.Tensor("h")
	if err != nil {
		t.Fatal(err)
	}
	wantH := []float32{1, -2, 0.333251953125, float32(math.Ldexp(1, -24)), 65504, float32(math.Inf(1)), float32(math.Copysign(0, -1)), 0.5}
	if !reflect.DeepEqual(shape, []int{2, 4}) || !reflect.DeepEqual(h, wantH) || !math.Signbit(float64(h[6])) {
		t.Fatalf("F16: %v %v, want %v", shape, h, wantH)
	}
	if bf, _, err := f.Tensor("bf"); err != nil || !reflect.DeepEqual(bf, []float32{1, -3, 3.140625}) {
		t.Fatalf("BF16: %v, %v", bf, err)
	}
	if d, _, err := f.Tensor("d"); err != nil || d[0] != float32(0.1) {
		t.Fatalf("F64: %v, %v", d, err)
	}
	if _, _, err := f.Tensor("ids"); err == nil || !strings.Contains(err.Error(), `tensor "ids": dtype I64 cannot be read as float32`) {
		t.Fatalf("I64: %v", err)
	}
	// A BERT-style load: rename, skip the integer buffer; the infinite
	// value of h is refused.
	w := []Entry{{Name: "half", Shape: []int{2, 4}, Data: make([]float32, 8)}, {Name: "bf", Shape: []int{3}, Data: make([]float32, 3)}}
	rename := func(n string) string {
		switch n {
		case "h":
			return "half"
		case "ids":
			return ""
		}
		return n
	}
	err = f.LoadInto(w, LoadOptions{Rename: rename, AllowUnexpected: true})
	if err == nil || !strings.Contains(err.Error(), `tensor "h" (model name "half"): element 5 is +Inf`) {
		t.Fatalf("LoadInto of an infinite F16 value: %v", err)
	}
	if err := f.LoadInto(w[1:], LoadOptions{Rename: rename, AllowUnexpected: true}); err != nil {
		t.Fatal(err)
	}
	if w[1].Data[2] != 3.140625 {
		t.Fatalf("LoadInto: %v", w[1].Data)
	}
	err = f.LoadInto([]Entry{{Name: "ids", Shape: []int{2}, Data: make([]float32, 2)}}, LoadOptions{AllowUnexpected: true})
	if err == nil || !strings.Contains(err.Error(), `tensor "ids": dtype I64 cannot be read as float32`) {
		t.Fatalf("loading I64: %v", err)
	}
}

func TestF16AllValuesAgainstNumPy(t *testing.T) {
	py, err := tools.FindPython(context.Background(), "", "numpy")
	if err != nil {
		t.Skipf("skipping (Debian: apt-get install python3-numpy): %v", err)
	}
	script := `import sys, numpy as np
sys.stdout.buffer.write(np.arange(65536, dtype=np.uint16).view(np.float16).astype('<f4').tobytes())`
	out, err := exec.Command(py, "-c", script).Output()
	if err != nil {
		t.Fatalf("%s: %v", py, err)
	}
	if len(out) != 4*65536 {
		t.Fatalf("numpy wrote %d bytes", len(out))
	}
	for h := range 65536 {
		want := binary.LittleEndian.Uint32(out[4*h:])
		got := math.Float32bits(half.ToFloat32(uint16(h)))
		isNaN := math.IsNaN(float64(math.Float32frombits(want)))
		if got != want && !(isNaN && math.IsNaN(float64(math.Float32frombits(got)))) {
			t.Fatalf("half.ToFloat32(%#04x) = %#08x, numpy %#08x", h, got, want)
		}
	}
}

// TestPythonSafetensors exchanges files with Python's safetensors package
// when it is installed.
func TestPythonSafetensors(t *testing.T) {
	py, err := tools.FindPython(context.Background(), "", "safetensors.numpy", "numpy")
	if err != nil {
		t.Skipf("skipping (pip install safetensors to run this check): %v", err)
	}
	dir := t.TempDir()
	ours := filepath.Join(dir, "ours.safetensors")
	if err := Save(ours, sample(), map[string]string{metaTestConfig: "c"}); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(dir, "theirs.safetensors")
	script := `import sys, numpy as np
from safetensors.numpy import load_file, save_file
from safetensors import safe_open
t = load_file(sys.argv[1])
assert t["img_enc.fc.bias"].tolist()[:2] == [1.0, -2.0], t
assert t["txt_enc.fc.weight"].shape == (3, 1000)
with safe_open(sys.argv[1], "np") as f:
    assert f.metadata()["config"] == "c", f.metadata()
save_file({"w": np.array([[1, 2], [3, 4]], dtype=np.float16), "b": np.array([0.25], dtype=np.float32)}, sys.argv[2], metadata={"k": "v"})
`
	exchangeWithPython(t, py, script, ours, theirs)
}

// exchangeWithPython runs a Python script that checks the file ours (the
// sample, metadata config "c") and writes theirs: w, F16 [[1, 2], [3, 4]],
// b, F32 [0.25], metadata k = v; then it reads theirs back.
func exchangeWithPython(t *testing.T, py, script, ours, theirs string) {
	t.Helper()
	if out, err := exec.Command(py, "-c", script, ours, theirs).CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	f, err := Open(theirs)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, shape, err := f.Tensor("w")
	if err != nil || !reflect.DeepEqual(w, []float32{1, 2, 3, 4}) || !reflect.DeepEqual(shape, []int{2, 2}) || f.Metadata()["k"] != "v" {
		t.Fatalf("reading Python's file: %v %v %v %v", w, shape, f.Metadata(), err)
	}
	b, _, err := f.Tensor("b")
	if err != nil || !reflect.DeepEqual(b, []float32{0.25}) {
		t.Fatalf("tensor b: %v %v", b, err)
	}
}

// TestNumpySafetensorsSpec exchanges files with a second implementation of
// the safetensors layout, written in Python over numpy from the published
// format (little-endian u64 header size, JSON header with dtype, shape and
// data_offsets per tensor and string __metadata__, then the data): it runs
// wherever numpy does (scripts/test installs Debian's python3-numpy), unlike
// TestPythonSafetensors, whose package Debian does not ship.
func TestNumpySafetensorsSpec(t *testing.T) {
	py, err := tools.FindPython(context.Background(), "", "numpy")
	if err != nil {
		t.Skipf("skipping (Debian: apt-get install python3-numpy): %v", err)
	}
	dir := t.TempDir()
	ours := filepath.Join(dir, "ours.safetensors")
	if err := Save(ours, sample(), map[string]string{metaTestConfig: "c"}); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(dir, "theirs.safetensors")
	script := `import sys, json, struct, numpy as np
DT = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "BF16": None}
def load(path):
    b = open(path, "rb").read()
    (n,) = struct.unpack("<Q", b[:8])
    h = json.loads(b[8:8+n].decode("utf-8"))
    meta = h.pop("__metadata__", {})
    data = b[8+n:]
    out = {}
    for name, t in h.items():
        lo, hi = t["data_offsets"]
        out[name] = np.frombuffer(data[lo:hi], dtype=DT[t["dtype"]]).reshape(t["shape"])
    return out, meta
def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF
t, meta = load(sys.argv[1])
assert meta["config"] == "c" and set(meta) == {"config", "crc32c"}, meta
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
hdr = json.loads(raw[8:8+n])
sums = json.loads(meta["crc32c"])
assert set(sums) == set(t), sums
for name, e in hdr.items():
    if name == "__metadata__":
        continue
    lo, hi = e["data_offsets"]
    assert sums[name] == "%08x" % crc32c(raw[8+n+lo:8+n+hi]), (name, sums[name])
assert t["img_enc.fc.bias"].tolist()[:2] == [1.0, -2.0] and np.isinf(t["img_enc.fc.bias"][2]), t["img_enc.fc.bias"]
assert t["txt_enc.fc.weight"].shape == (3, 1000)
assert np.allclose(t["txt_enc.fc.weight"].ravel(), np.sin(np.arange(3000)).astype(np.float32))
assert t["scale"].shape == () and t["scale"] == 0.5
assert t["empty"].shape == (0, 4)
w = np.array([[1, 2], [3, 4]], dtype="<f2").tobytes()
b = np.array([0.25], dtype="<f4").tobytes()
h = {"w": {"dtype": "F16", "shape": [2, 2], "data_offsets": [0, len(w)]},
     "b": {"dtype": "F32", "shape": [1], "data_offsets": [len(w), len(w) + len(b)]},
     "__metadata__": {"k": "v"}}
hb = json.dumps(h).encode()
hb += b" " * ((8 - len(hb) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + w + b)
`
	exchangeWithPython(t, py, script, ours, theirs)
}

func TestCorruptHeaders(t *testing.T) {
	f32 := func(n int) []byte { return make([]byte, 4*n) }
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "too short"},
		{"huge-length", binary.LittleEndian.AppendUint64(nil, 1<<40), "exceeds the limit"},
		{"length-past-end", append(binary.LittleEndian.AppendUint64(nil, 100), "{}"...), "truncated file?"},
		{"not-json", handFile(`{"a": `, nil), "header JSON"},
		{"not-object", handFile(`[1, 2]   `, nil), "not a JSON object"},
		{"empty-header", handFile(``, nil), "not a JSON object"},
		{"bad-utf8", handFile("{\"\xff\": 1}", nil), "UTF-8"},
		{"trailing", handFile(`{} {}`, nil), "data after the object"},
		{"unknown-dtype", handFile(`{"a":{"dtype":"F13","shape":[1],"data_offsets":[0,4]}}`, f32(1)), `tensor "a": unknown dtype "F13"`},
		{"no-dtype", handFile(`{"a":{"shape":[1],"data_offsets":[0,4]}}`, f32(1)), `tensor "a": no dtype`},
		{"no-shape", handFile(`{"a":{"dtype":"F32","data_offsets":[0,4]}}`, f32(1)), `tensor "a": no shape`},
		{"no-offsets", handFile(`{"a":{"dtype":"F32","shape":[1]}}`, f32(1)), `tensor "a": no data_offsets`},
		{"three-offsets", handFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`, f32(1)), "must hold two numbers"},
		{"reversed-offsets", handFile(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, f32(1)), "not an interval"},
		{"negative-dim", handFile(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, f32(1)), "dimension -1"},
		{"float-dim", handFile(`{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}`, f32(1)), `tensor "a"`},
		{"overflow", handFile(`{"a":{"dtype":"F64","shape":[2147483647,2147483647,2147483647],"data_offsets":[0,4]}}`, f32(1)), "overflows"},
		{"size-mismatch", handFile(`{"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}}`, f32(5)), `tensor "a": data_offsets [0 20] hold 20 bytes, F32 [2 3] needs 24`},
		{"overlap", handFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, f32(3)), `tensor "b": data_offsets [4, 12] overlap tensor "a"`},
		{"hole", handFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, f32(3)), `tensor "b": hole of 4 bytes`},
		{"truncated-data", handFile(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, f32(3)), "truncated file?"},
		{"extra-data", handFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, f32(3)), "4 bytes after the last tensor"},
		{"duplicate", handFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32(2)), `tensor "a": listed twice`},
		{"metadata-not-string", handFile(`{"__metadata__":{"epoch":3}}`, nil), "metadata: values must be strings"},
		{"metadata-twice", handFile(`{"__metadata__":{},"__metadata__":{}}`, nil), "metadata: listed twice"},
		{"entry-not-object", handFile(`{"a":[1]}`, nil), `tensor "a"`},
	}
	dir := t.TempDir()
	for _, c := range cases {
		path := filepath.Join(dir, c.name+".safetensors")
		if err := os.WriteFile(path, c.file, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := Open(path)
		if err == nil {
			f.Close()
			t.Errorf("%s: opened without error", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) || !errors.Is(err, ErrFormat) {
			t.Errorf("%s: error %q, want one naming the file, wrapping ErrFormat and containing %q", c.name, err, c.want)
		}
	}
	// Valid edge cases: no tensors at all, metadata only, null metadata.
	for _, hdr := range []string{`{}`, `{"__metadata__":{"a":"b"}}`, `{"__metadata__":null}`, "  {}\n"} {
		if _, err := newFile("x", handFile(hdr, nil)); err != nil {
			t.Errorf("header %q: %v", hdr, err)
		}
	}
}

func TestTruncatedFiles(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, sample()[1:], map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	full := buf.Bytes()
	if _, err := newFile("x", full); err != nil {
		t.Fatal(err)
	}
	for n := range len(full) {
		if _, err := newFile("x", full[:n]); err == nil || !errors.Is(err, ErrFormat) {
			t.Fatalf("file cut to %d of %d bytes: error %v", n, len(full), err)
		}
	}
	// Through Open, including the empty file that cannot be mapped.
	path := filepath.Join(t.TempDir(), "cut.safetensors")
	for _, n := range []int{0, 7, 8, 20, len(full) - 1} {
		os.WriteFile(path, full[:n], 0o644)
		if _, err := Open(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Fatalf("Open of a file cut to %d bytes: %v", n, err)
		}
	}
}

func TestLoadIntoErrors(t *testing.T) {
	path := filepath.Join("run", "best.safetensors")
	var buf bytes.Buffer
	err := Write(&buf, []Entry{
		{Name: "img_enc.layers.0.linear1.weight", Shape: []int{4, 2}, Data: make([]float32, 8)},
		{Name: "txt_enc.fc.weight", Shape: []int{2}, Data: []float32{1, 2}},
		{Name: "pooler.dense.weight", Shape: []int{1}, Data: []float32{1}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := newFile(path, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	model := func() []Entry {
		return []Entry{
			{Name: "img_enc.layers.0.linear1.weight", Shape: []int{2, 4}, Data: make([]float32, 8)},
			{Name: "txt_enc.fc.weight", Shape: []int{2}, Data: []float32{-1, -1}},
			{Name: "txt_enc.fc.bias", Shape: []int{2}, Data: make([]float32, 2)},
			{Name: "txt_enc.ln.bias", Shape: []int{2}, Data: make([]float32, 2)},
		}
	}
	want := model()
	err = f.LoadInto(want, LoadOptions{})
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	wantLines := []string{
		`checkpoint run/best.safetensors: tensor "img_enc.layers.0.linear1.weight": shape [4 2] in file, model expects [2 4]`,
		`checkpoint run/best.safetensors: 2 tensors missing from the file: "txt_enc.fc.bias", "txt_enc.ln.bias"`,
		`checkpoint run/best.safetensors: 1 unexpected tensor in the file: "pooler.dense.weight"`,
	}
	if !reflect.DeepEqual(lines, wantLines) {
		t.Fatalf("error:\n%s\nwant:\n%s", err, strings.Join(wantLines, "\n"))
	}
	if want[1].Data[0] != -1 {
		t.Fatal("LoadInto wrote data despite errors")
	}
	// Allowing missing and unexpected tensors leaves only the shape error.
	err = f.LoadInto(model(), LoadOptions{AllowMissing: true, AllowUnexpected: true})
	if err == nil || strings.Count(err.Error(), "\n") != 0 || !strings.Contains(err.Error(), "shape [4 2] in file") {
		t.Fatalf("relaxed: %v", err)
	}
	// Renamed names appear in both spellings; a bad buffer is caught.
	m := model()[1:2]
	m = append(m, Entry{Name: "x", Shape: []int{3}, Data: make([]float32, 2)})
	err = f.LoadInto(m, LoadOptions{AllowMissing: true, Rename: func(n string) string {
		if n == "txt_enc.fc.weight" {
			return "txt_enc.fc.weight"
		}
		return strings.TrimPrefix(n, "img_enc.")
	}})
	for _, w := range []string{`tensor "x": the model's buffer holds 2 values, its shape [3] needs 3`, `2 unexpected tensors in the file: "img_enc.layers.0.linear1.weight" (model name "layers.0.linear1.weight"), "pooler.dense.weight"`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
	err = f.LoadInto(nil, LoadOptions{Rename: func(string) string { return "same" }})
	if err == nil || !strings.Contains(err.Error(), `both map to "same"`) {
		t.Errorf("rename collision: %v", err)
	}
	// Success with a subset.
	m = model()[1:2]
	if err := f.LoadInto(m, LoadOptions{AllowUnexpected: true}); err != nil || m[0].Data[1] != 2 {
		t.Fatalf("subset: %v %v", m[0].Data, err)
	}
}

func TestSaveErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name    string
		entries []Entry
		want    string
	}{
		{"dup", []Entry{{Name: "a", Shape: []int{1}, Data: []float32{1}}, {Name: "a", Shape: []int{1}, Data: []float32{1}}}, `tensor "a": given twice`},
		{"short", []Entry{{Name: "a", Shape: []int{2, 2}, Data: []float32{1}}}, `tensor "a": 1 values for shape [2 2] (4)`},
		{"empty-name", []Entry{{Shape: []int{1}, Data: []float32{1}}}, "empty name"},
		{"reserved", []Entry{{Name: "__metadata__", Shape: []int{}, Data: []float32{1}}}, "reserved"},
	}
	for _, c := range cases {
		path := filepath.Join(dir, c.name)
		err := Save(path, c.entries, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want %q and the path", c.name, err, c.want)
		}
		if _, serr := os.Stat(path); !os.IsNotExist(serr) {
			t.Errorf("%s: a file was left behind", c.name)
		}
	}
}

// failAfter fails once n bytes have been written.
type failAfter struct {
	w io.Writer
	n int
}

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		n, _ := f.w.Write(p[:f.n])
		f.n = 0
		return n, errors.New("disk full")
	}
	f.n -= len(p)
	return f.w.Write(p)
}

func TestAtomicSave(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "last.safetensors")
	defer func(h func(io.Writer) io.Writer) { testHookWriter = h }(testHookWriter)
	testHookWriter = func(w io.Writer) io.Writer { return &failAfter{w: w, n: 100} }
	err := Save(path, sample(), nil)
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Save with a failing writer: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("a failed Save left a file")
	}
	// An existing checkpoint survives a failed overwrite.
	testHookWriter = func(w io.Writer) io.Writer { return w }
	if err := Save(path, sample()[1:2], nil); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	testHookWriter = func(w io.Writer) io.Writer { return &failAfter{w: w, n: 100} }
	if err := Save(path, sample(), nil); err == nil {
		t.Fatal("no error")
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("a failed Save changed the existing file")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the checkpoint", len(entries))
	}
}

// FuzzOpen feeds arbitrary bytes to the parser: it must fail cleanly or
// yield a file whose every float tensor reads back with its shape, or fails
// its checksum, and whose tensors LoadInto fills or refuses as a whole.
//
// The seeds are small on purpose: the fuzzer mutates and minimises whole
// inputs, and a seed of kilobytes (the 12 KB sample once here) slows it to a
// few executions a minute until the worker is declared hung.
func FuzzOpen(f *testing.F) {
	small := []Entry{
		{Name: "w", Shape: []int{2, 3}, Data: []float32{1, -2, 3, 0.5, 0, -0.25}},
		{Name: "b", Shape: []int{3}, Data: []float32{1, float32(math.Inf(1)), float32(math.NaN())}},
		{Name: "s", Shape: []int{}, Data: []float32{0.5}},
		{Name: "e", Shape: []int{0, 4}, Data: []float32{}},
	}
	var buf bytes.Buffer
	Write(&buf, small, map[string]string{"config": "{}"})
	f.Add(buf.Bytes())
	f.Add(handFile(`{"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"i":{"dtype":"I8","shape":[3],"data_offsets":[4,7]}}`, make([]byte, 7)))
	f.Add(handFile(`{"a":{"dtype":"BF16","shape":[1,1],"data_offsets":[0,2]},"__metadata__":{"x":"y"}}`, make([]byte, 2)))
	f.Add(handFile(`{"__metadata__":{"crc32c":"{\"a\":\"00000000\"}"},"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Add(handFile(`{}`, nil))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := newFile("fuzz", data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error does not wrap ErrFormat: %v", err)
			}
			return
		}
		verified := file.Verify() == nil
		var want []Entry
		for _, name := range file.Names() {
			in, _ := file.Info(name)
			vals, shape, err := file.Tensor(name)
			if err == nil && (!in.Float32() || len(vals) != in.Numel() || !reflect.DeepEqual(shape, in.Shape)) {
				t.Fatalf("tensor %q (%s): %d values, shape %v, info %+v", name, in.DType, len(vals), shape, in)
			}
			if err != nil && in.Float32() && verified {
				t.Fatalf("tensor %q (%s) passes Verify but not Tensor: %v", name, in.DType, err)
			}
			if in.Float32() {
				want = append(want, Entry{Name: name, Shape: in.Shape, Data: make([]float32, in.Numel())})
			}
		}
		if err := file.LoadInto(want, LoadOptions{AllowUnexpected: true}); err == nil {
			for _, e := range want {
				if i := slices.IndexFunc(e.Data, func(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }); i >= 0 {
					t.Fatalf("LoadInto accepted %s[%d] = %v", e.Name, i, e.Data[i])
				}
			}
		}
	})
}

// Example saves a model's tensors with its configuration and loads them
// back into the model's buffers.
func Example() {
	dir, _ := os.MkdirTemp("", "xmr")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "best.safetensors")

	w := []float32{1, 2, 3, 4, 5, 6}
	err := Save(path, []Entry{{Name: "fc.weight", Shape: []int{2, 3}, Data: w}}, map[string]string{metaTestConfig: `{"embed": 2}`})
	if err != nil {
		fmt.Println(err)
		return
	}

	into := make([]float32, 6)
	meta, err := Load(path, []Entry{{Name: "fc.weight", Shape: []int{2, 3}, Data: into}}, LoadOptions{})
	fmt.Println(into, meta[metaTestConfig], err)

	err = func() error {
		_, err := Load(path, []Entry{{Name: "fc.weight", Shape: []int{3, 2}, Data: into}}, LoadOptions{})
		return err
	}()
	fmt.Println(strings.Replace(err.Error(), dir, "run", 1))
	// Output:
	// [1 2 3 4 5 6] {"embed": 2} <nil>
	// checkpoint run/best.safetensors: tensor "fc.weight": shape [2 3] in file, model expects [3 2]
}

// metaTestConfig is a metadata key the tests store a configuration under.
const metaTestConfig = "config"

// TestSaveHalf checks that a tensor saved with Half is stored as F16 (half
// the bytes), reads back as its values rounded to the nearest half, and
// is checksummed like any other (a flipped byte is caught).
func TestSaveHalf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.safetensors")
	vals := []float32{0, 1, -2.5, 1.0 / 3, 65504, 1e-5, -7e-8}
	if err := Save(path, []Entry{{Name: "h", Shape: []int{7}, Data: vals, Half: true}, {Name: "f", Shape: []int{2}, Data: []float32{1.0 / 3, 2}}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := f.Info("h")
	if in.DType != "F16" || in.End-in.Begin != 14 {
		t.Fatalf("h: dtype %s, %d bytes; want F16, 14", in.DType, in.End-in.Begin)
	}
	got, _, err := f.Tensor("h")
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if want := half.ToFloat32(half.FromFloat32(v)); got[i] != want {
			t.Errorf("h[%d] = %v, want %v (%v rounded to a half)", i, got[i], want, v)
		}
	}
	if third, _, _ := f.Tensor("f"); third[0] != 1.0/3 {
		t.Errorf("the F32 tensor beside it reads %v", third[0])
	}
	if err := f.Verify(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-9] ^= 0x40 // in h's data, the last 14 bytes (tensors are sorted by name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, _, err := f.Tensor("h"); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a flipped byte of an F16 tensor: %v", err)
	}
	// A value that has no half is refused, not written as infinity.
	bad := filepath.Join(t.TempDir(), "bad.safetensors")
	if err := Save(bad, []Entry{{Name: "w", Shape: []int{2}, Data: []float32{1, 70000}, Half: true}}, nil); err == nil || !strings.Contains(err.Error(), "half-precision") {
		t.Fatalf("70000 saved in half precision: %v", err)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Fatal("a refused save left a file")
	}
}

package torchfile

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// expectedTensor is one tensor of testdata/expected.json (gen.py).
type expectedTensor struct {
	DType  string    `json:"dtype"`
	Shape  []int     `json:"shape"`
	Values []float64 `json:"values"`
}

func readExpected(t *testing.T) map[string]expectedTensor {
	t.Helper()
	b, err := os.ReadFile("testdata/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]expectedTensor
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func openFixture(t *testing.T, name string) *File {
	t.Helper()
	f, err := Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func get(t *testing.T, d *Dict, key string) Value {
	t.Helper()
	v, ok := d.Get(key)
	if !ok {
		t.Fatalf("no key %q in %v", key, d.Keys())
	}
	return v
}

// checkTensors compares the tensors of a state dict with expected.json.
func checkTensors(t *testing.T, sd Value, want map[string]expectedTensor, only []string) {
	t.Helper()
	names, tensors, err := StateDict(sd)
	if err != nil {
		t.Fatal(err)
	}
	if only == nil {
		only = names
		if len(names) != len(want) {
			t.Errorf("%d tensors, want %d", len(names), len(want))
		}
	}
	for _, name := range only {
		tt, w := tensors[name], want[name]
		if tt == nil {
			t.Errorf("%s: missing", name)
			continue
		}
		if tt.DType.String() != w.DType || !slices.Equal(tt.Shape, w.Shape) {
			t.Errorf("%s: %s %v, want %s %v", name, tt.DType, tt.Shape, w.DType, w.Shape)
			continue
		}
		var got []float64
		if tt.DType.Floating() {
			v, err := tt.Float32()
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			for _, x := range v {
				got = append(got, float64(x))
			}
		} else {
			v, err := tt.Int64()
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			for _, x := range v {
				got = append(got, float64(x))
			}
		}
		if !slices.Equal(got, w.Values) {
			t.Errorf("%s: values %v, want %v", name, got, w.Values)
		}
	}
}

func TestReadFormats(t *testing.T) {
	want := readExpected(t)
	for _, name := range []string{"zip2.pth", "zip4.pth", "legacy.pth"} {
		t.Run(name, func(t *testing.T) {
			f := openFixture(t, name)
			root, ok := f.Root.(*Dict)
			if !ok {
				t.Fatalf("root is a %s", typeName(f.Root))
			}
			model := get(t, root, "model")
			checkTensors(t, model, want, nil)
			_, ts, _ := StateDict(model)
			if ts["w"].Storage() != ts["w_t"].Storage() || ts["w"].Storage() != ts["w_col"].Storage() {
				t.Error("views of one tensor do not share its storage")
			}
			if !ts["param"].RequiresGrad {
				t.Error("nn.Parameter lost requires_grad")
			}
			if get(t, root, "epoch") != int64(3) {
				t.Errorf("epoch = %v", get(t, root, "epoch"))
			}
			opt := get(t, root, "opt").(*Dict)
			if !opt.Namespace || get(t, opt, "lr") != 1e-5 || get(t, opt, "name") != "run" || get(t, opt, "flag") != true || get(t, opt, "none") != nil {
				t.Errorf("opt = %v %v", opt.Keys(), opt.Values())
			}
			if ids := get(t, opt, "ids").(*List); len(ids.Items) != 3 || ids.Items[2] != int64(3) {
				t.Errorf("opt.ids = %v", ids.Items)
			}
			cfg := get(t, root, "config").(*Dict)
			m := get(t, cfg, "model").(*Dict)
			if get(t, m, "embed-size") != int64(1024) || get(t, m, "shared") != false || get(t, get(t, cfg, "training").(*Dict), "warmup") != nil {
				t.Errorf("config.model = %v", m.Values())
			}
			if b := get(t, root, "bytes"); !bytes.Equal(b.([]byte), []byte("\x00\xffab")) {
				t.Errorf("bytes = %q", b)
			}
			if b, ok := get(t, root, "big").(*big.Int); !ok || b.Cmp(new(big.Int).Lsh(big.NewInt(1), 70)) != 0 {
				t.Errorf("big = %v", get(t, root, "big"))
			}
			if get(t, root, "neg") != -int64(1)<<40 || get(t, root, "np") != 0.75 || get(t, root, "npint") != int64(-4) {
				t.Errorf("neg, np, npint = %v %v %v", get(t, root, "neg"), get(t, root, "np"), get(t, root, "npint"))
			}
			if v, ok := get(t, root, "tuplekey").(*Dict).Get(Tuple{int64(1), "a"}); !ok || v != "x" {
				t.Errorf("tuple key: %v %v", v, ok)
			}
			if s := get(t, root, "set").(*List); len(s.Items) != 1 || s.Items[0] != int64(7) {
				t.Errorf("set = %v", s.Items)
			}
			if sh := get(t, root, "shared").(*List); sh.Items[0] != sh.Items[1] || sh.Items[0] != ts["w"] {
				t.Error("a tensor saved twice is not one tensor")
			}
		})
	}
	t.Run("tar.pth", func(t *testing.T) {
		f := openFixture(t, "tar.pth")
		if f.Format != "tar" {
			t.Fatalf("format %s", f.Format)
		}
		checkTensors(t, f.Root, want, []string{"w", "w_t", "w_row", "w_col", "half", "f64"})
	})
}

// plainWant is what testdata/plain_pN.pkl hold (gen.py's "plain").
func checkPlain(t *testing.T, v Value) {
	t.Helper()
	d, ok := v.(*Dict)
	if !ok {
		t.Fatalf("a %s", typeName(v))
	}
	if get(t, d, "i") != int64(7) || get(t, d, "neg") != int64(-300) || get(t, d, "f") != 0.1 || get(t, d, "s") != "héllo\n'\"\\" {
		t.Errorf("scalars: %v", d.Values())
	}
	if b, ok := get(t, d, "big").(*big.Int); !ok || b.Cmp(new(big.Int).Lsh(big.NewInt(1), 70)) != 0 {
		t.Errorf("big = %v", get(t, d, "big"))
	}
	switch b := get(t, d, "b").(type) {
	case []byte:
		if !bytes.Equal(b, []byte{0, 1, 0xff}) {
			t.Errorf("bytes = %q", b)
		}
	default:
		t.Errorf("bytes are a %s", typeName(b))
	}
	l := get(t, d, "l").(*List)
	if len(l.Items) != 3 || l.Items[0] != int64(1) || len(l.Items[1].(*List).Items) != 2 || len(l.Items[2].(Tuple)) != 0 {
		t.Errorf("list = %v", l.Items)
	}
	if tu := get(t, d, "t").(Tuple); len(tu) != 3 || tu[0] != nil || tu[1] != true || tu[2] != false {
		t.Errorf("tuple = %v", tu)
	}
	if x := get(t, get(t, get(t, d, "nested").(*Dict), "k").(*Dict), "x"); x != 1.5e300 {
		t.Errorf("nested = %v", x)
	}
	if v, ok := d.Get(int64(3)); !ok || v != "int key" {
		t.Errorf("int key: %v", v)
	}
}

func TestPlainProtocols(t *testing.T) {
	for p := 0; p <= 5; p++ {
		b, err := os.ReadFile(filepath.Join("testdata", "plain_p"+string(rune('0'+p))+".pkl"))
		if err != nil {
			t.Fatal(err)
		}
		v, n, err := unpickle(b, nil)
		if err != nil {
			t.Fatalf("protocol %d: %v", p, err)
		}
		if n != len(b) {
			t.Errorf("protocol %d: used %d of %d bytes", p, n, len(b))
		}
		checkPlain(t, v)
	}
}

// storageZip builds a torch zip archive holding data.pkl and the given
// storage records.
func storageZip(t testing.TB, pickle []byte, records map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, b []byte) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
	}
	add("archive/data.pkl", pickle)
	for k, b := range records {
		add("archive/data/"+k, b)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pk concatenates pickle pieces: strings and byte slices as they are.
func pk(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch x := p.(type) {
		case string:
			b = append(b, x...)
		case []byte:
			b = append(b, x...)
		case byte:
			b = append(b, x)
		}
	}
	return b
}

// binint is a BININT opcode with x.
func binint(x int32) []byte {
	return binary.LittleEndian.AppendUint32([]byte{'J'}, uint32(x))
}

// long8 is a LONG1 opcode with an 8-byte x.
func long8(x int64) []byte {
	return binary.LittleEndian.AppendUint64([]byte{0x8a, 8}, uint64(x))
}

// unicode is a BINUNICODE opcode with s.
func unicode(s string) []byte {
	return append(binary.LittleEndian.AppendUint32([]byte{'X'}, uint32(len(s))), s...)
}

// tensorPickle is a pickle of _rebuild_tensor_v2 on storage "0" of
// storageNumel floats with the given size (one dimension, stride 1).
func tensorPickle(storageNumel, size int64, extra ...any) []byte {
	return pk("\x80\x02", "ctorch._utils\n_rebuild_tensor_v2\n", "(",
		"(", unicode("storage"), "ctorch\nFloatStorage\n", unicode("0"), unicode("cpu"), long8(storageNumel), "tQ",
		binint(0), "(", long8(size), "t", "(", binint(1), "t", "\x89", "ccollections\nOrderedDict\n)R", "tR", pk(extra...), ".")
}

func TestRefusedGlobals(t *testing.T) {
	call := func(global string) []byte {
		return pk("\x80\x02c", global, "(", unicode("echo pwned"), "tR.")
	}
	cases := []struct {
		name, global string
		pickle       []byte
	}{
		{"posix.system", "posix.system", call("posix\nsystem\n")},
		{"os.system", "os.system", call("os\nsystem\n")},
		{"nt.system", "nt.system", call("nt\nsystem\n")},
		{"builtins.eval", "builtins.eval", call("builtins\neval\n")},
		{"builtins.exec", "builtins.exec", call("builtins\nexec\n")},
		{"__builtin__.eval", "__builtin__.eval", call("__builtin__\neval\n")},
		{"subprocess.Popen", "subprocess.Popen", call("subprocess\nPopen\n")},
		{"subprocess.check_output", "subprocess.check_output", call("subprocess\ncheck_output\n")},
		{"torch.storage._load_from_bytes", "torch.storage._load_from_bytes", call("torch.storage\n_load_from_bytes\n")},
		{"a torch module class", "torch.nn.modules.linear.Linear", pk("\x80\x02ctorch.nn.modules.linear\nLinear\n)\x81.")},
		{"STACK_GLOBAL", "posix.system", pk("\x80\x04", "\x8c\x05posix", "\x8c\x06system", "\x93", "(", unicode("id"), "tR.")},
		{"INST", "os.system", pk("(", unicode("id"), "ios\nsystem\n.")},
		{"getattr", "builtins.getattr", call("builtins\ngetattr\n")},
		{"a global named by a unicode trick", "posix.system ", call("posix\nsystem \n")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := unpickle(c.pickle, nil)
			var ref *RefusedGlobalError
			if !errors.As(err, &ref) || ref.Global != c.global {
				t.Fatalf("error %v, want a refusal of %s", err, c.global)
			}
			if !strings.Contains(err.Error(), "refused global "+c.global) {
				t.Errorf("error %q does not name %s", err, c.global)
			}
			// The same pickle as a file's data.pkl.
			_, err = Parse("evil.pth", storageZip(t, c.pickle, nil))
			if !errors.As(err, &ref) || !strings.Contains(err.Error(), "evil.pth") {
				t.Errorf("Parse: %v, want the refusal naming the file", err)
			}
		})
	}
	// A whitelisted global may still not be called with anything.
	for _, c := range []struct{ name, pickle, want string }{
		{"storage type called", "\x80\x02ctorch\nFloatStorage\n)R.", "cannot be called"},
		{"REDUCE on a string", "\x80\x02X\x01\x00\x00\x00a)R.", "REDUCE calls a str"},
		{"Namespace with args", "\x80\x02cargparse\nNamespace\n(K\x01t\x81.", "argparse.Namespace built with arguments"},
		{"OrderedDict of junk", "\x80\x02ccollections\nOrderedDict\n(K\x01tR.", "OrderedDict with arguments"},
		{"codecs other encoding", "\x80\x02c_codecs\nencode\n(X\x01\x00\x00\x00aX\x05\x00\x00\x00rot13tR.", "encoding \"rot13\""},
		{"BUILD on a list", "\x80\x02]}b.", "BUILD of a list"},
	} {
		if _, _, err := unpickle([]byte(c.pickle), nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

// allocDuring returns the bytes allocated while f runs.
func allocDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestHugeTensorRefused(t *testing.T) {
	const huge = 1_000_000_000_000 // 10^12 elements: 4 TB of float32
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"zip storage claims 10^12", storageZip(t, tensorPickle(huge, huge), map[string][]byte{"0": make([]byte, 16)}),
			"storage \"0\" claims 1000000000000 float32 elements (4000000000000 bytes), its record holds 16 bytes"},
		{"zip view beyond its storage", storageZip(t, tensorPickle(4, huge), map[string][]byte{"0": make([]byte, 16)}),
			"needs 1000000000000 elements of storage \"0\", which holds 4"},
		{"legacy storage claims 10^12", legacyFile(huge, huge, 4),
			"storage \"0\": the pickle claims 1000000000000 elements, its data 4"},
		{"legacy data shorter than claimed", legacyFile(huge, huge, huge),
			"1000000000000 elements (4000000000000 bytes) claimed, the file has 16 bytes left"},
		{"beyond the element limit", storageZip(t, tensorPickle(1<<50, 1<<50), nil), "storage of 1125899906842624 elements is out of range"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			alloc := allocDuring(func() { _, err = Parse("huge.pth", c.data) })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			if alloc > 1<<20 {
				t.Errorf("refusing it allocated %d bytes", alloc)
			}
		})
	}
}

// legacyFile is a legacy torch file whose one storage the pickle claims
// to have claimed elements, a tensor of size elements viewing it, and whose
// data says count elements followed by 16 bytes.
func legacyFile(claimed, size, count int64) []byte {
	magic := pk("\x80\x02\x8a\x0a", []byte{0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19}, ".")
	proto := pk("\x80\x02M\xe9\x03.")
	info := pk("\x80\x02}", unicode("little_endian"), "\x88s.")
	obj := pk("\x80\x02", "ctorch._utils\n_rebuild_tensor_v2\n", "(",
		"(", unicode("storage"), "ctorch\nFloatStorage\n", unicode("0"), unicode("cpu"), long8(claimed), "NtQ",
		binint(0), "(", long8(size), "t", "(", binint(1), "t", "\x89", "ccollections\nOrderedDict\n)R", "tR.")
	keys := pk("\x80\x02](", unicode("0"), "e.")
	data := binary.LittleEndian.AppendUint64(nil, uint64(count))
	return pk(magic, proto, info, obj, keys, data, make([]byte, 16))
}

func TestLegacyMatchesHandWritten(t *testing.T) {
	f, err := Parse("small.pth", legacyFile(4, 4, 4))
	if err != nil {
		t.Fatal(err)
	}
	tt := f.Root.(*Tensor)
	if v, err := tt.Float32(); err != nil || !slices.Equal(v, []float32{0, 0, 0, 0}) {
		t.Errorf("values %v, %v", v, err)
	}
}

func TestBadInput(t *testing.T) {
	deep := pk("\x80\x02", strings.Repeat("(", MaxDepth+1))
	cases := []struct {
		name, data, want string
	}{
		{"empty", "", "neither a zip archive"},
		{"safetensors", "\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":1}", "safetensors"},
		{"no STOP", "\x80\x02K\x01", "no STOP"},
		{"truncated string", "\x80\x02X\xff\x00\x00\x00ab", "a string of 255 bytes, 2 left"},
		{"unknown opcode", "\x80\x02\xff", "unknown opcode 0xff"},
		{"protocol 9", "\x80\x09N.", "pickle protocol 9"},
		{"memo miss", "\x80\x02h\x07.", "memo entry 7 was never stored"},
		{"underflow", "\x80\x02a.", "stack underflow"},
		{"pop through a mark", "\x80\x02K\x01(\x85.", "stack underflow"},
		{"two values at STOP", "\x80\x02K\x01K\x02.", "STOP with 2 values"},
		{"unhashable key", "\x80\x02}]K\x01s.", "unhashable dict key of type list"},
		{"setitem on list", "\x80\x02]K\x01K\x02s.", "SETITEM on a list"},
		{"too deep", string(deep), "nested deeper than 256"},
		{"huge long", "\x80\x02\x8b\x00\x00\x00\x10.", "integer of 268435456 bytes"},
		{"persistent id without loader", "\x80\x02X\x01\x00\x00\x00aQ.", "a persistent id where none is expected"},
		{"ext code", "\x80\x02\x82\x01.", "extension registry"},
		{"out-of-band buffer", "\x80\x05\x97.", "out-of-band buffers"},
		{"bad utf-8", "\x80\x02X\x01\x00\x00\x00\xff.", "not UTF-8"},
		{"legacy without magic", "\x80\x02K\x05.", "no magic number"},
		{"zip without data.pkl", string(storageZip(t, nil, nil)[:0]) + "PK\x03\x04junk", "zip"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("bad.pth", []byte(c.data))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "bad.pth") {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
	// File-level problems of zip archives.
	tp := tensorPickle(4, 4)
	for _, c := range []struct {
		name    string
		records map[string][]byte
		want    string
	}{
		{"storage record missing", nil, "no record archive/data/0"},
		{"storage record short", map[string][]byte{"0": make([]byte, 12)}, "its record holds 12 bytes"},
	} {
		if _, err := Parse("bad.pth", storageZip(t, tp, c.records)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	// A damaged storage: its CRC no longer matches.
	good := storageZip(t, tp, map[string][]byte{"0": {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}})
	i := bytes.Index(good, []byte{1, 2, 3, 4, 5, 6, 7, 8})
	bad := slices.Clone(good)
	bad[i] ^= 0xff
	if _, err := Parse("bad.pth", good); err != nil {
		t.Fatalf("the intact archive: %v", err)
	}
	if _, err := Parse("bad.pth", bad); err == nil || !strings.Contains(err.Error(), "the file is damaged") {
		t.Errorf("damaged record: error %v", err)
	}
}

func TestFloat64Range(t *testing.T) {
	b := binary.LittleEndian.AppendUint64(nil, math.Float64bits(1e300))
	st := &Storage{DType: Float64, Key: "0", Numel: 1, data: b}
	tt, err := newTensor(st, 0, []int64{1}, []int64{1}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tt.Float32(); err == nil || !strings.Contains(err.Error(), "beyond float32's range") {
		t.Errorf("error %v", err)
	}
}

func FuzzUnpickle(f *testing.F) {
	for p := 0; p <= 5; p++ {
		if b, err := os.ReadFile(filepath.Join("testdata", "plain_p"+string(rune('0'+p))+".pkl")); err == nil {
			f.Add(b)
		}
	}
	f.Add(tensorPickle(4, 4))
	f.Add(legacyFile(4, 4, 4))
	persistent := func(pid Value) (Value, error) {
		return &Storage{DType: Float32, Key: "0", Numel: 4, data: make([]byte, 16)}, nil
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, _, err := unpickle(data, persistent)
		if err != nil {
			return
		}
		if tt, ok := v.(*Tensor); ok {
			if _, err := tt.Float32(); err != nil {
				t.Fatalf("a tensor that was accepted cannot be read: %v", err)
			}
		}
	})
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"zip2.pth", "legacy.pth", "tar.pth"} {
		if b, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			f.Add(b)
		}
	}
	f.Add(legacyFile(4, 4, 4))
	f.Add(storageZip(f, tensorPickle(4, 4), map[string][]byte{"0": make([]byte, 16)}))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.pth", data)
		if err != nil {
			return
		}
		// Every tensor an accepted file holds can be read.
		walk(file.Root, map[any]bool{}, 0, func(tt *Tensor) {
			if tt.DType.Floating() {
				if _, err := tt.Float32(); err != nil && !strings.Contains(err.Error(), "float32's range") {
					t.Fatalf("accepted tensor unreadable: %v", err)
				}
			} else if _, err := tt.Int64(); err != nil {
				t.Fatalf("accepted tensor unreadable: %v", err)
			}
		})
	})
}

// walk calls f on every tensor reachable from v, each container once.
func walk(v Value, seen map[any]bool, depth int, f func(*Tensor)) {
	if depth > 100 {
		return
	}
	switch x := v.(type) {
	case *Tensor:
		f(x)
	case Tuple:
		for _, e := range x {
			walk(e, seen, depth+1, f)
		}
	case *List:
		if seen[x] {
			return
		}
		seen[x] = true
		for _, e := range x.Items {
			walk(e, seen, depth+1, f)
		}
	case *Dict:
		if seen[x] {
			return
		}
		seen[x] = true
		for _, e := range x.vals {
			walk(e, seen, depth+1, f)
		}
	}
}

// TestTextStrings: protocol 0's text opcodes, UNICODE (raw-unicode-escape,
// where \u is an escape only after an odd number of backslashes) and
// STRING (a quoted Python bytes literal, read as latin-1), and their
// errors.
func TestTextStrings(t *testing.T) {
	for _, c := range []struct{ pickle, want, err string }{
		{"Vplain\n.", "plain", ""},
		{`V\u00e9t\u00e9` + "\n.", "été", ""},
		{`V\U0001F600` + "\n.", "\U0001F600", ""},
		{`V\\u0041` + "\n.", `\\u0041`, ""},
		{`V\\\u0041` + "\n.", `\\A`, ""},
		{`Va\b` + "\n.", `a\b`, ""},
		{"V\xe9\n.", "é", ""},
		{`V\u00` + "\n.", "", "truncated escape"},
		{`V\U00110000` + "\n.", "", "bad escape"},
		{`S'a\x41\n'` + "\n.", "aA\n", ""},
		{`S"it's"` + "\n.", "it's", ""},
		{`Sunquoted` + "\n.", "", "STRING"},
	} {
		v, _, err := unpickle([]byte(c.pickle), nil)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one containing %q", c.pickle, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.pickle, err)
			continue
		}
		if v != c.want {
			t.Errorf("%q: %q, want %q", c.pickle, v, c.want)
		}
	}
}

package tfjs

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// graphJSON returns a model.json with one Const per weight spec and a
// manifest group per paths list.
func graphJSON(nodes, manifest string) string {
	return `{"format":"graph-model","generatedBy":"test","convertedBy":"test",
	"signature":{"inputs":{"x":{"name":"x"}},"outputs":{"y":{"name":"y"}}},
	"modelTopology":{"node":[` + nodes + `]},"weightsManifest":[` + manifest + `]}`
}

func f32s(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func i32s(v ...int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func u16s(v ...uint16) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
	return b
}

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

const validNodes = `{"name":"x","op":"Placeholder","attr":{"dtype":{"type":"DT_FLOAT"},"shape":{"shape":{"dim":[{"size":"1"},{"size":"-1"}]}}}},
	{"name":"w","op":"Const"},{"name":"h","op":"Const"},{"name":"k","op":"Const"},{"name":"q","op":"Const"},
	{"name":"y","op":"_FusedConv2D","input":["x","w","h:0","^k"],"attr":{"strides":{"list":{"i":["1","2","2","1"]}},"padding":{"s":"U0FNRQ=="},"epsilon":{"f":0.5},"use":{"b":true},"fused_ops":{"list":{"s":["Qmlhc0FkZA==","UmVsdQ=="]}}}}`

const validManifest = `{"paths":["a.bin","b.bin"],"weights":[
	{"name":"w","shape":[2,3],"dtype":"float32"},
	{"name":"h","shape":[3],"dtype":"float32","quantization":{"dtype":"float16","original_dtype":"float32"}},
	{"name":"k","shape":[],"dtype":"int32"}]},
	{"paths":["sub/q.bin"],"weights":[{"name":"q","shape":[2],"dtype":"float32","quantization":{"dtype":"uint8","scale":0.5,"min":-1}}]}`

func validFS() fstest.MapFS {
	all := cat(f32s(1, 2, 3, 4, 5, 6), u16s(0x3c00, 0xc000, 0x0001), i32s(-7))
	return fstest.MapFS{
		"a.bin":     {Data: all[:10]},
		"b.bin":     {Data: all[10:]},
		"sub/q.bin": {Data: []byte{0, 4}},
	}
}

func TestReadValid(t *testing.T) {
	m, err := Read("model.json", []byte(graphJSON(validNodes, validManifest)), validFS())
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Nodes) != 6 || m.Nodes[5].Op != "_FusedConv2D" || m.GeneratedBy != "test" || m.ConvertedBy != "test" {
		t.Fatalf("nodes %+v", m.Nodes)
	}
	y := m.Nodes[5]
	if got := y.Attr["strides"].List.I; len(got) != 4 || got[1] != 2 {
		t.Errorf("strides %v", got)
	}
	if string(y.Attr["padding"].S) != "SAME" || y.Attr["epsilon"].F != 0.5 || !y.Attr["use"].B {
		t.Errorf("attrs %+v", y.Attr)
	}
	if ops := y.Attr["fused_ops"].List.S; len(ops) != 2 || string(ops[1]) != "Relu" {
		t.Errorf("fused_ops %q", ops)
	}
	if sh := m.Nodes[0].Attr["shape"].Shape; len(sh) != 2 || sh[1] != -1 {
		t.Errorf("placeholder shape %v", sh)
	}
	if InputNode(y.Inputs[2]) != "h" || InputIndex("h:1") != 1 || InputNode(y.Inputs[3]) != "k" {
		t.Errorf("input refs")
	}
	want := map[string][]float32{"w": {1, 2, 3, 4, 5, 6}, "h": {1, -2, float32(math.Ldexp(1, -24))}, "q": {-1, 1}}
	for name, v := range want {
		got := m.Weights[name]
		if got == nil || got.DType != "float32" || len(got.F32) != len(v) {
			t.Fatalf("%s: %+v", name, got)
		}
		for i := range v {
			if got.F32[i] != v[i] {
				t.Errorf("%s[%d] = %v, want %v", name, i, got.F32[i], v[i])
			}
		}
	}
	if k := m.Weights["k"]; k.DType != "int32" || len(k.I32) != 1 || k.I32[0] != -7 || k.Len() != 1 {
		t.Errorf("k = %+v", k)
	}
	if w := m.Weights["w"]; len(w.Shape) != 2 || w.Shape[0] != 2 || w.Shape[1] != 3 {
		t.Errorf("w shape %v", w.Shape)
	}
	if len(m.Inputs) != 1 || m.Inputs[0] != "x" || len(m.Outputs) != 1 {
		t.Errorf("signature %v %v", m.Inputs, m.Outputs)
	}
}

func TestReadErrors(t *testing.T) {
	one := `{"name":"c","op":"Const"}`
	oneW := func(w string) string { return `{"paths":["a.bin"],"weights":[` + w + `]}` }
	fs4 := fstest.MapFS{"a.bin": {Data: f32s(1)}}
	cases := []struct {
		name, json string
		fsys       fstest.MapFS
		want       string
	}{
		{"not json", `{"format":`, fs4, "not a TF.js model.json"},
		{"layers model", `{"format":"layers-model","modelTopology":{}}`, fs4, `"format" is "layers-model"`},
		{"no topology", `{"format":"graph-model"}`, fs4, `"modelTopology" is missing`},
		{"unnamed node", graphJSON(`{"op":"Const"}`, ""), fs4, "node[0] has no name"},
		{"no op", graphJSON(`{"name":"a"}`, ""), fs4, `("a") has no op`},
		{"duplicate node", graphJSON(one+","+one, oneW(`{"name":"c","shape":[1],"dtype":"float32"}`)), fs4, `"c" appears twice`},
		{"dangling input", graphJSON(`{"name":"a","op":"Relu","input":["nope:0"]}`, ""), fs4, `input "nope:0" names no node`},
		{"no manifest", graphJSON(one, ""), fs4, `"weightsManifest" is missing`},
		{"const without weight", graphJSON(one, oneW(`{"name":"d","shape":[1],"dtype":"float32"}`)), fs4, `Const node "c" has no tensor`},
		{"bad dtype", graphJSON(one, oneW(`{"name":"c","shape":[1],"dtype":"complex64"}`)), fs4, `dtype "complex64"`},
		{"bad quantization", graphJSON(one, oneW(`{"name":"c","shape":[1],"dtype":"float32","quantization":{"dtype":"int4"}}`)), fs4, `quantization.dtype "int4"`},
		{"quantization without scale", graphJSON(one, oneW(`{"name":"c","shape":[4],"dtype":"float32","quantization":{"dtype":"uint8"}}`)), fs4, "needs scale and min"},
		{"negative dim", graphJSON(one, oneW(`{"name":"c","shape":[-1],"dtype":"float32"}`)), fs4, "shape[0] is -1"},
		{"no shape", graphJSON(one, oneW(`{"name":"c","dtype":"float32"}`)), fs4, "has no shape"},
		{"string dim", graphJSON(one, oneW(`{"name":"c","shape":["x"],"dtype":"float32"}`)), fs4, "shape:"},
		{"huge shape", graphJSON(one, oneW(`{"name":"c","shape":[1000000,1000000,1000000],"dtype":"float32"}`)), fs4, "more than"},
		{"rank", graphJSON(one, oneW(`{"name":"c","shape":[1,1,1,1,1,1,1,1,1],"dtype":"float32"}`)), fs4, "9 dimensions"},
		{"short shard", graphJSON(one, oneW(`{"name":"c","shape":[2],"dtype":"float32"}`)), fs4, "take 8 bytes but the shards [a.bin] hold 4"},
		{"long shard", graphJSON(one, oneW(`{"name":"c","shape":[],"dtype":"float16"}`)), fs4, `dtype "float16"`},
		{"extra bytes", graphJSON(one, oneW(`{"name":"c","shape":[],"dtype":"bool"}`)), fs4, "take 1 bytes but the shards [a.bin] hold 4"},
		{"missing shard", graphJSON(one, `{"paths":["b.bin"],"weights":[{"name":"c","shape":[1],"dtype":"float32"}]}`), fs4, "paths[0]: weight shard"},
		{"escaping path", graphJSON(one, `{"paths":["../a.bin"],"weights":[{"name":"c","shape":[1],"dtype":"float32"}]}`), fs4, "leaves the model's directory"},
		{"absolute path", graphJSON(one, `{"paths":["/etc/passwd"],"weights":[{"name":"c","shape":[1],"dtype":"float32"}]}`), fs4, "not relative"},
		{"url path", graphJSON(one, `{"paths":["http://x/a.bin"],"weights":[{"name":"c","shape":[1],"dtype":"float32"}]}`), fs4, "not relative"},
		{"no paths", graphJSON(one, `{"paths":[],"weights":[{"name":"c","shape":[1],"dtype":"float32"}]}`), fs4, "paths is empty"},
		{"duplicate weight", graphJSON(one, oneW(`{"name":"c","shape":[],"dtype":"float32"},{"name":"c","shape":[],"dtype":"float32"}`)), fs4, `weight "c" appears twice`},
		{"unnamed weight", graphJSON(one, oneW(`{"shape":[1],"dtype":"float32"}`)), fs4, "weights[0] has no name"},
		{"directory shard", graphJSON(one, `{"paths":["d"],"weights":[{"name":"c","shape":[1],"dtype":"float32"}]}`), fstest.MapFS{"d/x": {Data: nil}}, "not a regular file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read("m.json", []byte(c.json), c.fsys)
			if err == nil {
				t.Fatalf("no error, want one containing %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "m.json") {
				t.Fatalf("error %q, want one naming m.json and containing %q", err, c.want)
			}
		})
	}
}

// TestOpenCenterNet reads the real model when the detector's weights are
// cached (package detect fetches them).
func TestOpenCenterNet(t *testing.T) {
	dir := os.Getenv("XMR_MODELS")
	if dir == "" {
		if h, err := os.UserCacheDir(); err == nil {
			dir = filepath.Join(h, "xmr")
		}
	}
	p := filepath.Join(dir, "centernet-human-3.3.6", "centernet.json")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s not cached (package detect's tests fetch it): %v", p, err)
	}
	m, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Nodes) != 544 || len(m.Weights) != 267 {
		t.Fatalf("%d nodes, %d weights; want 544 and 267", len(m.Nodes), len(m.Weights))
	}
	w := m.Weights["tower_0/MobilenetV3/Conv/Conv2D_weights"]
	if w == nil || len(w.Shape) != 4 || w.Shape[3] != 16 || len(w.F32) != 3*3*3*16 {
		t.Fatalf("first filter %+v", w)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Fatalf("missing file: %v", err)
	}
	p := filepath.Join(dir, "model.json")
	if err := os.WriteFile(p, []byte(graphJSON(`{"name":"c","op":"Const"}`, `{"paths":["w.bin"],"weights":[{"name":"c","shape":[4],"dtype":"float32"}]}`)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "w.bin"), f32s(1, 2, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p); err == nil || !strings.Contains(err.Error(), "hold 12") {
		t.Fatalf("truncated shard: %v", err)
	}
}

package tfjs

import (
	"testing"
	"testing/fstest"
)

// FuzzRead feeds arbitrary model.json text and shard bytes to Read: it must
// return a model or an error, never panic, and every tensor it returns must
// hold exactly as many values as its shape says.
func FuzzRead(f *testing.F) {
	fs := validFS()
	f.Add([]byte(graphJSON(validNodes, validManifest)), fs["a.bin"].Data, fs["b.bin"].Data)
	f.Add([]byte(graphJSON(`{"name":"c","op":"Const"}`, `{"paths":["a.bin"],"weights":[{"name":"c","shape":[2],"dtype":"int32"}]}`)), i32s(1, 2), []byte{})
	f.Add([]byte(graphJSON(`{"name":"c","op":"Const"}`, `{"paths":["a.bin","b.bin"],"weights":[{"name":"c","shape":[3],"dtype":"bool"}]}`)), []byte{1}, []byte{0, 1})
	f.Add([]byte(`{"format":"graph-model","modelTopology":{"node":[]},"weightsManifest":[]}`), []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, js, a, b []byte) {
		fsys := fstest.MapFS{"a.bin": {Data: a}, "b.bin": {Data: b}, "sub/q.bin": {Data: a}}
		m, err := Read("model.json", js, fsys)
		if err != nil {
			return
		}
		for name, w := range m.Weights {
			n := w.Len()
			var got int
			switch w.DType {
			case "float32":
				got = len(w.F32)
			case "int32":
				got = len(w.I32)
			case "bool":
				got = len(w.Bool)
			default:
				t.Fatalf("%s: dtype %q", name, w.DType)
			}
			if got != n {
				t.Fatalf("%s: %d values for shape %v", name, got, w.Shape)
			}
		}
	})
}

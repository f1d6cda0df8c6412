// Package torchfiletest writes small files in the zip format of
// torch.save, for tests that need one without Python: plain values and
// float32 tensors pickled with protocol 2, as torch.save pickles them.
package torchfiletest

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
)

// Tensor is a float32 tensor to write: contiguous, or, with Stride, a
// view of the storage Data.
type Tensor struct {
	Shape  []int
	Data   []float32
	Stride []int
}

// Dict is an ordered dict (collections.OrderedDict when Ordered, else a
// plain dict; argparse.Namespace when Namespace).
type Dict struct {
	Keys      []string
	Values    []any
	Ordered   bool
	Namespace bool
}

// Add appends an item and returns d.
func (d *Dict) Add(key string, v any) *Dict {
	d.Keys = append(d.Keys, key)
	d.Values = append(d.Values, v)
	return d
}

// Write writes root as torch.save would, in the zip format. Values are
// nil, bool, int, float64, string, []any, map[string]any (sorted keys),
// *Dict and *Tensor.
func Write(path string, root any) error {
	b, err := Bytes(root)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Bytes returns the content of the file Write writes.
func Bytes(root any) ([]byte, error) {
	w := &writer{}
	w.out = append(w.out, 0x80, 2)
	if err := w.value(root); err != nil {
		return nil, err
	}
	w.out = append(w.out, '.')
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, b []byte) error {
		f, err := zw.CreateHeader(&zip.FileHeader{Name: "archive/" + name, Method: zip.Store})
		if err != nil {
			return err
		}
		_, err = f.Write(b)
		return err
	}
	if err := add("data.pkl", w.out); err != nil {
		return nil, err
	}
	for i, s := range w.storages {
		if err := add("data/"+strconv.Itoa(i), s); err != nil {
			return nil, err
		}
	}
	if err := add("version", []byte("3\n")); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type writer struct {
	out      []byte
	storages [][]byte
}

func (w *writer) str(s string) {
	w.out = append(w.out, 'X')
	w.out = binary.LittleEndian.AppendUint32(w.out, uint32(len(s)))
	w.out = append(w.out, s...)
}

func (w *writer) int(x int64) {
	if x >= 0 && x < 1<<31 || x < 0 && x >= -(1<<31) {
		w.out = append(w.out, 'J')
		w.out = binary.LittleEndian.AppendUint32(w.out, uint32(int32(x)))
		return
	}
	w.out = append(w.out, 0x8a, 8)
	w.out = binary.LittleEndian.AppendUint64(w.out, uint64(x))
}

func (w *writer) global(module, name string) {
	w.out = append(w.out, 'c')
	w.out = append(w.out, module+"\n"+name+"\n"...)
}

func (w *writer) value(v any) error {
	switch x := v.(type) {
	case nil:
		w.out = append(w.out, 'N')
	case bool:
		if x {
			w.out = append(w.out, 0x88)
		} else {
			w.out = append(w.out, 0x89)
		}
	case int:
		w.int(int64(x))
	case float64:
		w.out = append(w.out, 'G')
		w.out = binary.BigEndian.AppendUint64(w.out, math.Float64bits(x))
	case string:
		w.str(x)
	case []any:
		w.out = append(w.out, ']', '(')
		for _, e := range x {
			if err := w.value(e); err != nil {
				return err
			}
		}
		w.out = append(w.out, 'e')
	case map[string]any:
		d := &Dict{}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			d.Add(k, x[k])
		}
		return w.value(d)
	case *Dict:
		switch {
		case x.Namespace:
			w.global("argparse", "Namespace")
			w.out = append(w.out, ')', 0x81, '}')
		case x.Ordered:
			w.global("collections", "OrderedDict")
			w.out = append(w.out, ')', 'R')
		default:
			w.out = append(w.out, '}')
		}
		w.out = append(w.out, '(')
		for i, k := range x.Keys {
			w.str(k)
			if err := w.value(x.Values[i]); err != nil {
				return err
			}
		}
		w.out = append(w.out, 'u')
		if x.Namespace {
			w.out = append(w.out, 'b')
		}
	case *Tensor:
		n := 1
		for _, d := range x.Shape {
			n *= d
		}
		if x.Stride == nil && n != len(x.Data) {
			return fmt.Errorf("tensor of shape %v with %d values", x.Shape, len(x.Data))
		}
		n = len(x.Data)
		key := len(w.storages)
		b := make([]byte, 0, 4*n)
		for _, f := range x.Data {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
		w.storages = append(w.storages, b)
		w.global("torch._utils", "_rebuild_tensor_v2")
		w.out = append(w.out, '(', '(')
		w.str("storage")
		w.global("torch", "FloatStorage")
		w.str(strconv.Itoa(key))
		w.str("cpu")
		w.int(int64(n))
		w.out = append(w.out, 't', 'Q')
		w.int(0)
		stride := x.Stride
		if stride == nil {
			stride = make([]int, len(x.Shape))
			s := 1
			for i := len(x.Shape) - 1; i >= 0; i-- {
				stride[i] = s
				s *= x.Shape[i]
			}
		}
		for _, dims := range [][]int{x.Shape, stride} {
			w.out = append(w.out, '(')
			for _, d := range dims {
				w.int(int64(d))
			}
			w.out = append(w.out, 't')
		}
		w.out = append(w.out, 0x89)
		w.global("collections", "OrderedDict")
		w.out = append(w.out, ')', 'R', 't', 'R')
	default:
		return fmt.Errorf("torchfiletest: cannot write a %T", v)
	}
	return nil
}

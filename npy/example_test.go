package npy_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/xmr-project/xmr/npy"
)

func ExampleWriteFile() {
	dir, _ := os.MkdirTemp("", "npy")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "boxes.npy")

	if err := npy.WriteFile(path, []int{2, 4}, []float32{0, 0, 10, 10, 5, 5, 20, 30}); err != nil {
		fmt.Println(err)
		return
	}
	a, err := npy.Read(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(a.Shape, a.Data)
	// Output: [2 4] [0 0 10 10 5 5 20 30]
}

func ExampleHeader_Bytes() {
	// A streaming writer writes the header first, then the data.
	h := npy.Header{DType: npy.Int32, Shape: []int{3}}
	b := h.Bytes()
	fmt.Printf("%d bytes: %q\n", len(b), bytes.TrimRight(b[10:], " \n"))
	// Output: 128 bytes: "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }"
}

func ExampleNewReader() {
	var buf bytes.Buffer
	npy.Write(&buf, []int{2, 2}, []float32{1, 2, 3, 4})

	r, err := npy.NewReader(&buf)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Header)
	v, err := r.ReadFloat32()
	fmt.Println(v, err)
	// Output:
	// (2,2) float32
	// [1 2 3 4] <nil>
}

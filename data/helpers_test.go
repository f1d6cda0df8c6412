package data

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/npy"
)

// testSplit builds a deterministic split of n images, R region slots of D
// features; with variable set, image i has R - i%3 valid regions (at least
// 1) and zero padding. Boxes and sizes are set for region features.
func testSplit(name string, n, R, D int, global, variable bool) *Split {
	if global {
		R = 1
	}
	g := &Regions{N: n, R: R, D: D, Feat: make([]float32, n*R*D), Count: make([]int, n)}
	if !global {
		g.Boxes = make([]float32, n*R*4)
	}
	s := &Split{Name: name, Images: g, Global: global, CapsPerImage: 5}
	for i := range n {
		c := R
		if variable {
			c = max(1, R-i%3)
		}
		g.Count[i] = c
		for r := range c {
			for d := range D {
				g.Feat[(i*R+r)*D+d] = float32(i) + float32(r)/100 + float32(d)/10000
			}
			if g.Boxes != nil {
				b := g.Boxes[(i*R+r)*4:]
				b[0], b[1] = 0.25*float32(r%2), 0.125
				b[2], b[3] = b[0]+0.5, 0.875
			}
		}
		for j := range 5 {
			s.Captions = append(s.Captions, fmt.Sprintf("image %d caption %d", i, j))
		}
		s.ImageIDs = append(s.ImageIDs, fmt.Sprintf("%d", 1000+i))
		if !global {
			s.Sizes = append(s.Sizes, [2]float32{640, 480})
		}
	}
	return s
}

// npyRaw returns an .npy file of the given dtype, order and shape holding
// the raw data bytes as they are.
func npyRaw(descr string, fortran bool, shape []int, data []byte) []byte {
	d, err := npy.ParseDType(descr)
	if err != nil {
		panic(err)
	}
	return append(npy.Header{DType: d, Fortran: fortran, Shape: shape}.Bytes(), data...)
}

// f32le and f64le encode values little-endian.
func f32le(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func f64le(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(x)))
	}
	return b
}

// npzBytes returns a zip (deflated, as np.savez_compressed writes) holding
// the given .npy entries.
func npzBytes(t testing.TB, entries map[string][]byte) []byte {
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	for name, data := range entries {
		w, err := z.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// npyOf returns a float32 .npy file of the given shape.
func npyOf(shape []int, data []float32) []byte {
	var b bytes.Buffer
	if err := npy.Write(&b, shape, data); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// karpathyJSON returns a Karpathy split file with the given images, each
// {split, n sentences}; COCO files carry cocoid = 100000+i.
func karpathyJSON(dataset string, splits []string, sentences []int) []byte {
	type sent struct {
		Raw    string   `json:"raw"`
		Tokens []string `json:"tokens"`
	}
	type img struct {
		Split     string `json:"split"`
		Filepath  string `json:"filepath,omitempty"`
		Filename  string `json:"filename"`
		ImgID     int    `json:"imgid"`
		CocoID    *int   `json:"cocoid,omitempty"`
		Sentences []sent `json:"sentences"`
	}
	var imgs []img
	for i, sp := range splits {
		im := img{Split: sp, Filename: fmt.Sprintf("%d.jpg", 5000+i), ImgID: i}
		if dataset == "coco" {
			id := 100000 + i
			im.CocoID = &id
			im.Filepath = "val2014"
			im.Filename = fmt.Sprintf("COCO_val2014_%012d.jpg", id)
		}
		for j := range sentences[i] {
			raw := fmt.Sprintf("A photo %d of thing %d.", i, j)
			im.Sentences = append(im.Sentences, sent{Raw: raw, Tokens: strings.Fields(strings.ToLower(strings.TrimSuffix(raw, ".")))})
		}
		imgs = append(imgs, im)
	}
	b, _ := json.Marshal(map[string]any{"images": imgs, "dataset": dataset})
	return b
}

// repeat returns n copies of v.
func repeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
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

// writeLines writes lines to path, each ended by "\n", as WritePrecomp
// writes its text files.
func writeLines(path string, lines []string) error {
	return writeAtomic(path, func(w io.Writer) error { return writeLinesTo(context.Background(), w, lines) })
}

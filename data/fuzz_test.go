package data

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sbinet/npyio/npz"
)

// The fuzz targets feed arbitrary bytes to every parser: each must return
// an error, never panic or allocate without bound. Run one with e.g.
//
//	go test ./data -run '^$' -fuzz FuzzNPY -fuzztime 1m

func npySeeds() [][]byte {
	return [][]byte{
		npyOf([]int{2, 3, 4}, make([]float32, 24)),
		npyOf([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6}),
		npyBytes(dictFor("<f8", false, "(2,)"), f64le(1, 2)),
		npyBytes(dictFor(">f4", true, "(2, 1)"), f32be(1, 2)),
		npyBytes(dictFor("<f2", false, "(1,)"), []byte{0, 0x3c}),
		npyBytes(dictFor("<i4", false, "(2,)"), make([]byte, 8)),
		npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", f32le(1)),
		npyBytes(dictFor("<f4", false, "(5000, 36, 2048)"), nil),
		[]byte("\x93NUMPY\x02\x00\x10\x00\x00\x00{'descr': '<f4'"),
		[]byte("\x93NUMPY\x01\x00"),
	}
}

func FuzzNPY(f *testing.F) {
	for _, s := range npySeeds() {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		// Stream path (npz entries).
		r := bytes.NewReader(b)
		if h, err := readNPYHeader(r); err == nil {
			off := h.offset
			readFloat32(r, &h, false)
			r = bytes.NewReader(b[off:])
			readInts(r, &h)
		}
		// File path (mapped or read).
		p := filepath.Join(dir, "x.npy")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if a, err := ReadNPY(p); err == nil {
			if int64(len(a.Data)) != int64(checkCount(a.Shape)) {
				t.Fatalf("shape %v with %d elements", a.Shape, len(a.Data))
			}
			parallelFirstNonFinite(a.Data)
			a.Close()
		}
		readNPYInts(p)
	})
}

func checkCount(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

func FuzzNPZ(f *testing.F) {
	for _, s := range npySeeds() {
		f.Add(npzBytes(f, map[string][]byte{"feat.npy": s}))
	}
	f.Add(npzBytes(f, map[string][]byte{"feat": npyOf([]int{36, 4}, make([]float32, 144)), "x.npy": nil}))
	f.Add([]byte("PK\x05\x06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		z, err := npz.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		h, feat, err := readFeatEntry(z, "x.npz", true)
		if err == nil && int64(len(feat)) != h.count {
			t.Fatalf("header %v with %d elements", h.shape, len(feat))
		}
	})
}

func FuzzTSV(f *testing.F) {
	f.Add(encodeTSV(tsvRec("1", 2, 3), tsvRec("2", 0, 0)))
	f.Add([]byte("image_id\timage_w\timage_h\tnum_boxes\tboxes\tfeatures\n1\t2\t3\t1\tb'AAAAAAAAAAAAAAAAAAAAAA=='\tAAAAAA==\n"))
	f.Add([]byte("1\t1\t1\t65536\t\t\n"))
	f.Add([]byte("\t\t\t\t\t\r\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, dim := range []int{0, 2} {
			tr := NewTSVReader(bytes.NewReader(b), "x.tsv")
			tr.Dim = dim
			for range 1000 {
				rec, err := tr.Next()
				if err != nil {
					if err != io.EOF && rec != nil {
						t.Fatal("record with error")
					}
					break
				}
				if len(rec.Boxes) != 4*rec.NumBoxes || len(rec.Feat) != rec.NumBoxes*rec.D {
					t.Fatalf("record with %d boxes, %d box values, %d features of %d", rec.NumBoxes, len(rec.Boxes), len(rec.Feat), rec.D)
				}
			}
		}
	})
}

func FuzzKarpathy(f *testing.F) {
	f.Add(karpathyJSON("coco", []string{"train", "val", "test", "restval"}, []int{5, 6, 5, 7}))
	f.Add(karpathyJSON("flickr30k", []string{"train", "val", "test"}, []int{5, 5, 4}))
	f.Add([]byte(`{"images": [{"split": "test", "cocoid": 1, "sentences": [{"raw": "a\nb"}]}], "x": [[{}]]}`))
	f.Add([]byte(`{"images": [`))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ReadKarpathy(bytes.NewReader(b), "k.json")
		if err != nil {
			return
		}
		for _, split := range []string{"train", "dev", "test", "testall", "restval"} {
			idx, err := k.SplitIndices(split)
			if err != nil {
				t.Fatal(err)
			}
			k.Captions(idx, 5)
			for _, sc := range []IDScheme{IDAuto, IDCocoID, IDImgID, IDFilename} {
				k.IDs(idx, sc)
			}
		}
	})
}

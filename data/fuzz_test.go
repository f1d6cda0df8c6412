package data

import (
	"bytes"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbinet/npyio/npz"

	"github.com/xmr-project/xmr/text"
)

// The fuzz targets feed arbitrary bytes to every parser: each must return
// an error, never panic or allocate without bound. Run one with e.g.
//
//	go test ./data -run '^$' -fuzz FuzzNPZ -fuzztime 1m
//
// The .npy reader itself has its fuzz targets in package npy.

// npySeeds returns .npy files to put in the seed archives.
func npySeeds() [][]byte {
	return [][]byte{
		npyOf([]int{2, 3, 4}, make([]float32, 24)),
		npyOf([]int{36, 4}, make([]float32, 144)),
		npyRaw("<f8", false, []int{2, 1}, f64le(1, 2)),
		npyRaw(">f2", true, []int{1, 1}, []byte{0x3c, 0}),
		npyRaw("<i4", false, []int{2, 1}, make([]byte, 8)),
		npyRaw("<f4", false, []int{5000, 2048}, nil),
		[]byte("\x93NUMPY\x01\x00"),
	}
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
		if err == nil && int64(len(feat)) != h.Len() {
			t.Fatalf("header %s with %d elements", h, len(feat))
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
	// Paths out of the image root, split names that are not Karpathy's,
	// a file name that gives an empty id, invisible captions.
	f.Add([]byte(`{"dataset": "coco", "images": [{"split": "test", "filepath": "../../../../etc", "filename": "passwd", "cocoid": 1, "sentences": [{"raw": "a"}]},` +
		`{"split": "test", "filepath": "val2014", "filename": "/etc/passwd", "cocoid": 2, "sentences": [{"raw": "b"}]}]}`))
	f.Add([]byte(`{"images": [{"split": "TRAIN", "filename": "a.jpg"}, {"split": "train ", "filename": ".jpg"}, {"split": "restval", "filename": "a\nb.jpg"}]}`))
	f.Add([]byte(`{"images": [{"split": "test", "filename": ".jpg", "sentences": [{"raw": "\ufeff"}, {"raw": "\u200b\u200b"}, {"raw": "\u0001"}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ReadKarpathy(bytes.NewReader(b), "k.json")
		if err != nil {
			if !strings.Contains(err.Error(), "k.json") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for i, im := range k.Images {
			if !slices.Contains(KarpathySplitNames, im.Split) {
				t.Fatalf("image %d: split %q accepted", i, im.Split)
			}
			for _, p := range []string{im.Filepath, im.Filename} {
				if filepath.IsAbs(p) || slices.Contains(strings.Split(filepath.ToSlash(p), "/"), "..") {
					t.Fatalf("image %d: path %q accepted", i, p)
				}
			}
		}
		for _, split := range []string{"train", "dev", "test", "testall", "restval"} {
			idx, err := k.SplitIndices(split)
			if err != nil {
				t.Fatal(err)
			}
			if caps, err := k.Captions(idx, 5); err == nil {
				for j, c := range caps {
					if text.Blank(c) {
						t.Fatalf("split %s: caption %d %q is blank", split, j, c)
					}
				}
			}
			for _, sc := range []IDScheme{IDAuto, IDCocoID, IDImgID, IDFilename} {
				if ids, err := k.IDs(idx, sc); err == nil {
					for _, id := range ids {
						if CheckImageID(id) != nil {
							t.Fatalf("split %s: id %q accepted", split, id)
						}
					}
				}
			}
		}
	})
}

// FuzzReadGrounding: any bytes fail cleanly or give one record per
// caption, in order, with non-negative word and region indices.
func FuzzReadGrounding(f *testing.F) {
	f.Add([]byte(`{"caption":0,"image":0,"words":[{"word":"red","index":1,"region":0,"regions":[0,2]}]}` + "\n" + `{"caption":1,"image":0,"words":[]}` + "\n"))
	f.Add([]byte("\n\n{\"caption\":0}\n"))
	f.Add([]byte(`{"caption":1}`))
	f.Add([]byte(`{"caption":0,"words":[{"index":-1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		gs, err := ReadGrounding(bytes.NewReader(b), "a.jsonl")
		if err != nil {
			if !strings.Contains(err.Error(), "a.jsonl") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for i, g := range gs {
			if g.Caption != i {
				t.Fatalf("record %d for caption %d", i, g.Caption)
			}
			for _, w := range g.Words {
				if w.Index < 0 || w.Region < 0 {
					t.Fatalf("word %+v", w)
				}
				w.Correct()
			}
		}
	})
}

// FuzzReadCaptions: any bytes fail cleanly, naming the file, or give
// captions none of which is blank or holds a line break.
func FuzzReadCaptions(f *testing.F) {
	for _, s := range []string{"a red circle\nTwo squares.\n", "a\r\nb", "\xef\xbb\xbfa\n", "a\n\nb\n", " \n", "", "\n", "a\n\u200b\n", "\xef\xbb\xbf\xef\xbb\xbf\n", "a\n\x01\x7f\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		caps, err := ReadCaptions(bytes.NewReader(b), "x_caps.txt")
		if err != nil {
			if !strings.Contains(err.Error(), "x_caps.txt") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for i, c := range caps {
			if text.Blank(c) || strings.ContainsRune(c, '\n') {
				t.Fatalf("caption %d = %q", i, c)
			}
		}
	})
}

// FuzzReadSizes: any bytes fail cleanly or give positive, finite sizes.
func FuzzReadSizes(f *testing.F) {
	for _, s := range []string{"1 640 480\n2 500 375\n", "# c\n\nx 1 1", "1 0 1", "1 1e39 1", "1 1 1\n1 2 2"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ReadSizes(bytes.NewReader(b), "sizes.txt")
		if err != nil {
			return
		}
		for id, wh := range m {
			if !(wh[0] > 0 && wh[1] > 0) || !isFinite32(wh[0]) || !isFinite32(wh[1]) {
				t.Fatalf("image %q: size %v", id, wh)
			}
		}
	})
}

// FuzzCOCOSizes: any bytes fail cleanly or give positive, finite sizes.
func FuzzCOCOSizes(f *testing.F) {
	f.Add([]byte(`{"info": {}, "images": [{"id": 9, "width": 640, "height": 480, "file_name": "x.jpg"}], "annotations": [{"id": 1}]}`))
	f.Add([]byte(`{"images": [{"id": 1, "width": 1e300, "height": 1}]}`))
	f.Add([]byte(`{"images": []}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m := map[string][2]float32{}
		if err := decodeCOCOSizes(bytes.NewReader(b), "captions.json", m); err != nil {
			return
		}
		for id, wh := range m {
			if !(wh[0] > 0 && wh[1] > 0) || !isFinite32(wh[0]) || !isFinite32(wh[1]) {
				t.Fatalf("image %q: size %v", id, wh)
			}
		}
	})
}

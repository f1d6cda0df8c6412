package data

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tsvRec builds a record of nb regions of D features for image id.
func tsvRec(id string, nb, D int) *TSVRecord {
	r := &TSVRecord{ImageID: id, Width: 640, Height: 480, NumBoxes: nb, D: D}
	for b := range nb {
		r.Boxes = append(r.Boxes, 64*float32(b), 48, 320, 480)
		for d := range D {
			r.Feat = append(r.Feat, float32(b)+float32(d)/1000)
		}
	}
	return r
}

func encodeTSV(recs ...*TSVRecord) []byte {
	var b []byte
	for _, r := range recs {
		b = EncodeTSVRecord(b, r)
	}
	return b
}

func TestTSVReader(t *testing.T) {
	big := tsvRec("7", 100, 2048) // a 1.1 MB line, longer than the read buffer
	recs := []*TSVRecord{tsvRec("391895", 3, 5), tsvRec("522418", 1, 5), tsvRec("empty", 0, 0), big}
	in := append([]byte("image_id\timage_w\timage_h\tnum_boxes\tboxes\tfeatures\r\n\n"), encodeTSV(recs...)...)
	in = bytes.TrimSuffix(in, []byte("\r\n")) // no final newline
	tr := NewTSVReader(bytes.NewReader(in), "x.tsv")
	for i, want := range recs {
		got, err := tr.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if got.ImageID != want.ImageID || got.NumBoxes != want.NumBoxes || got.D != want.D || got.Width != 640 || got.Height != 480 ||
			!slices.Equal(got.Boxes, want.Boxes) || !slices.Equal(got.Feat, want.Feat) {
			t.Fatalf("record %d: got %s %d boxes D %d, want %s %d D %d", i, got.ImageID, got.NumBoxes, got.D, want.ImageID, want.NumBoxes, want.D)
		}
		if got.Line != i+3 {
			t.Errorf("record %d on line %d, want %d", i, got.Line, i+3)
		}
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Fatalf("after last record: %v", err)
	}
}

// TestTSVVariants checks the layouts written by other versions of the
// extractor: Python 3 bytes reprs, float64 boxes, float64 features with a
// known dimension.
func TestTSVVariants(t *testing.T) {
	f64 := func(v []float32) string { return base64.StdEncoding.EncodeToString(f64le(v...)) }
	f32 := func(v []float32) string { return base64.StdEncoding.EncodeToString(f32le(v...)) }
	r := tsvRec("1", 2, 3)
	tests := []struct {
		name  string
		line  string
		dim   int
		wantD int
	}{
		{"py3 repr", fmt.Sprintf("1\t640\t480\t2\tb'%s'\tb'%s'\n", f32(r.Boxes), f32(r.Feat)), 0, 3},
		{"float64 boxes", fmt.Sprintf("1\t640.0\t480.0\t2\t%s\t%s\n", f64(r.Boxes), f32(r.Feat)), 0, 3},
		{"float64 features", fmt.Sprintf("1\t640\t480\t2\t%s\t%s\n", f32(r.Boxes), f64(r.Feat)), 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTSVReader(strings.NewReader(tt.line), "x.tsv")
			tr.Dim = tt.dim
			got, err := tr.Next()
			if err != nil {
				t.Fatal(err)
			}
			if got.D != tt.wantD || !slices.Equal(got.Boxes, r.Boxes) || !slices.Equal(got.Feat, r.Feat) {
				t.Fatalf("got D %d %v %v", got.D, got.Boxes, got.Feat)
			}
		})
	}
}

func TestTSVErrors(t *testing.T) {
	good := string(encodeTSV(tsvRec("1", 2, 3)))
	fields := strings.Split(strings.TrimSuffix(good, "\r\n"), "\t")
	with := func(i int, v string) string {
		f := slices.Clone(fields)
		f[i] = v
		return "\n" + strings.Join(f, "\t") + "\n" // on line 2
	}
	tests := []struct {
		name, in string
		frags    []string
	}{
		{"fields", "1\t2\t3\n", []string{"x.tsv: line 1: has 3 tab-separated fields, want 6"}},
		{"extra field", strings.TrimSuffix(good, "\r\n") + "\textra\n", []string{"line 1: has more than 6"}},
		{"empty id", with(0, " "), []string{"line 2 field image_id: is empty"}},
		{"width", with(1, "wide"), []string{"line 2 field image_w: is \"wide\""}},
		{"height", with(2, "-5"), []string{"line 2 field image_h"}},
		{"num_boxes", with(3, "two"), []string{"line 2 field num_boxes"}},
		{"num_boxes mismatch", with(3, "3"), []string{"line 2 field boxes: 32 bytes, num_boxes 3 needs 48 (float32)"}},
		{"base64", with(5, "!!!!"), []string{"line 2 field features: unreadable base64"}},
		{"features size", with(5, base64.StdEncoding.EncodeToString(make([]byte, 10))), []string{"line 2 field features: 10 bytes is not num_boxes 2 x D"}},
		{"features for no boxes", "1\t1\t1\t0\t\tAAAA\n", []string{"field features: 3 bytes for num_boxes 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTSVReader(strings.NewReader(tt.in), "x.tsv")
			_, err := tr.Next()
			wantErr(t, err, tt.frags...)
		})
	}
	// A known dimension that does not match.
	tr := NewTSVReader(strings.NewReader(good), "x.tsv")
	tr.Dim = 4
	_, err := tr.Next()
	wantErr(t, err, "field features: 24 bytes, num_boxes 2 x 4 features needs 32 (float32) or 64 (float64)")
}

func TestCollectTSV(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.tsv"), filepath.Join(dir, "b.tsv")
	writeFile(t, a, encodeTSV(tsvRec("1", 3, 4), tsvRec("2", 2, 4), tsvRec("3", 1, 4)))
	writeFile(t, b, encodeTSV(tsvRec("4", 5, 4), tsvRec("5", 4, 4)))
	g, sizes, err := CollectTSV(context.Background(), []string{a, b}, []string{"4", "2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.N != 2 || g.R != 5 || g.D != 4 || !slices.Equal(g.Count, []int{5, 2}) || sizes[1] != [2]float32{640, 480} {
		t.Fatalf("shape (%d,%d,%d) count %v sizes %v", g.N, g.R, g.D, g.Count, sizes)
	}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	want := [5]float32{0.4, 0.1, 0.5, 1, 0.09}
	got := g.Box5(0, 4)
	for c := range got {
		if math.Abs(float64(got[c]-want[c])) > 1e-6 {
			t.Errorf("Box5(0,4) = %v, want %v", got, want)
		}
	}
	if !slices.Equal(g.Region(1, 1), []float32{1, 1.001, 1.002, 1.003}) || !slices.Equal(g.Region(1, 2), make([]float32, 4)) {
		t.Errorf("image 1 regions: %v %v", g.Region(1, 1), g.Region(1, 2))
	}

	_, _, err = CollectTSV(context.Background(), []string{a, b}, []string{"1", "9", "8"}, nil)
	wantErr(t, err, "2 of 3 image ids not found", "e.g. 9, 8")
	_, _, err = CollectTSV(context.Background(), []string{a}, []string{"1", "1"}, nil)
	wantErr(t, err, "image id 1 requested twice")
	_, _, err = CollectTSV(context.Background(), []string{filepath.Join(dir, "absent.tsv")}, []string{"1"}, nil)
	wantErr(t, err, "absent.tsv")

	writeFile(t, b, encodeTSV(tsvRec("4", 2, 3)))
	_, _, err = CollectTSV(context.Background(), []string{a, b}, []string{"1", "4"}, nil)
	wantErr(t, err, "b.tsv: line 1 (image 4): 3 features per region", "a.tsv line 1 has 4")

	nan := tsvRec("6", 2, 3)
	nan.Feat[4] = float32(math.Inf(-1))
	writeFile(t, b, encodeTSV(nan))
	_, _, err = CollectTSV(context.Background(), []string{b}, []string{"6"}, nil)
	wantErr(t, err, "b.tsv: line 1 (image 6): region 1 feature 1 is -Inf")
}

func TestLoadTSV(t *testing.T) {
	dir := t.TempDir()
	kpath := filepath.Join(dir, "dataset_flickr30k.json")
	writeFile(t, kpath, karpathyJSON("flickr30k", []string{"test", "train", "test"}, repeat(5, 3)))
	tsv := filepath.Join(dir, "f.tsv")
	// The extractor names Flickr images by file name: 5000.jpg -> 5000.
	writeFile(t, tsv, encodeTSV(tsvRec("5002", 2, 3), tsvRec("5001", 2, 3), tsvRec("5000", 1, 3)))
	s, err := LoadTSV(context.Background(), []string{tsv}, kpath, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.ImageIDs, []string{"5000", "5002"}) || !slices.Equal(s.Images.Count, []int{1, 2}) || s.Captions[5] != "A photo 2 of thing 0." {
		t.Fatalf("ids %v count %v captions %q", s.ImageIDs, s.Images.Count, s.Captions)
	}
}

// TestCollectTSVBoxOutside: a box coordinate more than one image size
// outside its record's image_w x image_h is refused, naming the file, the
// line, the image and the coordinate; one within that reach is kept.
func TestCollectTSVBoxOutside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.tsv")
	tests := []struct {
		name  string
		coord int // of region 1
		value float32
		frags []string // nil: accepted
	}{
		{"huge", 2, 1e30, []string{"f.tsv: line 1 (image 7): region 1 box coordinate 2 is 1e+30", "640 x 480 image", "want a box within 1 image size of it"}},
		{"far right", 2, 1900, []string{"f.tsv: line 1 (image 7): region 1 box coordinate 2 is 1900, 2.97 image sizes"}},
		{"far above", 1, -500, []string{"f.tsv: line 1 (image 7): region 1 box coordinate 1 is -500, -1.04 image sizes"}},
		{"within reach", 2, 1200, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := tsvRec("7", 2, 3)
			rec.Boxes[4+tt.coord] = tt.value
			writeFile(t, path, encodeTSV(rec))
			g, _, err := CollectTSV(context.Background(), []string{path}, []string{"7"}, nil)
			if tt.frags == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got, want := g.Boxes[4+tt.coord], tt.value/640; math.Abs(float64(got-want)) > 1e-6 {
					t.Errorf("box coordinate %v, want %v", got, want)
				}
				return
			}
			wantErr(t, err, tt.frags...)
		})
	}
}

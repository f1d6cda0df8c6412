package data

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// buFixture writes bottom-up files for ids into dir: image j has rows[j]
// regions of D features (value 10*j + region + d/100) and pixel boxes
// scaled to a 200 x 100 image. It returns the Karpathy file path.
func buFixture(t *testing.T, dir string, ids []string, rows []int, D int) {
	t.Helper()
	for j, id := range ids {
		feat := make([]float32, rows[j]*D)
		boxes := make([]float32, rows[j]*4)
		for r := range rows[j] {
			for d := range D {
				feat[r*D+d] = float32(10*j+r) + float32(d)/100
			}
			copy(boxes[r*4:], []float32{20, 10, 200, 50 + float32(r)})
		}
		writeFile(t, filepath.Join(dir, "bu_att", id+".npz"), npzBytes(t, map[string][]byte{"feat.npy": npyOf([]int{rows[j], D}, feat)}))
		writeFile(t, filepath.Join(dir, "bu_box", id+".npy"), npyOf([]int{rows[j], 4}, boxes))
	}
}

func TestLoadBottomUpCOCO(t *testing.T) {
	dir := t.TempDir()
	kpath := filepath.Join(dir, "dataset_coco.json")
	writeFile(t, kpath, karpathyJSON("coco", []string{"train", "test", "val", "test", "test"}, []int{5, 6, 5, 5, 5}))
	// test = images 1, 3, 4 -> cocoids 100001, 100003, 100004
	ids := []string{"100001", "100003", "100004"}
	buFixture(t, dir, ids, []int{3, 1, 2}, 4)
	ann := map[string]any{
		"info":        map[string]any{"year": 2014},
		"images":      []map[string]any{{"id": 100001, "width": 200, "height": 100, "file_name": "a.jpg"}, {"id": 100003, "width": 200, "height": 100}},
		"annotations": []map[string]any{{"id": 1, "image_id": 100001, "caption": "x"}},
	}
	ann2 := map[string]any{"images": []map[string]any{{"id": 100004, "width": 200, "height": 100}}}
	for i, a := range []any{ann, ann2} {
		b, _ := json.Marshal(a)
		writeFile(t, filepath.Join(dir, fmt.Sprintf("captions%d.json", i)), b)
	}
	opt := &BottomUpOptions{COCOAnnotations: []string{filepath.Join(dir, "captions0.json"), filepath.Join(dir, "captions1.json")}, Workers: 2}
	s, err := LoadBottomUp(context.Background(), dir, kpath, "test", opt)
	if err != nil {
		t.Fatal(err)
	}
	g := s.Images
	if g.N != 3 || g.R != 3 || g.D != 4 || !slices.Equal(g.Count, []int{3, 1, 2}) || !slices.Equal(s.ImageIDs, ids) {
		t.Fatalf("shape (%d,%d,%d) count %v ids %v", g.N, g.R, g.D, g.Count, s.ImageIDs)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	// Image 1 (second) has one region; slots 1 and 2 are zero padding.
	if v := g.Region(1, 0)[2]; v != 10+0.02 {
		t.Errorf("image 1 region 0 feature 2 = %v", v)
	}
	if !slices.Equal(g.Region(1, 1), make([]float32, 4)) || g.Box5(1, 1) != [5]float32{} {
		t.Error("padding not zero")
	}
	want := [5]float32{0.1, 0.1, 1, 0.51, 0.9 * 0.41}
	if got := g.Box5(2, 1); math.Abs(float64(got[4]-want[4])) > 1e-6 || got[0] != want[0] || got[3] != want[3] {
		t.Errorf("Box5(2,1) = %v, want %v", got, want)
	}
	if s.Sizes[0] != [2]float32{200, 100} || len(s.Captions) != 15 || s.Captions[5] != "A photo 3 of thing 0." {
		t.Errorf("sizes %v captions %q", s.Sizes, s.Captions)
	}

	// The same through a precomp round trip.
	out := t.TempDir()
	if err := WritePrecomp(context.Background(), out, s); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPrecomp(context.Background(), out, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	equalSplits(t, p, s)
}

func TestLoadBottomUpFlickrSizesFile(t *testing.T) {
	dir := t.TempDir()
	k, _ := ReadKarpathy(mustReader(karpathyJSON("flickr30k", []string{"test", "train", "test"}, repeat(5, 3))), "f.json")
	buFixture(t, dir, []string{"0", "2"}, []int{2, 2}, 3) // TERAN names Flickr files by imgid
	sizes := filepath.Join(dir, "sizes.txt")
	if err := WriteSizesFile(sizes, []string{"0", "2", "1"}, [][2]float32{{200, 100}, {200, 100}, {5, 5}}); err != nil {
		t.Fatal(err)
	}
	s, err := LoadBottomUp(context.Background(), dir, "", "test", &BottomUpOptions{Karpathy: k, SizesFile: sizes})
	if err != nil {
		t.Fatal(err)
	}
	if s.Images.N != 2 || s.ID(1) != "2" || s.Images.Box5(1, 0)[2] != 1 {
		t.Fatalf("%+v", s.Images)
	}
	// Files named by file name instead.
	buFixture(t, dir, []string{"5000", "5002"}, []int{2, 2}, 3)
	if err := WriteSizesFile(sizes, []string{"5000", "5002"}, [][2]float32{{200, 100}, {200, 100}}); err != nil {
		t.Fatal(err)
	}
	s, err = LoadBottomUp(context.Background(), dir, "", "test", &BottomUpOptions{Karpathy: k, SizesFile: sizes, IDs: IDFilename})
	if err != nil || s.ID(0) != "5000" {
		t.Fatalf("by filename: %v", err)
	}
}

func mustReader(b []byte) *os.File {
	f, err := os.CreateTemp("", "karpathy-*.json")
	if err != nil {
		panic(err)
	}
	f.Write(b)
	f.Seek(0, 0)
	os.Remove(f.Name())
	return f
}

func TestLoadBottomUpErrors(t *testing.T) {
	k, _ := ReadKarpathy(mustReader(karpathyJSON("coco", []string{"test", "test"}, repeat(5, 2))), "dataset_coco.json")
	ids := []string{"100000", "100001"}
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) *BottomUpOptions
		frags []string
	}{
		{"missing att", func(t *testing.T, dir string) *BottomUpOptions {
			buFixture(t, dir, ids, []int{2, 2}, 3)
			os.Remove(filepath.Join(dir, "bu_att", "100001.npz"))
			return nil
		}, []string{"bu_att/100001.npz", "missing for image id 100001 listed in split test"}},
		{"missing box", func(t *testing.T, dir string) *BottomUpOptions {
			buFixture(t, dir, ids, []int{2, 2}, 3)
			os.Remove(filepath.Join(dir, "bu_box", "100000.npy"))
			return nil
		}, []string{"bu_box/100000.npy", "missing for image id 100000"}},
		{"no sizes", func(t *testing.T, dir string) *BottomUpOptions {
			buFixture(t, dir, ids, []int{2, 2}, 3)
			return &BottomUpOptions{}
		}, []string{"bu_box holds pixel boxes, which need image sizes"}},
		{"size missing", func(t *testing.T, dir string) *BottomUpOptions {
			buFixture(t, dir, ids, []int{2, 2}, 3)
			writeFile(t, filepath.Join(dir, "s.txt"), []byte("# id w h\n100000 640 480\n"))
			return &BottomUpOptions{SizesFile: filepath.Join(dir, "s.txt")}
		}, []string{"no size for image id 100001", "s.txt"}},
		{"dim mismatch", func(t *testing.T, dir string) *BottomUpOptions {
			buFixture(t, dir, ids[:1], []int{2}, 3)
			buFixture(t, dir, ids[1:], []int{2}, 4)
			return nil
		}, []string{"bu_att/100001.npz: 4 features per region", "has 3"}},
		{"box count", func(t *testing.T, dir string) *BottomUpOptions {
			buFixture(t, dir, ids, []int{2, 2}, 3)
			writeFile(t, filepath.Join(dir, "bu_box", "100001.npy"), npyOf([]int{3, 4}, make([]float32, 12)))
			return nil
		}, []string{"bu_box/100001.npy: 3 boxes, but", "has 2 regions"}},
		{"no feat key", func(t *testing.T, dir string) *BottomUpOptions {
			buFixture(t, dir, ids, []int{2, 2}, 3)
			writeFile(t, filepath.Join(dir, "bu_att", "100000.npz"), npzBytes(t, map[string][]byte{"x.npy": npyOf([]int{1, 3}, make([]float32, 3))}))
			return nil
		}, []string{"bu_att/100000.npz: no array \"feat\" (has x.npy)"}},
		{"not zip", func(t *testing.T, dir string) *BottomUpOptions {
			buFixture(t, dir, ids, []int{2, 2}, 3)
			writeFile(t, filepath.Join(dir, "bu_att", "100000.npz"), []byte("garbage"))
			return nil
		}, []string{"bu_att/100000.npz: not an .npz (zip) file"}},
		{"nan", func(t *testing.T, dir string) *BottomUpOptions {
			buFixture(t, dir, ids, []int{2, 2}, 3)
			writeFile(t, filepath.Join(dir, "bu_att", "100001.npz"), npzBytes(t, map[string][]byte{"feat.npy": npyOf([]int{2, 3}, []float32{0, 0, 0, 0, float32(math.NaN()), 0})}))
			return nil
		}, []string{"bu_att/100001.npz: feat: region 1 feature 1 is NaN"}},
		{"box far outside", func(t *testing.T, dir string) *BottomUpOptions {
			buFixture(t, dir, ids, []int{2, 2}, 3)
			writeFile(t, filepath.Join(dir, "bu_box", "100001.npy"), npyOf([]int{2, 4}, []float32{0, 0, 10, 10, 0, 0, 1e30, 10}))
			return nil
		}, []string{"bu_box/100001.npy: region 1 coordinate 2 is 1e+30", "640 x 480 image 100001", "want a box within 1 image size of it"}},
		{"box far left", func(t *testing.T, dir string) *BottomUpOptions {
			buFixture(t, dir, ids, []int{2, 2}, 3)
			writeFile(t, filepath.Join(dir, "bu_box", "100000.npy"), npyOf([]int{2, 4}, []float32{0, -500, 10, 10, 0, 0, 10, 10}))
			return nil
		}, []string{"bu_box/100000.npy: region 0 coordinate 1 is -500, -1.04 image sizes", "want a box within 1 image size"}},
		{"truncated feat", func(t *testing.T, dir string) *BottomUpOptions {
			buFixture(t, dir, ids, []int{2, 2}, 3)
			writeFile(t, filepath.Join(dir, "bu_att", "100001.npz"), npzBytes(t, map[string][]byte{"feat.npy": npyOf([]int{2, 3}, make([]float32, 6))[:130]}))
			return nil
		}, []string{"bu_att/100001.npz: feat: truncated: header says (2,3) float32 = 24 bytes of data, file has"}},
		{"empty split", func(t *testing.T, dir string) *BottomUpOptions {
			return &BottomUpOptions{Karpathy: &Karpathy{Dataset: "coco", Images: []KarpathyImage{{Split: "train"}}}}
		}, []string{`split "test" has no images`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			sizes := filepath.Join(dir, "sizes.txt")
			WriteSizesFile(sizes, ids, [][2]float32{{640, 480}, {640, 480}})
			opt := tt.setup(t, dir)
			if opt == nil {
				opt = &BottomUpOptions{SizesFile: sizes}
			}
			if opt.Karpathy == nil {
				opt.Karpathy = k
			}
			_, err := LoadBottomUp(context.Background(), dir, "dataset_coco.json", "test", opt)
			wantErr(t, err, tt.frags...)
		})
	}
}

func TestLoadSizesFileErrors(t *testing.T) {
	tests := []struct{ in, frag string }{
		{"a 1\n", "line 1: want \"id width height\", have 2 fields"},
		{"\n\na 1 x\n", "line 3: bad height \"x\""},
		{"a 0 1\n", "bad width"},
		{"a 1 1\na 2 2\n", "line 2: image id a listed twice"},
	}
	dir := t.TempDir()
	for i, tt := range tests {
		p := filepath.Join(dir, fmt.Sprint(i))
		writeFile(t, p, []byte(tt.in))
		_, err := LoadSizesFile(p)
		wantErr(t, err, p, tt.frag)
	}
}

func TestLoadCOCOSizesErrors(t *testing.T) {
	tests := []struct{ in, frag string }{
		{`{"annotations": []}`, "no \"images\" array"},
		{`{"images": [{"id": 1, "width": 10}]}`, "images[0] (near byte 34): want an id and a positive, finite width and height"},
		{`{"images": [{"id": 1, "width": 1e300, "height": 10}]}`, "images[0] (near byte 51): want an id and a positive, finite width and height"},
		{`{"images": [{"id": "x", "width": 10, "height": 10}]}`, "images[0]"},
		{`{"images": [`, "unexpected EOF"},
	}
	dir := t.TempDir()
	for i, tt := range tests {
		p := filepath.Join(dir, fmt.Sprint(i))
		writeFile(t, p, []byte(tt.in))
		_, err := LoadCOCOSizes(p)
		wantErr(t, err, p, tt.frag)
	}
}

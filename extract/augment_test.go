package extract

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/detect"
)

func TestCopyOf(t *testing.T) {
	for _, c := range []struct {
		id, photo string
		ok        bool
	}{
		{"1000268201_693b08cb0e~aug1", "1000268201_693b08cb0e", true},
		{"a~mirror~aug12", "a~mirror", true},
		{"a", "", false},
		{"a~mirror", "", false},
		{"a~aug", "", false},   // no number
		{"~aug1", "", false},   // no photo
		{"a~aug1x", "", false}, // not a number
		{"a~aug1~mirror", "", false},
	} {
		photo, ok := CopyOf(c.id)
		if photo != c.photo || ok != c.ok {
			t.Errorf("CopyOf(%q) = %q, %v; want %q, %v", c.id, photo, ok, c.photo, c.ok)
		}
	}
}

func TestAugmentSplit(t *testing.T) {
	s := MirrorSplit(SplitSpec{Name: "train", Items: []Item{{Path: "a.jpg", ID: "a"}, {Path: "b.jpg", ID: "b"}},
		Captions: [][]string{{"a dog on the left"}, {"a cat"}}})
	got := AugmentSplit(s, 2, 7)
	var ids []string
	for _, it := range got.Items {
		ids = append(ids, it.ID)
	}
	want := []string{"a", "b", "a~mirror", "b~mirror",
		"a~aug1", "b~aug1", "a~mirror~aug1", "b~mirror~aug1",
		"a~aug2", "b~aug2", "a~mirror~aug2", "b~mirror~aug2"}
	if !slices.Equal(ids, want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	if len(got.Captions) != len(got.Items) {
		t.Fatalf("%d captions lists for %d items", len(got.Captions), len(got.Items))
	}
	for i, it := range got.Items[4:] {
		src := i % 4 // the item the copy is a view of
		if !slices.Equal(got.Captions[4+i], s.Captions[src]) {
			t.Errorf("copy %s: captions %q, want those of %s, %q", it.ID, got.Captions[4+i], s.Items[src].ID, s.Captions[src])
		}
		if it.Mirror != s.Items[src].Mirror || it.Path != s.Items[src].Path {
			t.Errorf("copy %s: mirror %v, path %s; want %s's %v, %s", it.ID, it.Mirror, it.Path, s.Items[src].ID, s.Items[src].Mirror, s.Items[src].Path)
		}
	}
	if got.Captions[6][0] != "a dog on the right" {
		t.Errorf("a mirror's view has caption %q, want the mirror's sides swapped", got.Captions[6][0])
	}
	seen := map[uint64]bool{}
	for _, it := range got.Items[4:] {
		if it.Augment == 0 || seen[it.Augment] {
			t.Fatalf("copy %+v: want a seed of its own", it)
		}
		seen[it.Augment] = true
	}
	// The views of the originals are those the call gave before mirrors
	// had views: their seeds depend on k and the original's position only.
	plain := AugmentSplit(SplitSpec{Name: "train", Items: s.Items[:2], Captions: s.Captions[:2]}, 2, 7)
	if plain.Items[2] != got.Items[4] || plain.Items[5] != got.Items[9] {
		t.Errorf("the originals' views changed with the mirrors': %+v %+v against %+v %+v", plain.Items[2], plain.Items[5], got.Items[4], got.Items[9])
	}
	if again := AugmentSplit(s, 2, 7); !slices.Equal(again.Items, got.Items) {
		t.Fatal("the same call gives other views")
	}
	if other := AugmentSplit(s, 2, 8); slices.Equal(other.Items, got.Items) {
		t.Fatal("another seed gives the same views")
	}
}

func TestPictureAugment(t *testing.T) {
	const S = detect.InputSize
	picture := func() *Picture {
		p := &Picture{RGB: make([]float32, S*S*3), Width: 640, Height: 480}
		for y := 0; y < S; y++ {
			for x := 0; x < S; x++ {
				for c := 0; c < 3; c++ {
					p.RGB[(y*S+x)*3+c] = float32((x*(c+1) + y) % 256)
				}
			}
		}
		return p
	}
	a, b, c := picture(), picture(), picture()
	a.Augment(11)
	b.Augment(11)
	c.Augment(12)
	if !slices.Equal(a.RGB, b.RGB) {
		t.Fatal("the same seed gives other pixels")
	}
	if slices.Equal(a.RGB, c.RGB) || slices.Equal(a.RGB, picture().RGB) {
		t.Fatal("another seed gives the same view, or the view is the picture")
	}
	if a.Width != 640 || a.Height != 480 || len(a.RGB) != S*S*3 {
		t.Fatalf("size %dx%d, %d values", a.Width, a.Height, len(a.RGB))
	}
	for i, v := range a.RGB {
		if v < 0 || v > 255 {
			t.Fatalf("value %d is %v: want 0..255", i, v)
		}
	}
	// A grey picture stays one grey: the crop of a uniform picture is
	// uniform, and the colour changes move every pixel alike.
	g := &Picture{RGB: slices.Repeat([]float32{100}, S*S*3)}
	g.Augment(5)
	for i, v := range g.RGB {
		if math.Abs(float64(v-g.RGB[0])) > 1e-3 {
			t.Fatalf("pixel value %d is %v, the first %v", i, v, g.RGB[0])
		}
	}
}

// buildWithFake extracts s into dir/out with a fake detector and returns
// the extractor and the split it wrote.
func buildWithFake(t *testing.T, dir string, s SplitSpec) (*Extractor, *data.Split) {
	t.Helper()
	e := newFake(t, &fakeDetector{dets: someDets}, Options{MaxBoxes: 4})
	out := filepath.Join(dir, "out")
	if _, err := Build(context.Background(), e, out, []SplitSpec{s}, BuildOptions{ChunkSize: 3}); err != nil {
		t.Fatal(err)
	}
	got, err := data.LoadPrecomp(context.Background(), out, "train", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { got.Close() })
	return e, got
}

// An augmented copy is extracted from its view of the photo: Build gives
// it the features that Run gives the picture augmented with its seed.
func TestAugmentedCopyFeatures(t *testing.T) {
	dir := t.TempDir()
	s := AugmentSplit(collection(t, filepath.Join(dir, "img"), "train", 2), 1, 3)
	e, got := buildWithFake(t, dir, s)
	pic, err := LoadFile(s.Items[3].Path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	pic.Augment(s.Items[3].Augment)
	f, err := e.Run(context.Background(), pic)
	if err != nil {
		t.Fatal(err)
	}
	if got.NumImages() != 4 || got.ID(3) != s.Items[1].ID+AugmentSuffix+"1" || !slices.Equal(got.Images.Image(3), f.Regions) {
		t.Errorf("the augmented copy's features are not its view's (%d images, id %s)", got.NumImages(), got.ID(3))
	}
	if slices.Equal(got.Images.Image(1), got.Images.Image(3)) {
		t.Error("the augmented copy has the original's features")
	}
}

// A mirror image's augmented copy is extracted from the view of the
// mirrored photo: mirrored first, then cropped and jittered.
func TestAugmentedMirrorFeatures(t *testing.T) {
	dir := t.TempDir()
	s := AugmentSplit(MirrorSplit(collection(t, filepath.Join(dir, "img"), "train", 2)), 1, 3)
	e, got := buildWithFake(t, dir, s)
	const k = 6 // a, b, a~mirror, b~mirror, a~aug1, b~aug1, a~mirror~aug1
	it := s.Items[k]
	if got.NumImages() != 8 || got.ID(k) != s.Items[2].ID+AugmentSuffix+"1" || !it.Mirror {
		t.Fatalf("%d images, image %d is %q (mirror %v); want 8, the first mirror's view", got.NumImages(), k, got.ID(k), it.Mirror)
	}
	view := func(mirror bool) []float32 {
		pic, err := LoadFile(it.Path, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if mirror {
			pic.Mirror()
		}
		pic.Augment(it.Augment)
		f, err := e.Run(context.Background(), pic)
		if err != nil {
			t.Fatal(err)
		}
		return f.Regions
	}
	if !slices.Equal(got.Images.Image(k), view(true)) {
		t.Error("the mirror's augmented copy does not have the features of the mirrored photo's view")
	}
	if slices.Equal(got.Images.Image(k), view(false)) {
		t.Error("the mirror's augmented copy has the features of the unmirrored photo's view")
	}
}

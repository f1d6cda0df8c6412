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

func TestAugmentSplit(t *testing.T) {
	s := MirrorSplit(SplitSpec{Name: "train", Items: []Item{{Path: "a.jpg", ID: "a"}, {Path: "b.jpg", ID: "b"}},
		Captions: [][]string{{"a dog on the left"}, {"a cat"}}})
	got := AugmentSplit(s, 2, 7)
	var ids []string
	for _, it := range got.Items {
		ids = append(ids, it.ID)
	}
	want := []string{"a", "b", "a~mirror", "b~mirror", "a~aug1", "b~aug1", "a~aug2", "b~aug2"}
	if !slices.Equal(ids, want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	if got.Captions[4][0] != "a dog on the left" || got.Captions[7][0] != "a cat" || len(got.Captions) != len(got.Items) {
		t.Fatalf("captions %v: want each copy's image's captions as they are", got.Captions)
	}
	seen := map[uint64]bool{}
	for _, it := range got.Items[4:] {
		if it.Augment == 0 || it.Mirror || seen[it.Augment] {
			t.Fatalf("copy %+v: want a seed of its own, not mirrored", it)
		}
		seen[it.Augment] = true
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

// An augmented copy is extracted from its view of the photo: Build gives
// it the features that Run gives the picture augmented with its seed.
func TestAugmentedCopyFeatures(t *testing.T) {
	dir := t.TempDir()
	s := AugmentSplit(collection(t, filepath.Join(dir, "img"), "train", 2), 1, 3)
	e := newFake(t, &fakeDetector{dets: someDets}, Options{MaxBoxes: 4})
	out := filepath.Join(dir, "out")
	if _, err := Build(context.Background(), e, out, []SplitSpec{s}, BuildOptions{ChunkSize: 3}); err != nil {
		t.Fatal(err)
	}
	got, err := data.LoadPrecomp(context.Background(), out, "train", nil)
	if err != nil {
		t.Fatal(err)
	}
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

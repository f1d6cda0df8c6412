package learn

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/data"
)

func TestPickImages(t *testing.T) {
	for _, c := range []struct{ n, total int }{{1, 1}, {1, 181}, {90, 181}, {181, 181}, {7, 10}} {
		a := pickImages(c.n, c.total, 1)
		if len(a) != c.n {
			t.Fatalf("pickImages(%d, %d): %d indices", c.n, c.total, len(a))
		}
		if !slices.IsSorted(a) || len(slices.Compact(slices.Clone(a))) != c.n {
			t.Errorf("pickImages(%d, %d) = %v: want distinct increasing indices", c.n, c.total, a)
		}
		if a[0] < 0 || a[c.n-1] >= c.total {
			t.Errorf("pickImages(%d, %d) = %v: out of 0..%d", c.n, c.total, a, c.total-1)
		}
		if b := pickImages(c.n, c.total, 1); !slices.Equal(a, b) {
			t.Errorf("pickImages(%d, %d) is not deterministic: %v then %v", c.n, c.total, a, b)
		}
	}
	// Different seeds draw different images (a fixed draw that ignored the
	// seed would pass the checks above).
	if a, b := pickImages(90, 181, 1), pickImages(90, 181, 2); slices.Equal(a, b) {
		t.Errorf("seeds 1 and 2 drew the same images %v", a)
	}
	// Not simply the first n.
	if a := pickImages(90, 181, 1); a[89] == 89 {
		t.Errorf("seed 1 drew the first 90 images")
	}
}

// testSplit is a split of n images with 2 regions of 3 features, boxes,
// counts, ids, sizes and 5 captions each, every value naming its image.
func testSplit(name string, n int) *data.Split {
	g := &data.Regions{N: n, R: 2, D: 3}
	s := &data.Split{Name: name, Images: g, CapsPerImage: 5}
	for i := range n {
		for r := range 2 {
			for d := range 3 {
				g.Feat = append(g.Feat, float32(100*i+10*r+d))
			}
			g.Boxes = append(g.Boxes, 0.1, 0.1, 0.5, float32(i+1)/float32(n+1))
		}
		g.Count = append(g.Count, 1+i%2)
		for k := range 5 {
			s.Captions = append(s.Captions, fmt.Sprintf("%s image %d caption %d", name, i, k))
		}
		s.ImageIDs = append(s.ImageIDs, fmt.Sprintf("%s-%d.jpg", name, i))
		s.Sizes = append(s.Sizes, [2]float32{float32(200 + i), 300})
	}
	return s
}

func TestSubsetSplit(t *testing.T) {
	s := testSplit("train", 6)
	idx := []int{1, 4, 5}
	sub := subsetSplit(s, idx)
	if err := sub.Validate(); err != nil {
		t.Fatal(err)
	}
	if sub.NumImages() != 3 || sub.NumCaptions() != 15 || sub.Name != "train" {
		t.Fatalf("subset of %v: %d images, %d captions, name %q", idx, sub.NumImages(), sub.NumCaptions(), sub.Name)
	}
	for j, i := range idx {
		if !slices.Equal(sub.CaptionsOf(j), s.CaptionsOf(i)) {
			t.Errorf("image %d (was %d): captions %q, want %q", j, i, sub.CaptionsOf(j), s.CaptionsOf(i))
		}
		if !slices.Equal(sub.Images.Image(j), s.Images.Image(i)) {
			t.Errorf("image %d (was %d): features %v, want %v", j, i, sub.Images.Image(j), s.Images.Image(i))
		}
		if sub.Images.Box5(j, 0) != s.Images.Box5(i, 0) || sub.Images.NumRegions(j) != s.Images.NumRegions(i) {
			t.Errorf("image %d (was %d): boxes or region count differ", j, i)
		}
		if sub.ImageIDs[j] != s.ImageIDs[i] || sub.Sizes[j] != s.Sizes[i] {
			t.Errorf("image %d (was %d): id %q size %v, want %q %v", j, i, sub.ImageIDs[j], sub.Sizes[j], s.ImageIDs[i], s.Sizes[i])
		}
	}
	// The subset is a copy: changing it leaves the split as it was.
	sub.Images.Feat[0] = -1
	if s.Images.Image(1)[0] != 100 {
		t.Errorf("the subset shares its features with the split")
	}
}

// TestWriteSubset writes a precomp set, then its subsets: the train split
// has the drawn images with their captions, dev and test are unchanged,
// and an out-of-range count is refused naming the range.
func TestWriteSubset(t *testing.T) {
	ctx := context.Background()
	orig := t.TempDir()
	for _, s := range []*data.Split{testSplit("train", 10), testSplit("dev", 3), testSplit("test", 4)} {
		s.Images.Count = nil // global-style: every slot valid, as flickr8k-mini
		if err := data.WritePrecomp(ctx, orig, s); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TMPDIR", t.TempDir())
	src := data.Source{Path: orig}
	load := func(dir, split string) *data.Split {
		t.Helper()
		s, err := data.Source{Path: dir}.Load(ctx, split)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	full := load(orig, "train")
	for _, n := range []int{1, 4, 10} {
		dir, total, err := writeSubset(ctx, src, n, 3)
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		if total != 10 {
			t.Errorf("n=%d: total %d, want 10", n, total)
		}
		tr := load(dir, "train")
		if tr.NumImages() != n || tr.NumCaptions() != 5*n {
			t.Fatalf("n=%d: %d images, %d captions", n, tr.NumImages(), tr.NumCaptions())
		}
		for j, i := range pickImages(n, 10, 3) {
			if tr.ID(j) != full.ID(i) || !slices.Equal(tr.CaptionsOf(j), full.CaptionsOf(i)) || !slices.Equal(tr.Images.Image(j), full.Images.Image(i)) {
				t.Errorf("n=%d: train image %d is %s %q, want %s %q", n, j, tr.ID(j), tr.CaptionsOf(j), full.ID(i), full.CaptionsOf(i))
			}
		}
		for _, split := range []string{"dev", "test"} {
			a, b := load(orig, split), load(dir, split)
			if !slices.Equal(a.Captions, b.Captions) || !slices.Equal(a.ImageIDs, b.ImageIDs) || !slices.Equal(a.Images.Feat, b.Images.Feat) ||
				!slices.Equal(a.Images.Boxes, b.Images.Boxes) || !slices.Equal(a.Sizes, b.Sizes) {
				t.Errorf("n=%d: the %s split changed", n, split)
			}
		}
		// The same seed writes the same subset.
		again, _, err := writeSubset(ctx, src, n, 3)
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(again)
		for _, f := range []string{"train_caps.txt", "train_ims.npy", "train_ids.txt"} {
			x, _ := os.ReadFile(filepath.Join(dir, f))
			y, _ := os.ReadFile(filepath.Join(again, f))
			if len(x) == 0 || string(x) != string(y) {
				t.Errorf("n=%d: %s differs between two writes with seed 3", n, f)
			}
		}
	}
	before, _ := filepath.Glob(filepath.Join(os.Getenv("TMPDIR"), "xmr-learn-data-*"))
	for _, n := range []int{0, 11} {
		dir, _, err := writeSubset(ctx, src, n, 1)
		if err == nil || !strings.Contains(err.Error(), "want 1 to 10") || dir != "" {
			t.Errorf("n=%d: dir %q, error %v; want an error asking for 1 to 10", n, dir, err)
		}
	}
	if after, _ := filepath.Glob(filepath.Join(os.Getenv("TMPDIR"), "xmr-learn-data-*")); len(after) != len(before) {
		t.Errorf("a refused count left a directory: %v, before %v", after, before)
	}
}

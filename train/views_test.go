package train

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/model"
)

// withCopies returns the first n photos of s followed by k augmented
// copies of each (ids ID~aug1 ... ID~augK, the photo's captions, its
// features scaled by 1+copy/10 so that each copy's features are its own),
// as xmr extract --augment lays them out.
func withCopies(t *testing.T, s *data.Split, n, k int) *data.Split {
	t.Helper()
	g := s.Images
	per := g.R * g.D
	out := &data.Split{Name: s.Name, CapsPerImage: s.CapsPerImage,
		Images: &data.Regions{N: n * (1 + k), R: g.R, D: g.D}}
	add := func(i int, id string, scale float32) {
		out.ImageIDs = append(out.ImageIDs, id)
		for _, x := range g.Feat[i*per : (i+1)*per] {
			out.Images.Feat = append(out.Images.Feat, x*scale)
		}
		if g.Boxes != nil {
			out.Images.Boxes = append(out.Images.Boxes, g.Boxes[i*g.R*4:(i+1)*g.R*4]...)
		}
		if g.Count != nil {
			out.Images.Count = append(out.Images.Count, g.Count[i])
		}
		out.Captions = append(out.Captions, s.CaptionsOf(i)...)
	}
	for i := 0; i < n; i++ {
		add(i, fmt.Sprintf("p%d", i), 1)
	}
	for c := 1; c <= k; c++ {
		for i := 0; i < n; i++ {
			add(i, fmt.Sprintf("p%d%s%d", i, extract.AugmentSuffix, c), 1+float32(c)/10)
		}
	}
	if err := out.Validate(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestViewPool(t *testing.T) {
	_, world := smallConfigs(t)
	s := withCopies(t, world, 40, 2)
	pool, err := newViewPool(s, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	// An epoch goes over the photos' captions alone.
	if want := 40 * s.CapsPerImage; len(pool.caps) != want {
		t.Fatalf("%d captions in an epoch, want the photos' %d", len(pool.caps), want)
	}
	for _, c := range pool.caps {
		if _, isCopy := extract.CopyOf(s.ID(s.ImageOf(c))); isCopy {
			t.Fatalf("caption %d of copy %s in the epoch", c, s.ID(s.ImageOf(c)))
		}
	}
	for i := 0; i < 40; i++ {
		if want := []int{40 + i, 80 + i}; !slices.Equal(pool.copies[i], want) {
			t.Fatalf("photo %d's copies %v, want %v", i, pool.copies[i], want)
		}
	}
	// A step's images are the photos or their copies, in proportion p;
	// the photos are those the captions describe.
	for _, p := range []float64{0.25, 1} {
		pool.p = p
		rng := rand.New(rand.NewPCG(1, 2))
		drawn, copies, each := 0, 0, map[int]int{}
		for range 200 {
			caps := pool.caps[:32]
			images, photos := pool.images(s, caps, rng)
			for k, c := range caps {
				if photos[k] != s.ImageOf(c) {
					t.Fatalf("caption %d: photo %d, want %d", c, photos[k], s.ImageOf(c))
				}
				if images[k] != photos[k] {
					if !slices.Contains(pool.copies[photos[k]], images[k]) {
						t.Fatalf("caption %d of photo %d shown with image %d, not one of its copies %v", c, photos[k], images[k], pool.copies[photos[k]])
					}
					copies++
					each[images[k]-photos[k]]++
				}
				drawn++
			}
		}
		if f := float64(copies) / float64(drawn); f < p-0.03 || f > p+0.03 {
			t.Errorf("p %v: %.3f of the steps' images were copies", p, f)
		}
		if a, b := each[40], each[80]; a < copies/3 || b < copies/3 {
			t.Errorf("p %v: copy 1 drawn %d times, copy 2 %d: want them alike", p, a, b)
		}
	}

	for _, c := range []struct {
		name, want string
		edit       func(*data.Split)
	}{
		{"no copies", "no augmented copies", func(s *data.Split) {
			for i := range s.ImageIDs {
				s.ImageIDs[i] = fmt.Sprintf("x%d", i)
			}
		}},
		{"a copy without its photo", `"p0~aug1" of the train split is an augmented copy of "p0", which the split lacks`, func(s *data.Split) { s.ImageIDs[0] = "q0" }},
		{"no ids", "no image ids", func(s *data.Split) { s.ImageIDs = nil }},
	} {
		bad := *s
		bad.ImageIDs = slices.Clone(s.ImageIDs)
		c.edit(&bad)
		if _, err := newViewPool(&bad, 0.5); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

// A step with views draws its images from the pool: each caption's image
// is its photo's or a copy's (their features), and the batch names the
// photos, which the loss groups captions by.
func TestTrainBatchDrawsViews(t *testing.T) {
	_, world := smallConfigs(t)
	s := withCopies(t, world, 40, 2)
	m := smallModel(t, tinyConfig(t, "teran-mrsw-small.yaml"), s)
	pool, err := newViewPool(s, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	tc := TrainingConfig{Seed: 7, AugmentDraw: 0.5}
	caps := pool.caps[:64]
	b := trainBatch(m, s, caps, tc, 3, pool)
	if again := trainBatch(m, s, caps, tc, 3, pool); !slices.Equal(b.Images.Items, again.Images.Items) {
		t.Error("the same iteration drew other views: a resumed run would not repeat it")
	}
	if next := trainBatch(m, s, caps, tc, 4, pool); slices.Equal(b.Images.Items, next.Images.Items) {
		t.Error("iterations 3 and 4 drew the same views")
	}
	per := s.Images.R * s.Images.D
	copies := 0
	for k, c := range caps {
		photo, img := s.ImageOf(c), b.Images.Items[k]
		if b.Photos[k] != photo {
			t.Fatalf("caption %d: batch photo %d, want %d", c, b.Photos[k], photo)
		}
		if img != photo {
			copies++
		}
		if !slices.Equal(b.Images.Feat.Data[k*per:(k+1)*per], s.Images.Feat[img*per:(img+1)*per]) {
			t.Fatalf("caption %d: the batch's features are not those of image %d", c, img)
		}
	}
	if copies == 0 || copies == len(caps) {
		t.Errorf("%d of %d images were copies at p 0.5", copies, len(caps))
	}
	if plain := trainBatch(m, s, caps, TrainingConfig{Seed: 7}, 3, nil); plain.Photos != nil || !slices.Equal(plain.Images.Items, b.Photos) {
		t.Error("without views the batch is not the photos' own")
	}
}

// worldWithCopies writes the test world's train split with k augmented
// copies of the first n photos (withCopies) and its dev split, as a data
// set of its own, and returns its directory.
func worldWithCopies(t *testing.T, n, k int) string {
	t.Helper()
	src, err := data.Source{Path: testWorld(t)}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"train", "dev"} {
		s, err := src.Load(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		out := s
		if name == "train" {
			out = withCopies(t, s, min(n, s.NumImages()), k)
		}
		err = data.WritePrecomp(context.Background(), dir, out)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestAugmentDrawResumes trains a small TERAN from a split with copies:
// an epoch is the photos' captions, and a resumed run repeats an
// uninterrupted one bit for bit. TestModelsLearn checks that it learns.
func TestAugmentDrawResumes(t *testing.T) {
	aug := worldWithCopies(t, 200, 2)
	cfg := tinyConfig(t, "teran-mrsw-small.yaml")
	cfg.Training.AugmentDraw, cfg.Training.ValStep = 0.5, 10
	straight, split := t.TempDir(), t.TempDir()
	opts := func(out string, iters int) Options {
		return Options{Config: cfg, Data: data.Source{Path: aug}, Out: out, MaxIters: iters, ValImages: 50}
	}
	if _, err := Run(context.Background(), opts(straight, 40)); err != nil {
		t.Fatal(err)
	}
	// 200 photos of 5 captions at 32 a batch: 31 iterations an epoch (the
	// copies' 2,000 captions too would make 93).
	hist := readHistory(t, straight)
	if last := hist[len(hist)-1]; last.Epoch != 1 {
		t.Errorf("after 40 iterations the run is in epoch %d, want 1 (31 iterations an epoch)", last.Epoch)
	}
	if _, err := Run(context.Background(), opts(split, 20)); err != nil {
		t.Fatal(err)
	}
	o := opts(split, 40)
	o.Config, o.Resume = Config{}, true
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	a, _ := loadLast(t, straight)
	b, _ := loadLast(t, split)
	if model.Fingerprint(a) != model.Fingerprint(b) {
		t.Fatal("the resumed run's model differs from the uninterrupted run's")
	}
}

// MEMBER's banks know the training images by index: a copy drawn in place
// of its photo would not be kept out of the photo's responses, so the key
// is refused for it.
func TestAugmentDrawRefusesMemoryBanks(t *testing.T) {
	aug := worldWithCopies(t, 100, 1)
	cfg := tinyConfig(t, "member-small.yaml")
	cfg.Training.AugmentDraw = 0.5
	_, err := Run(context.Background(), Options{Config: cfg, Data: data.Source{Path: aug}, Out: t.TempDir(), MaxIters: 2, ValImages: 50})
	if err == nil || !strings.Contains(err.Error(), "training.augment-draw: member has memory banks") {
		t.Fatalf("error %v, want one saying MEMBER's banks refuse training.augment-draw", err)
	}
}

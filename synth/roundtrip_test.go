package synth

import (
	"context"
	"math"
	"testing"

	"github.com/xmr-project/xmr/data"
)

// TestLoadersReadBack checks that what the generator writes, the data
// loaders read back identically: features, boxes (normalised by the image
// size), region counts, ids, captions and the word-region ground truth.
func TestLoadersReadBack(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{N: 120, Seed: 9, Dim: 32, Regions: 10, Noise: 0.1, NoImages: true, Dev: 20, Test: 20}
	if _, err := Generate(context.Background(), dir, cfg); err != nil {
		t.Fatal(err)
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"train", "dev", "test", "testall"} {
		s, err := data.LoadPrecomp(context.Background(), dir, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		g, err := data.LoadGrounding(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		sp, _ := w.Split(name)
		if s.NumImages() != sp.Len || s.NumCaptions() != 5*sp.Len || len(g) != s.NumCaptions() {
			t.Fatalf("%s: %d images, %d captions, %d groundings; want %d images", name, s.NumImages(), s.NumCaptions(), len(g), sp.Len)
		}
		for i := 0; i < sp.Len; i++ {
			img, err := w.Image(name, i)
			if err != nil {
				t.Fatal(err)
			}
			if s.ID(i) != img.ID {
				t.Fatalf("%s image %d: id %q, want %q", name, i, s.ID(i), img.ID)
			}
			feat := w.Features(img)
			got := s.Images.Image(i)
			for k := range feat {
				if feat[k] != got[k] {
					t.Fatalf("%s image %d: feature %d = %v, generator %v", name, i, k, got[k], feat[k])
				}
			}
			if s.Images.NumRegions(i) != len(img.Regions) {
				t.Fatalf("%s image %d: %d regions, generator %d", name, i, s.Images.NumRegions(i), len(img.Regions))
			}
			size := s.Sizes[i]
			for r, reg := range img.Regions {
				b := s.Images.Box5(i, r)
				for k := 0; k < 4; k++ {
					want := reg.Box[k] / size[k%2]
					if math.Abs(float64(b[k]-want)) > 1e-6 {
						t.Fatalf("%s image %d region %d: box %v, generator %v (size %v)", name, i, r, b, reg.Box, size)
					}
				}
			}
			for q, c := range img.Captions {
				ci := 5*i + q
				if s.Captions[ci] != c.Text {
					t.Fatalf("%s caption %d: %q, generator %q", name, ci, s.Captions[ci], c.Text)
				}
				if len(g[ci].Words) != len(c.Words) || g[ci].Image != i {
					t.Fatalf("%s caption %d: grounding %+v, generator %+v", name, ci, g[ci], c.Words)
				}
				for k, wr := range c.Words {
					if g[ci].Words[k].Index != wr.Index || g[ci].Words[k].Region != wr.Region || g[ci].Words[k].Word != wr.Word {
						t.Fatalf("%s caption %d word %d: %+v, generator %+v", name, ci, k, g[ci].Words[k], wr)
					}
				}
			}
		}
		s.Close()
	}
}

package model

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFeatureStats(t *testing.T) {
	im := newTinyImages(rand.New(rand.NewPCG(3, 4)))
	mean, std, err := FeatureStats(im)
	if err != nil {
		t.Fatal(err)
	}
	// Straight from the definition over the 3+2+4 real regions.
	for k := 0; k < 6; k++ {
		var vals []float64
		for i := 0; i < 3; i++ {
			for r := 0; r < im.NumRegions(i); r++ {
				vals = append(vals, float64(im.Image(i)[r*6+k]))
			}
		}
		var m, v float64
		for _, x := range vals {
			m += x / float64(len(vals))
		}
		for _, x := range vals {
			v += (x - m) * (x - m) / float64(len(vals))
		}
		if math.Abs(float64(mean[k])-m) > 1e-6 || math.Abs(float64(std[k])-math.Sqrt(v)) > 1e-6 {
			t.Errorf("channel %d: mean %v std %v, want %v %v", k, mean[k], std[k], m, math.Sqrt(v))
		}
	}
	empty := &tinyImages{feat: make([]float32, 72), boxes: make([][5]float32, 12), count: []int{0, 0, 0}}
	if _, _, err := FeatureStats(empty); err == nil || !strings.Contains(err.Error(), "no region") {
		t.Errorf("no regions: %v", err)
	}
}

// TestFeatureNorm checks, for every model, that image-model.feature-norm
// standardize makes the encoder read (x - mean) / std: a model with
// statistics encodes the images as the same model without them encodes
// the standardised images; that the statistics travel in checkpoints;
// and that bad statistics are refused.
func TestFeatureNorm(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			edit := named(name)
			norm := func(c *Config) { edit(c); c.ImageModel.FeatureNorm = "standardize" }
			m := tinyModel(t, norm)
			plain := tinyModel(t, edit)
			fn, ok := m.(FeatureNormalizer)
			if !ok || !fn.NormalizesFeatures() {
				t.Fatalf("%s with feature-norm: no FeatureNormalizer", name)
			}
			if pf, ok := plain.(FeatureNormalizer); ok && pf.NormalizesFeatures() {
				t.Fatalf("%s without feature-norm standardises", name)
			}
			mean := []float32{0.5, -1, 0, 2, 0.25, 3}
			std := []float32{2, 0.5, 1, 4, 0, 1} // a constant channel stays unscaled
			if err := fn.SetFeatureStats(mean, std); err != nil {
				t.Fatal(err)
			}
			im := newTinyImages(rand.New(rand.NewPCG(5, 6)))
			scaled := &tinyImages{feat: slices.Clone(im.feat), boxes: im.boxes, count: im.count}
			for i := range scaled.feat {
				k := i % 6
				s := std[k]
				if s == 0 {
					s = 1
				}
				scaled.feat[i] = (scaled.feat[i] - mean[k]) / s
			}
			if _, ok := m.(Memorizer); ok { // MEMBER reads its banks: build each from its view of the same images
				if err := m.(Memorizer).BuildMemory(context.Background(), im, tinyCaptions, []int{0, 1, 2}); err != nil {
					t.Fatal(err)
				}
				if err := plain.(Memorizer).BuildMemory(context.Background(), scaled, tinyCaptions, []int{0, 1, 2}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := EncodeImages(context.Background(), m, im, nil)
			if err != nil {
				t.Fatal(err)
			}
			want, err := EncodeImages(context.Background(), plain, scaled, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !closeAll(got.Global, want.Global, 1e-4) || !closeAll(got.Vecs, want.Vecs, 1e-4) {
				t.Errorf("the standardising model's encodings differ from the plain model's of standardised features")
			}
			// The statistics travel in the checkpoint.
			path := filepath.Join(t.TempDir(), "m.safetensors")
			if err := Save(path, m, nil, nil); err != nil {
				t.Fatal(err)
			}
			back, f, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			again, err := EncodeImages(context.Background(), back, im, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !closeAll(got.Global, again.Global, 0) {
				t.Error("a reloaded checkpoint encodes otherwise: the statistics were not stored")
			}
			for _, bad := range []struct {
				mean, std []float32
				want      string
			}{
				{mean[:5], std, "5 means"},
				{mean, []float32{1, 1, 1, -1, 1, 1}, "channel 3"},
				{[]float32{0, 0, float32(math.NaN()), 0, 0, 0}, std, "channel 2"},
			} {
				if err := fn.SetFeatureStats(bad.mean, bad.std); err == nil || !strings.Contains(err.Error(), bad.want) {
					t.Errorf("statistics %v, %v: %v, want %q", bad.mean, bad.std, err, bad.want)
				}
			}
		})
	}
}

// closeAll reports whether a and b have the same length and differ by at
// most tol everywhere.
func closeAll(a, b []float32, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > tol {
			return false
		}
	}
	return true
}

// TestMinWordCount checks text-model.min-word-count: words seen fewer
// times in the training captions are left out of the vocabulary built
// from them and read as the unknown token, for BERT and the word encoders.
func TestMinWordCount(t *testing.T) {
	caps := []string{"a dog runs", "a dog sleeps", "a cat"}
	for _, name := range []string{"bert", "gru"} {
		for _, c := range []struct {
			min  int
			want int // words in the vocabulary
		}{{0, 5}, {1, 5}, {2, 2}, {3, 1}} {
			cfg := tinyConfig(func(c *Config) { c.TextModel.Name = name })
			cfg.TextModel.MinWordCount = c.min
			tok, err := BuildTokenizer(cfg, caps)
			if err != nil {
				t.Fatal(err)
			}
			specials := 4
			if name == "bert" {
				specials = 5
			}
			if got := tok.Vocab().Len() - specials; got != c.want {
				t.Errorf("%s, min-word-count %d: %d words, want %d", name, c.min, got, c.want)
			}
		}
	}
	cfg := tinyConfig(nil)
	cfg.TextModel.MinWordCount = -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "text-model.min-word-count") {
		t.Errorf("min-word-count -1: %v", err)
	}
}

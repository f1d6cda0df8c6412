package train

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/tensor"
)

// TestBackwardAndResetMatchesBackward checks, for every built-in small
// config (every model and variant), that a step's gradients are the same,
// bit for bit, whether the tape keeps every buffer until Reset (Backward,
// Reset) or returns each op's buffers as soon as its backward has run
// (BackwardAndReset, as Stepper.Step does), with released buffers poisoned
// with NaN (TestMain sets tensor.PoisonReleased): a backward function that
// read a value after its release would put NaN or other values into the
// gradients.
func TestBackwardAndResetMatchesBackward(t *testing.T) {
	if !tensor.PoisonReleased {
		t.Fatal("tensor.PoisonReleased is off: the test would not see a read after release")
	}
	names, split := smallConfigs(t)
	for _, name := range names {
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			cfg := tinyConfig(t, name)
			cfg.ImageModel.FeatDim = split.Images.D
			cfg.Training.BatchSize = 12
			if cfg.Model.Name == "vsepp" {
				cfg.TextModel.Hidden = cfg.Model.EmbedSize
			}
			grads := func(release bool) [][]float32 {
				m := smallModel(t, cfg, split)
				s, err := NewStepper(m, cfg.Training, 10)
				if err != nil {
					t.Fatal(err)
				}
				caps := make([]int, cfg.Training.BatchSize)
				for i := range caps {
					caps[i] = 7 * i // several images, some with two captions
				}
				b := BatchOf(m, split, caps)
				tp := tensor.NewTape()
				tp.Seed(1, 3) // dropout on
				iter := cfg.Training.MaxViolationAfter + 1
				img, txt := encode(tp, m, nil, b) // as Stepper.Step: side by side
				l := s.obj.Loss(tp, img, txt, b.Texts, b.Images.Items, iter)
				if release {
					tp.BackwardAndReset(l)
				} else {
					tp.Backward(l)
					tp.Reset()
				}
				var out [][]float32
				for _, p := range s.params {
					out = append(out, append([]float32(nil), p.Grad...))
				}
				return out
			}
			want, got := grads(false), grads(true)
			nonzero := 0
			for i := range want {
				if len(got[i]) != len(want[i]) {
					t.Fatalf("parameter %d: %d gradient values, want %d", i, len(got[i]), len(want[i]))
				}
				for j, w := range want[i] {
					if g := got[i][j]; math.Float32bits(g) != math.Float32bits(w) {
						t.Fatalf("parameter %d value %d: gradient %g with release, %g without", i, j, g, w)
					}
					if w != 0 {
						nonzero++
					}
				}
			}
			if nonzero == 0 {
				t.Fatal("every gradient is zero: the test compares nothing")
			}
		})
	}
}

// smallConfigs returns the file names of the built-in small configs (one
// per model and variant) and the test world's training split, closed when
// t ends.
func smallConfigs(t *testing.T) ([]string, *data.Split) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "configs", "*-small.yaml"))
	if err != nil || len(paths) < 10 {
		t.Fatalf("configs: %d found, %v", len(paths), err)
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	src, err := data.Source{Path: testWorld(t)}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	split, err := src.Load(context.Background(), "train")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { split.Close() })
	return names, split
}

// smallModel builds cfg's model with seed 1 and a tokenizer over split's
// captions, its memory banks (MEMBER) built from split.
func smallModel(t *testing.T, cfg Config, split *data.Split) model.Model {
	t.Helper()
	mc := cfg.ModelConfig()
	tok, err := model.BuildTokenizer(mc, split.Captions)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(mc, tok, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := buildMemory(context.Background(), m, split); err != nil {
		t.Fatal(err)
	}
	return m
}

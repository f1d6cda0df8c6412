package train

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xmr-project/xmr/configs"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/internal/dirstate"
	"github.com/xmr-project/xmr/lockfile"
	"github.com/xmr-project/xmr/synth"
)

// TestResumeChecks resumes a TERAN run with options that do not fit it: an
// explicit config of another model, data of another feature width. Each is
// refused with an error that says why, before anything in the run
// directory is written (the config before the directory is even locked);
// the same config given again resumes.
func TestResumeChecks(t *testing.T) {
	dir := testWorld(t) // 64-d features
	narrow := filepath.Join(t.TempDir(), "narrow")
	if _, err := synth.Generate(context.Background(), narrow, synth.Config{N: 120, Seed: 2, Dim: 32, Regions: 6, Noise: 0.1, NoImages: true, Dev: 30, Test: 30}); err != nil {
		t.Fatal(err)
	}
	teran := tinyConfig(t, "teran-mrsw-small.yaml")
	out := t.TempDir()
	if _, err := Run(context.Background(), Options{Config: teran, Data: data.Source{Path: dir}, Out: out, MaxIters: 2, ValImages: 50}); err != nil {
		t.Fatal(err)
	}
	tern := tinyConfig(t, "tern-small.yaml")
	otherLR := teran
	otherLR.Training.LR *= 2
	cases := []struct {
		name     string
		opts     Options
		want     []string // in the error; none: it resumes
		skipLock bool     // the lock file may change
	}{
		{"another model", Options{Config: tern, ConfigName: "tern-small", Data: data.Source{Path: dir}},
			[]string{"--config tern-small: the run in " + out + " was trained with another config (model teran; see " + filepath.Join(out, "config.yaml") + "; they differ in text-model.dropout, image-model.dropout, model.name, model.shared-transformer",
				"--resume continues a run as it is: drop --config, or train into a new --out"}, false},
		{"another learning rate", Options{Config: otherLR, ConfigName: "mine.yaml", Data: data.Source{Path: dir}},
			[]string{"--config mine.yaml: ", "they differ in training.lr)"}, false},
		{"another feature width", Options{Data: data.Source{Path: narrow}},
			[]string{"resume: the run reads 64-d region features; " + narrow + " has 32-d features"}, true},
		{"another feature width, config given", Options{Config: teran, ConfigName: "teran.yaml", Data: data.Source{Path: narrow}},
			[]string{"the run reads 64-d region features"}, true},
		{"the same config on other data", Options{Config: teran, ConfigName: "teran.yaml", Data: data.Source{Path: dir}, MaxIters: 3}, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := c.opts
			o.Out, o.Resume, o.ValImages = out, true, 50
			if o.MaxIters == 0 {
				o.MaxIters = 3
			}
			var skip []string
			if c.skipLock {
				skip = []string{lockfile.Name}
			}
			before := dirstate.Of(t, out, skip...)
			res, err := Run(context.Background(), o)
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if res.Iters != 3 {
					t.Errorf("resumed to %d iterations, want 3", res.Iters)
				}
				return
			}
			if err == nil {
				t.Fatal("resumed")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			dirstate.Same(t, "the refused resume", before, dirstate.Of(t, out, skip...))
		})
	}
}

// TestConfigDiff compares configs as a resumed run does: what a run takes
// from its data and captions is no difference.
func TestConfigDiff(t *testing.T) {
	small := builtinConfig(t, "teran-mrsw-small.yaml")
	run := small // as a run stores it
	run.Dataset.Data, run.ImageModel.FeatDim, run.TextModel.VocabSize = "/data/world", 64, 158
	tern := builtinConfig(t, "tern-small.yaml")
	bert := builtinConfig(t, "teran-mrsw.yaml")
	bertRun := bert
	bertRun.TextModel.Layers, bertRun.TextModel.WordDim = 12, 768
	cases := []struct {
		name         string
		given, run   Config
		want, wantIn []string
	}{
		{"the same config", small, run, nil, nil},
		{"another model", tern, run, nil, []string{"model.name", "training.loss-type"}},
		{"another batch size", func() Config { c := small; c.Training.BatchSize = 32; return c }(), run, []string{"training.bs"}, nil},
		{"a pretrained BERT's sizes", bert, bertRun, nil, nil},
		{"started from word vectors (--word-vectors)", small, func() Config { c := run; c.TextModel.WordVectors = "glove.txt"; return c }(), nil, nil},
		{"other word vectors", func() Config { c := small; c.TextModel.WordVectors = "other.txt"; return c }(),
			func() Config { c := run; c.TextModel.WordVectors = "glove.txt"; return c }(), []string{"text-model.word-vectors"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := configDiff(c.given, c.run)
			if c.wantIn == nil && !slices.Equal(got, c.want) {
				t.Errorf("configDiff = %q, want %q", got, c.want)
			}
			for _, w := range c.wantIn {
				if !slices.Contains(got, w) {
					t.Errorf("configDiff = %q lacks %q", got, w)
				}
			}
		})
	}
	names := builtinNames(run)
	if len(names) == 0 || names[0] != "teran-mrsw-small" {
		t.Errorf("builtinNames = %q, want teran-mrsw-small first", names)
	}
	for _, n := range names {
		b, _ := configs.Lookup(n)
		c, err := ParseConfig(b)
		if err != nil || len(configDiff(c, run)) != 0 {
			t.Errorf("builtinNames names %s, which differs: %v", n, err)
		}
	}
}

// TestRunRefusesBadOptions: negative bounds are errors, not "no bound" or
// "all images", and nothing is created.
func TestRunRefusesBadOptions(t *testing.T) {
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"time budget", Options{TimeBudget: -time.Second}, "time budget -1s"},
		{"max iterations", Options{MaxIters: -1}, "max iterations -1"},
		{"validation images", Options{ValImages: -5}, "validation images -5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := c.o
			o.Config, o.Data = Default(), data.Source{Path: testWorld(t)}
			o.Out = filepath.Join(t.TempDir(), "run")
			// A cancelled context: were the option taken as no bound, Run
			// would stop at its first step instead of training for ever.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := Run(ctx, o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run: %v, want an error with %q", err, c.want)
			}
			if _, err := os.Stat(o.Out); !os.IsNotExist(err) {
				t.Errorf("the run directory was created: %v", err)
			}
		})
	}
}

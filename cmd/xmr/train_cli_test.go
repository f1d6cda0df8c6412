package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/internal/dirstate"
	"github.com/xmr-project/xmr/lockfile"
	"github.com/xmr-project/xmr/synth"
)

// trainDone returns the count of the "train done" log line in stderr.
func trainDone(t *testing.T, stderr string) string {
	t.Helper()
	m := regexp.MustCompile(`msg="train done" count=(\d+) `).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no \"train done\" line in:\n%s", stderr)
	}
	return m[1]
}

// TestTrainResumeCLI resumes a run through the command line: the training
// log counts this session's iterations only and names both NDCG
// directions; an explicit --config of another model and data of another
// feature width are refused with an error that says why, and nothing in
// the run directory changes.
func TestTrainResumeCLI(t *testing.T) {
	dir := t.TempDir()
	world, wide := filepath.Join(dir, "world"), filepath.Join(dir, "wide")
	for _, w := range []struct {
		path string
		dim  int
	}{{world, 16}, {wide, 24}} {
		if _, err := synth.Generate(context.Background(), w.path, synth.Config{N: 200, Seed: 1, Dim: w.dim, Regions: 6, Noise: 0.1, NoImages: true, Dev: 50, Test: 50}); err != nil {
			t.Fatal(err)
		}
	}
	teran := writeTinyConfig(t, dir, "teran", "alignment")
	tern := writeTinyConfig(t, dir, "tern", "matching")
	runDir := filepath.Join(dir, "run")
	_, stderr, code := run(t, "train", "--config", teran, "--data", world, "--out", runDir, "--max-iters", "2", "--val-images", "50")
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	if n := trainDone(t, stderr); n != "2" {
		t.Errorf("train done count=%s, want 2", n)
	}
	for _, w := range []string{" ndcg_i2t=", " ndcg_t2i="} {
		if !strings.Contains(stderr, w) {
			t.Errorf("the validation line lacks %q:\n%s", w, stderr)
		}
	}
	if strings.Contains(stderr, " ndcg=") {
		t.Errorf("the validation line logs the sum of both NDCG as ndcg=:\n%s", stderr)
	}

	refused := []struct {
		name     string
		args     []string
		want     []string
		skipLock bool
	}{
		{"another config", []string{"--config", tern, "--data", world},
			[]string{"--config " + tern + ": the run in " + runDir + " was trained with another config (model teran", "they differ in model.name", "drop --config, or train into a new --out"}, false},
		{"another feature width", []string{"--data", wide},
			[]string{"the run reads 16-d region features; " + wide + " has 24-d features"}, true},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			var skip []string
			if c.skipLock {
				skip = []string{lockfile.Name}
			}
			before := dirstate.Of(t, runDir, skip...)
			args := append([]string{"train", "--out", runDir, "--resume", "--max-iters", "4", "--val-images", "50"}, c.args...)
			_, stderr, code := run(t, args...)
			if code != 1 {
				t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stderr, "tensor.") || strings.Contains(stderr, "feat-dim set from the data") {
				t.Errorf("stderr shows the run starting:\n%s", stderr)
			}
			dirstate.Same(t, "the refused resume", before, dirstate.Of(t, runDir, skip...))
		})
	}

	// The same config, given again, resumes; the log counts this session.
	resumed := []struct {
		name string
		args []string
		want string // train done count
	}{
		{"the same config", []string{"--config", teran, "--max-iters", "5", "--time-budget", "0"}, "3"},
		{"a finished run", []string{"--max-iters", "5"}, "0"},
	}
	for _, c := range resumed {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"train", "--out", runDir, "--resume", "--data", world, "--val-images", "50"}, c.args...)
			stdout, stderr, code := run(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if n := trainDone(t, stderr); n != c.want {
				t.Errorf("train done count=%s, want %s (this session's iterations):\n%s", n, c.want, stderr)
			}
			if !strings.Contains(stdout, "stopped after 5 iterations") {
				t.Errorf("stdout: %s", stdout)
			}
		})
	}
}

package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/synth"
)

// TestDemoNextCommandsRun makes a world with the demo's test splits (1000
// test images, 1200 in testall), trains a tiny model briefly, and runs every
// command the demo's closing hint prints: each must succeed.
func TestDemoNextCommandsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("evaluates 2,200 images")
	}
	dir := t.TempDir()
	world := filepath.Join(dir, "world")
	m, err := synth.Generate(context.Background(), world, synth.Config{N: 1500, Seed: 1, Dim: 16, Regions: 6, Noise: 0.1, NoImages: true, Dev: 100, Test: 1200})
	if err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(dir, "run")
	cfg := writeTinyConfig(t, dir, "teran", "alignment")
	if _, stderr, code := run(t, "train", "--config", cfg, "--data", world, "--out", runDir, "--max-iters", "2", "--val-images", "50"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	next := demoNext(filepath.Join(runDir, "best-rsum.safetensors"), world, m)
	if len(next) != 2 {
		t.Fatalf("hints %q, want the test split and all of testall", next)
	}
	for _, args := range next {
		if args[0] != "xmr" {
			t.Fatalf("hint %q", args)
		}
		stdout, stderr, code := run(t, args[1:]...)
		if code != 0 || !strings.Contains(stdout, "rsum") {
			t.Errorf("%s: exit %d\n%s\n%s", shellJoin(args), code, stdout, stderr)
		}
	}
}

// TestDemoNext lists the hints for other world sizes: the 1K protocol only
// with whole folds of 1000 images, 5K only with 5000.
func TestDemoNext(t *testing.T) {
	cases := []struct {
		testall int
		want    []string // the last arguments of each hint
	}{
		{1000, []string{"--split test"}},
		{1200, []string{"--split test", "--split testall"}},
		{2000, []string{"--split test", "--split testall", "--split testall --protocol 1k"}},
		{2500, []string{"--split test", "--split testall"}},
		{5000, []string{"--split test", "--split testall", "--split testall --protocol 1k", "--split testall --protocol 5k"}},
	}
	for _, c := range cases {
		m := &synth.Manifest{Splits: []synth.Split{{Name: "testall", Len: c.testall}, {Name: "test", Len: min(1000, c.testall), Of: "testall"}}}
		var got []string
		for _, args := range demoNext("b.safetensors", "w", m) {
			if !slices.Equal(args[:6], []string{"xmr", "eval", "--checkpoint", "b.safetensors", "--data", "w"}) {
				t.Fatalf("hint %q", args)
			}
			got = append(got, strings.Join(args[6:], " "))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("testall of %d: hints %q, want %q", c.testall, got, c.want)
		}
	}
}

// TestQueryResults checks that the grid shows the ground-truth image with
// its rank when it is not among the top results.
func TestQueryResults(t *testing.T) {
	scores := []float32{0.1, 0.9, 0.5, 0.3, 0.5}
	cases := []struct {
		truth int
		want  []queryResult
	}{
		{1, []queryResult{{1, 1, 0.9}, {2, 2, 0.5}}},
		{0, []queryResult{{1, 1, 0.9}, {2, 2, 0.5}, {0, 5, 0.1}}},
		{4, []queryResult{{1, 1, 0.9}, {2, 2, 0.5}, {4, 3, 0.5}}},
	}
	for _, c := range cases {
		if got := queryResults(scores, c.truth, 2); !slices.Equal(got, c.want) {
			t.Errorf("truth %d: %+v, want %+v", c.truth, got, c.want)
		}
	}
}

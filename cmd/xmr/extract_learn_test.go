package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/synth"
)

// tinyTERANYAML is the 64-d TERAN of the learning tests, up to its
// image-model block's first line: each test adds the image model's keys
// and its training recipe.
const tinyTERANYAML = `model:
  name: teran
  embed-size: 64
  layers: 1
  heads: 4
  ff: 128
text-model:
  name: bert
  word-dim: 64
  extraction-hidden-layer: 1
  heads: 4
  ff: 128
  max-positions: 64
image-model:
`

// learnConfig is TERAN MrSw (configs/teran-mrsw-small.yaml's training
// recipe: the sum of hinges throughout these few iterations) at 64-d, for
// a test.
const learnConfig = tinyTERANYAML + `  feat-dim: 64
  transformer-layers: 1
  heads: 4
  ff: 128
  hidden: 64
training:
  lr: 0.001
  grad-clip: 2.0
  max-violation: true
  max-violation-after: 400
  loss-type: alignment
  alignment-mode: MrSw
  margin: 0.2
  bs: 32
  warmup-period: 20
  val-step: 50
  seed: 1
`

// TestLearnThroughExtract is the learning check of docs/benchmarks.md,
// "extract", at small size: a synthetic world's PNGs go through xmr
// extract with the real detector, TERAN-small trains on those features,
// and its test recall is far above chance. It needs the detector's
// weights (fetched with npm the first time); without them it is skipped,
// except under CI=true.
func TestLearnThroughExtract(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the real detector on 200 images")
	}
	ctx := context.Background()
	if _, err := detect.Fetch(ctx, detect.DefaultCacheDir()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the detector's weights: %v", err)
		}
		t.Skipf("the detector's weights are not available: %v", err)
	}
	dir := t.TempDir()
	world := filepath.Join(dir, "world")
	const nTest = 40
	if _, err := synth.Generate(ctx, world, synth.Config{N: 200, Seed: 5, Dev: nTest, Test: nTest}); err != nil {
		t.Fatal(err)
	}
	feats := filepath.Join(dir, "feats")
	if _, stderr, code := run(t, "extract", "--images", world, "--out", feats, "--splits", "train,dev,test", "--workers", "2"); code != 0 {
		t.Fatalf("extract: exit %d: %s", code, stderr)
	}
	runDir := filepath.Join(dir, "run")
	cfg := filepath.Join(dir, "teran.yaml")
	if err := os.WriteFile(cfg, []byte(learnConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := run(t, "train", "--config", cfg, "--data", feats, "--out", runDir,
		"--max-iters", "250", "--val-images", "40"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	rep := evalRecall(t, runDir, feats, "test")
	chance := chanceRSum(nTest, 5)
	t.Logf("test recall on %d images: i2t R@1 %.1f R@5 %.1f R@10 %.1f; t2i R@1 %.1f R@5 %.1f R@10 %.1f; rsum %.1f (chance %.1f)",
		nTest, rep.I2T.R1, rep.I2T.R5, rep.I2T.R10, rep.T2I.R1, rep.T2I.R5, rep.T2I.R10, rep.RSum, chance)
	if rep.RSum < 2*chance || rep.T2I.R10 < 40 {
		t.Errorf("rsum %.1f, text-to-image R@10 %.1f: want at least twice chance (%.1f) and 40 (chance 25)", rep.RSum, rep.T2I.R10, 2*chance)
	}
}

// chanceRSum is the expected rsum (R@1+R@5+R@10 both ways, in %) of a
// random ranking of n images with k captions each: a caption's image is
// in the first r of n with probability r/n; one of an image's k captions
// is in the first r of kn with probability 1 - C(kn-k, r)/C(kn, r).
func chanceRSum(n, k int) float64 {
	sum := 0.0
	for _, r := range []int{1, 5, 10} {
		sum += 100 * float64(r) / float64(n)
		miss := 1.0
		for j := range r {
			miss *= float64(k*n-k-j) / float64(k*n-j)
		}
		sum += 100 * (1 - miss)
	}
	return sum
}

func TestChanceRSum(t *testing.T) {
	// One caption per image: both ways, R@r is r/n.
	if got := chanceRSum(10, 1); got < 319.99 || got > 320.01 {
		t.Errorf("chanceRSum(10, 1) = %v, want 320", got)
	}
	// 5 captions: i2t R@1 is 1/n too, R@5 and R@10 a little below 5r/n.
	if got := chanceRSum(40, 5); got < 77 || got > 77.5 {
		t.Errorf("chanceRSum(40, 5) = %v, want about 77.2", got)
	}
}

// recallReport is what the tests read of `xmr eval --json`.
type recallReport struct {
	recallMetrics
	// Members: each model of a fusion alone.
	Members []recallMetrics `json:"members"`
}

// recallMetrics is the recall of one ranking in xmr eval --json.
type recallMetrics struct {
	I2T  struct{ R1, R5, R10 float64 } `json:"i2t"`
	T2I  struct{ R1, R5, R10 float64 } `json:"t2i"`
	RSum float64                       `json:"rsum"`
}

// evalRecall evaluates the run directory runDir on split of the data set
// feats with `xmr eval --json` (without NDCG) and returns its recall.
func evalRecall(t *testing.T, runDir, feats, split string) recallReport {
	t.Helper()
	stdout, stderr, code := run(t, "eval", "--checkpoint", runDir, "--data", feats, "--split", split, "--json", "--no-ndcg")
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr)
	}
	var rep recallReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("eval --json printed %q: %v", stdout, err)
	}
	return rep
}

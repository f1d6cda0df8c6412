package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/synth"
)

// tinyConfig is a training config small enough for a test: every width 16.
const tinyConfig = `model:
  name: %MODEL%
  embed-size: 16
  layers: 1
  heads: 2
  ff: 16
text-model:
  name: bert
  word-dim: 16
  extraction-hidden-layer: 1
  heads: 2
  ff: 16
  max-positions: 64
image-model:
  feat-dim: 16
  transformer-layers: 1
  heads: 2
  ff: 16
  hidden: 16
training:
  lr: 0.001
  bs: 16
  loss-type: %LOSS%
  val-step: 0
`

func writeTinyConfig(t *testing.T, dir, name, loss string) string {
	t.Helper()
	path := filepath.Join(dir, name+".yaml")
	y := strings.ReplaceAll(strings.ReplaceAll(tinyConfig, "%MODEL%", name), "%LOSS%", loss)
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runMain(args, &out, &errb)
	return out.String(), errb.String(), code
}

// TestTrainEvalPipeline trains TERAN and TERN for a few iterations through
// the command line and evaluates them: from the checkpoint file and from
// the run directory, with the JSON report carrying the alignment accuracy,
// TERN scored with an alignment pooling, and bad poolings refused.
func TestTrainEvalPipeline(t *testing.T) {
	dir := t.TempDir()
	world := filepath.Join(dir, "world")
	if _, err := synth.Generate(context.Background(), world, synth.Config{N: 200, Seed: 1, Dim: 16, Regions: 6, Noise: 0.1, NoImages: true, Dev: 50, Test: 50}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ model, loss string }{{"teran", "alignment"}, {"tern", "matching"}} {
		t.Run(c.model, func(t *testing.T) {
			runDir := filepath.Join(dir, "run-"+c.model)
			cfg := writeTinyConfig(t, dir, c.model, c.loss)
			if _, stderr, code := run(t, "train", "--config", cfg, "--data", world, "--out", runDir, "--max-iters", "3", "--val-images", "50"); code != 0 {
				t.Fatalf("train: exit %d: %s", code, stderr)
			}
			for _, ckpt := range []string{runDir, filepath.Join(runDir, "best-rsum.safetensors")} {
				stdout, stderr, code := run(t, "eval", "--checkpoint", ckpt, "--data", world, "--json", "--no-ndcg")
				if code != 0 {
					t.Fatalf("eval %s: exit %d: %s", ckpt, code, stderr)
				}
				var rep struct {
					Images    int     `json:"images"`
					RSum      float64 `json:"rsum"`
					Alignment *struct {
						Accuracy float64 `json:"accuracy"`
						Words    int     `json:"words"`
					} `json:"alignment"`
				}
				if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
					t.Fatalf("eval --json printed %q: %v", stdout, err)
				}
				if rep.Images != 50 || rep.RSum <= 0 || rep.Alignment == nil || rep.Alignment.Words == 0 {
					t.Fatalf("eval --json: %+v, want 50 images, an rsum and the alignment accuracy", rep)
				}
			}
			if _, stderr, code := run(t, "eval", "--checkpoint", runDir, "--data", world, "--pooling", "mwsr", "--no-ndcg"); code != 0 {
				t.Fatalf("eval --pooling mwsr: exit %d: %s", code, stderr)
			}
		})
	}
	_, stderr, code := run(t, "eval", "--checkpoint", filepath.Join(dir, "run-teran"), "--data", world, "--pooling", "bogus")
	if code != 2 || !strings.Contains(stderr, "global, order, MrSw, MwSr, Symm, MrAvgw") {
		t.Fatalf("--pooling bogus: exit %d, stderr %q; want a usage error listing the scorings", code, stderr)
	}
	_, stderr, code = run(t, "eval", "--checkpoint", world, "--data", world)
	if code != 1 || !strings.Contains(stderr, "without checkpoints") {
		t.Fatalf("--checkpoint on a directory without checkpoints: exit %d, stderr %q", code, stderr)
	}
}

// TestSEAMPipeline trains SEAM-E (a built-in config) through the command
// line on region features, which the output says it averages, and
// evaluates it: no alignment accuracy (SEAM aligns no words with
// regions), its order score overridable by the cosine but not by an
// alignment pooling.
func TestSEAMPipeline(t *testing.T) {
	dir := t.TempDir()
	world := filepath.Join(dir, "world")
	if _, err := synth.Generate(context.Background(), world, synth.Config{N: 200, Seed: 2, Dim: 16, Regions: 6, Noise: 0.1, NoImages: true, Dev: 50, Test: 50}); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(dir, "run")
	_, stderr, code := run(t, "train", "--config", "seam-e-small", "--data", world, "--out", runDir, "--max-iters", "3", "--val-images", "50")
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "the mean of each image's valid regions stands in") {
		t.Errorf("train on region features did not say that their mean stands in:\n%s", stderr)
	}
	stdout, stderr, code := run(t, "eval", "--checkpoint", runDir, "--data", world, "--json", "--no-ndcg")
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("eval --json printed %q: %v", stdout, err)
	}
	if _, ok := rep["alignment"]; ok || rep["images"] != 50.0 || !strings.Contains(stderr, "stands in") {
		t.Errorf("eval --json: %v (stderr %q), want 50 images, no alignment accuracy and the note on region features", rep, stderr)
	}
	if _, stderr, code := run(t, "eval", "--checkpoint", runDir, "--data", world, "--pooling", "global", "--no-ndcg"); code != 0 {
		t.Fatalf("eval --pooling global: exit %d: %s", code, stderr)
	}
	if _, stderr, code := run(t, "eval", "--checkpoint", runDir, "--data", world, "--pooling", "MrSw", "--no-ndcg"); code != 1 || !strings.Contains(stderr, "global vectors only") {
		t.Fatalf("eval --pooling MrSw of SEAM: exit %d, stderr %q; want an error", code, stderr)
	}
	// Its index: an alignment pooling is refused as eval refuses it (it
	// used to rank every caption 0), and --explain says why it shows
	// nothing.
	idx := filepath.Join(t.TempDir(), "seam.idx")
	if _, stderr, code := run(t, "index", "--checkpoint", runDir, "--data", world, "--split", "test", "--out", idx); code != 0 {
		t.Fatalf("index: exit %d: %s", code, stderr)
	}
	if _, stderr, code := run(t, "search", "--index", idx, "--image", "synth-0000001", "--pooling", "MwSr"); code != 1 || !strings.Contains(stderr, "MwSr pools region and word vectors; this index (model seam) has global vectors only") {
		t.Fatalf("search --pooling MwSr of SEAM: exit %d, stderr %q; want an error", code, stderr)
	}
	if stdout, stderr, code := run(t, "search", "--index", idx, "--text", "a red circle", "--explain", "-k", "2"); code != 0 || strings.Count(stdout, "\n") != 3 || !strings.Contains(stderr, "no word-region alignment to show") {
		t.Fatalf("search --explain of SEAM: exit %d, %q, stderr %q; want 2 results and a warning", code, stdout, stderr)
	}
}

// TestTrainOnBottomUp trains directly on per-image bottom-up files with a
// Karpathy split file: no conversion step.
func TestTrainOnBottomUp(t *testing.T) {
	dir := t.TempDir()
	splits := []string{"train", "train", "train", "train", "train", "train", "val", "val", "test"}
	writeBottomUp(t, dir, splits)
	cfg := writeTinyConfig(t, t.TempDir(), "teran", "alignment")
	y, _ := os.ReadFile(cfg)
	y = bytes.Replace(y, []byte("feat-dim: 16"), []byte("feat-dim: 4"), 1)
	if err := os.WriteFile(cfg, y, 0o644); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(t.TempDir(), "run")
	args := []string{"train", "--config", cfg, "--data", dir, "--karpathy", "dataset_coco.json",
		"--coco-annotations", "captions_train2014.json,captions_val2014.json", "--out", runDir, "--max-iters", "2"}
	if _, stderr, code := run(t, args...); code != 0 {
		t.Fatalf("train on bottom-up files: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(runDir, "best-rsum.safetensors")); err != nil {
		t.Fatal(err)
	}
}

// TestIndexSearch indexes a trained model's collection, searches it both
// ways (table and JSON, with explanations), appends a second split, and
// refuses a second build into the same directory without --append or
// --overwrite.
func TestIndexSearch(t *testing.T) {
	dir := t.TempDir()
	world := filepath.Join(dir, "world")
	if _, err := synth.Generate(context.Background(), world, synth.Config{N: 200, Seed: 2, Dim: 16, Regions: 6, Noise: 0.1, Dev: 50, Test: 50}); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(dir, "run")
	if _, stderr, code := run(t, "train", "--config", writeTinyConfig(t, dir, "teran", "alignment"), "--data", world, "--out", runDir, "--max-iters", "2", "--val-images", "50"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	idx := filepath.Join(dir, "world.idx")
	stdout, stderr, code := run(t, "index", "--checkpoint", runDir, "--data", world, "--split", "test", "--out", idx)
	if code != 0 || !strings.Contains(stdout, "indexed 50 images and 250 captions") {
		t.Fatalf("index: exit %d: %s%s", code, stdout, stderr)
	}
	caps, err := os.ReadFile(filepath.Join(world, "test_caps.txt"))
	if err != nil {
		t.Fatal(err)
	}
	query := strings.SplitN(string(caps), "\n", 2)[0]
	stdout, stderr, code = run(t, "search", "--index", idx, "--text", query, "-k", "3", "--explain", "--json")
	if code != 0 {
		t.Fatalf("search: exit %d: %s", code, stderr)
	}
	var out struct {
		Mode    string `json:"mode"`
		Results []struct {
			Rank  int     `json:"rank"`
			Score float64 `json:"score"`
			Image struct {
				ID   string `json:"id"`
				Path string `json:"path"`
			} `json:"image"`
			Explain []struct {
				Word string `json:"word"`
			} `json:"explain"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("search --json printed %q: %v", stdout, err)
	}
	if out.Mode != "text-to-image" || len(out.Results) != 3 || out.Results[0].Rank != 1 || len(out.Results[0].Explain) == 0 ||
		!strings.HasSuffix(out.Results[0].Image.Path, out.Results[0].Image.ID+".png") {
		t.Fatalf("search --json: %+v", out)
	}
	stdout, stderr, code = run(t, "search", "--index", idx, "--image", out.Results[0].Image.ID, "-k", "2")
	if code != 0 || !strings.Contains(stdout, "image-to-text") || strings.Count(stdout, "\n") != 3 {
		t.Fatalf("search --image: exit %d: %q %s", code, stdout, stderr)
	}
	if _, stderr, code = run(t, "index", "--checkpoint", runDir, "--data", world, "--split", "dev", "--out", idx); code != 1 || !strings.Contains(stderr, "already exists") {
		t.Fatalf("second build without --append: exit %d: %s", code, stderr)
	}
	if stdout, stderr, code = run(t, "index", "--checkpoint", runDir, "--data", world, "--split", "dev", "--out", idx, "--append"); code != 0 || !strings.Contains(stdout, "now holds 100 images and 500 captions") {
		t.Fatalf("append: exit %d: %s%s", code, stdout, stderr)
	}
	if _, stderr, code = run(t, "search", "--index", idx, "--image", "no-such-image"); code != 1 || !strings.Contains(stderr, `no image "no-such-image"`) {
		t.Fatalf("unknown image: exit %d: %s", code, stderr)
	}
	if _, stderr, code = run(t, "search", "--index", idx); code != 2 || !strings.Contains(stderr, "--text or --image") {
		t.Fatalf("no query: exit %d: %s", code, stderr)
	}
	// Values that -h does not define are refused (they used to be taken
	// silently), and so is an image folder that does not exist.
	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"search", "--index", idx, "--text", query, "--rerank", "-5"}, 2, "--rerank must be positive, 0 (the default) or -1 (none), is -5"},
		{[]string{"search", "--index", idx, "--text", query, "--candidates", "-7"}, 2, "--candidates must be positive, 0 (automatic) or -1 (never prune), is -7"},
		{[]string{"search", "--index", idx, "--text", query, "--probes", "-2"}, 2, "--probes must be positive or 0 (the default), is -2"},
		{[]string{"search", "--index", idx, "--text", query, "--rerank", "-1", "--candidates", "-1"}, 0, ""},
		{[]string{"index", "--checkpoint", runDir, "--data", world, "--split", "dev", "--out", filepath.Join(dir, "other.idx"), "--images", filepath.Join(dir, "no-such-folder")}, 1, "--images: stat " + filepath.Join(dir, "no-such-folder")},
		{[]string{"index", "--checkpoint", runDir, "--data", world, "--split", "dev", "--out", filepath.Join(dir, "other.idx"), "--images", filepath.Join(world, "test_caps.txt")}, 1, "not a directory"},
	} {
		if _, stderr, code := run(t, c.args...); code != c.code || !strings.Contains(stderr, c.stderr) {
			t.Errorf("%v: exit %d, %s; want exit %d with %q", c.args, code, stderr, c.code, c.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "other.idx")); err == nil {
		t.Error("a refused xmr index made its --out")
	}
	// The same split compressed: results with explanations and --image
	// queries from the codes (50 images, every one scored, the best
	// re-ranked from the decoded codes), --exact refused with the way out.
	cidx := filepath.Join(dir, "compressed.idx")
	if stdout, stderr, code := run(t, "index", "--checkpoint", runDir, "--data", world, "--split", "test", "--out", cidx, "--compress"); code != 0 {
		t.Fatalf("index --compress: exit %d: %s%s", code, stdout, stderr)
	}
	stdout, stderr, code = run(t, "search", "--index", cidx, "--text", query, "-k", "3", "--explain", "--json")
	var cout struct {
		Results []struct {
			Image struct {
				ID string `json:"id"`
			} `json:"image"`
			Explain []struct {
				Word string `json:"word"`
			} `json:"explain"`
		} `json:"results"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &cout) != nil || len(cout.Results) != 3 || len(cout.Results[0].Explain) == 0 {
		t.Fatalf("search of a compressed index: exit %d: %s%s", code, stdout, stderr)
	}
	if _, stderr, code := run(t, "search", "--index", cidx, "--image", cout.Results[0].Image.ID, "-k", "2"); code != 0 {
		t.Fatalf("search --image of a compressed index: exit %d: %s", code, stderr)
	}
	if _, stderr, code := run(t, "search", "--index", cidx, "--text", query, "--exact"); code != 1 || !strings.Contains(stderr, "--keep-float32") {
		t.Fatalf("search --exact of a compressed index: exit %d: %s; want exit 1 naming --keep-float32", code, stderr)
	}
}

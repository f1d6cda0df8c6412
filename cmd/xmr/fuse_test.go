package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/synth"
)

// TestFusionPipeline fuses a region model (TERAN) with a global-vector
// one (SEAM-E) through the command line: xmr eval --weights, whose
// fusion ranks as a model alone when the other's weight is negligible,
// then the two models' indexes fused by xmr fuse and searched.
func TestFusionPipeline(t *testing.T) {
	dir := t.TempDir()
	world := filepath.Join(dir, "world")
	if _, err := synth.Generate(context.Background(), world, synth.Config{N: 200, Seed: 2, Dim: 16, Regions: 6, Noise: 0.1, NoImages: true, Dev: 50, Test: 50}); err != nil {
		t.Fatal(err)
	}
	teran, seam := filepath.Join(dir, "teran"), filepath.Join(dir, "seam")
	for _, c := range []struct{ config, out string }{{writeTinyConfig(t, dir, "teran", "alignment"), teran}, {"seam-e-small", seam}} {
		if _, stderr, code := run(t, "train", "--config", c.config, "--data", world, "--out", c.out, "--max-iters", "3", "--val-images", "50"); code != 0 {
			t.Fatalf("train %s: exit %d: %s", c.config, code, stderr)
		}
	}
	rsum := func(args ...string) float64 {
		t.Helper()
		stdout, stderr, code := run(t, append([]string{"eval", "--data", world, "--json", "--no-ndcg"}, args...)...)
		if code != 0 {
			t.Fatalf("eval %v: exit %d: %s", args, code, stderr)
		}
		var rep struct {
			RSum float64 `json:"rsum"`
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("eval --json printed %q: %v", stdout, err)
		}
		return rep.RSum
	}
	aloneT, aloneS := rsum("--checkpoint", teran), rsum("--checkpoint", seam)
	if aloneT == aloneS {
		t.Fatalf("the two models score alike (rsum %.1f): the test cannot tell them apart", aloneT)
	}
	both := []string{"--checkpoint", teran, "--checkpoint", seam}
	if got := rsum(append(both, "--weights", "1,0.00001")...); got != aloneT {
		t.Errorf("fused with SEAM-E at weight 1e-5: rsum %.2f, TERAN alone %.2f", got, aloneT)
	}
	if got := rsum(append(both, "--weights", "0.00001,1")...); got != aloneS {
		t.Errorf("fused with TERAN at weight 1e-5: rsum %.2f, SEAM-E alone %.2f", got, aloneS)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(both, "--weights", "1"), "1 weights for 2 --checkpoint"},
		{append(both, "--weights", "1,-2"), `weight 2 is "-2"`},
		{append(both, "--weights", "1,1", "--save-sims", filepath.Join(dir, "s.npy")), "--save-sims: a fusion"},
		{append(both, "--querybank", "20"), "a query bank normalises a fusion (--weights) or one --checkpoint"},
		{append(both, "--weights", "1,1", "--querybank", "20", "--querybank-split", "test"), "--querybank-split test is the evaluated split"},
		{append(both, "--weights", "1,1", "--querybank", "-1"), "--querybank -1, --querybank-images 0: want numbers of queries > 0"},
		{append(both, "--weights", "1,1", "--querybank", "5", "--querybank-captions", filepath.Join(world, "train_caps.txt")), "--querybank N or --querybank-captions FILE, not both"},
		{append(both, "--weights", "1,1", "--querybank", "5", "--querybank-beta", "0"), "--querybank-beta 0: want a number > 0"},
		{[]string{"--checkpoint", teran, "--querybank", "5", "--save-sims", filepath.Join(dir, "s.npy")}, "--save-sims: a query bank ranks"},
	} {
		if _, stderr, code := run(t, append([]string{"eval", "--data", world, "--no-ndcg"}, c.args...)...); code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("eval %v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}

	// A query bank from the training split: it moves the fused scores, and
	// the evaluation runs through.
	plain := rsum(append(both, "--weights", "1,0.5")...)
	banked := rsum(append(both, "--weights", "1,0.5", "--querybank", "40", "--querybank-images", "20")...)
	t.Logf("rsum %.1f, with a query bank of 40 training captions and 20 images %.1f", plain, banked)
	if chance := 2 * (1 + 5 + 10) * 100.0 / 50; banked <= chance {
		t.Errorf("with a query bank: rsum %.1f (%.1f without): want more than chance's %.0f over 50 images", banked, plain, chance)
	}

	// The two indexes of the test split, fused.
	idx := filepath.Join(dir, "idx")
	for _, m := range []string{"teran", "seam"} {
		if _, stderr, code := run(t, "index", "--checkpoint", filepath.Join(dir, m), "--data", world, "--split", "test", "--out", filepath.Join(idx, m)); code != 0 {
			t.Fatalf("index %s: exit %d: %s", m, code, stderr)
		}
	}
	if _, stderr, code := run(t, "index", "--checkpoint", seam, "--data", world, "--split", "dev", "--out", filepath.Join(dir, "dev.idx")); code != 0 {
		t.Fatalf("index dev: exit %d: %s", code, stderr)
	}
	if _, stderr, code := run(t, "fuse", "--index", filepath.Join(idx, "teran"), "--index", filepath.Join(dir, "dev.idx"), "--out", filepath.Join(dir, "bad")); code != 1 || !strings.Contains(stderr, "want the same images in the same order") {
		t.Fatalf("fuse of the test and dev splits: exit %d, stderr %q; want a refusal", code, stderr)
	}
	if _, stderr, code := run(t, "fuse", "--index", filepath.Join(idx, "teran"), "--out", idx); code != 2 || !strings.Contains(stderr, "two or more") {
		t.Fatalf("fuse of one index: exit %d, stderr %q", code, stderr)
	}
	if stdout, stderr, code := run(t, "fuse", "--index", filepath.Join(idx, "teran"), "--index", filepath.Join(idx, "seam"), "--weights", "1,0.5", "--out", idx); code != 0 || !strings.Contains(stdout, "fused 2 indexes") {
		t.Fatalf("fuse: exit %d: %s%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(idx, "fusion.json"))
	if err != nil || !strings.Contains(string(b), `"dir": "teran"`) {
		t.Fatalf("fusion.json: %s (%v): want the members inside it named relative to it", b, err)
	}
	caps, err := os.ReadFile(filepath.Join(world, "test_caps.txt"))
	if err != nil {
		t.Fatal(err)
	}
	query := strings.SplitN(string(caps), "\n", 2)[0]
	stdout, stderr, code := run(t, "search", "--index", idx, "--text", query, "-k", "3", "--explain", "--json")
	if code != 0 {
		t.Fatalf("search: exit %d: %s", code, stderr)
	}
	var out struct {
		Fusion []struct {
			Model  string  `json:"model"`
			Weight float64 `json:"weight"`
		} `json:"fusion"`
		Results []struct {
			Image   struct{ ID string } `json:"image"`
			Explain []struct{ Word string }
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("search --json printed %q: %v", stdout, err)
	}
	if len(out.Fusion) != 2 || out.Fusion[0].Model != "teran" || out.Fusion[1].Model != "seam" || out.Fusion[1].Weight != 0.5 ||
		len(out.Results) != 3 || out.Results[0].Image.ID == "" || len(out.Results[0].Explain) == 0 {
		t.Fatalf("search --json of the fusion: %+v", out)
	}
	if stdout, stderr, code := run(t, "search", "--index", idx, "--image", out.Results[0].Image.ID, "-k", "2"); code != 0 || !strings.Contains(stdout, "fused scores: 1 x teran (MrSw) + 0.5 x seam (order)") {
		t.Fatalf("search --image of the fusion: exit %d: %q %s", code, stdout, stderr)
	}
	if _, stderr, code := run(t, "search", "--index", idx, "--text", query, "--pooling", "MwSr"); code != 1 || !strings.Contains(stderr, "a fusion of indexes scores each with its own model's scoring") {
		t.Fatalf("search --pooling of a fusion: exit %d, stderr %q", code, stderr)
	}

	// The same fusion with a query bank of the training captions: its
	// offsets are written beside fusion.json and text searches use them.
	trainCaps := filepath.Join(world, "train_caps.txt")
	empty := filepath.Join(dir, "empty.txt")
	if err := os.WriteFile(empty, []byte("\n \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fuseArgs := []string{"fuse", "--index", filepath.Join(idx, "teran"), "--index", filepath.Join(idx, "seam"), "--weights", "1,0.5", "--out", idx}
	if _, stderr, code := run(t, append(fuseArgs, "--querybank", empty)...); code != 1 || !strings.Contains(stderr, "no caption: want one a line") {
		t.Fatalf("fuse --querybank of no caption: exit %d, stderr %q", code, stderr)
	}
	if stdout, stderr, code := run(t, append(fuseArgs, "--querybank", trainCaps)...); code != 0 || !strings.Contains(stdout, "with a query bank of 500 captions") {
		t.Fatalf("fuse --querybank: exit %d: %s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(idx, index.QueryBankFile)); err != nil {
		t.Fatalf("fuse --querybank: %v", err)
	}
	b, err = os.ReadFile(filepath.Join(idx, "fusion.json"))
	if err != nil || !strings.Contains(string(b), `"querybank"`) {
		t.Fatalf("fusion.json: %s (%v): want the query bank named", b, err)
	}
	if stdout, stderr, code := run(t, "search", "--index", idx, "--text", query, "-k", "3", "--json"); code != 0 || !strings.Contains(stdout, `"results"`) || !strings.Contains(stdout, `"querybank":{"captions":500,"beta":2}`) {
		t.Fatalf("search of the fusion with a query bank: exit %d: %q %s", code, stdout, stderr)
	}
	if stdout, stderr, code := run(t, "search", "--index", idx, "--text", query, "-k", "3"); code != 0 || !strings.Contains(stdout, "less each image's offset under a query bank of 500 captions") {
		t.Fatalf("search of the fusion with a query bank: exit %d: %q %s", code, stdout, stderr)
	}
	if stdout, stderr, code := run(t, "search", "--index", idx, "--image", out.Results[0].Image.ID, "-k", "2", "--json"); code != 0 || strings.Contains(stdout, "querybank") {
		t.Fatalf("image search of the fusion with a query bank: exit %d: %q %s; want no query bank", code, stdout, stderr)
	}
}

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/synth"
	"github.com/xmr-project/xmr/text"
)

// evalWorld writes a synthetic world of 30 test images of 6 regions of 8 features
// and an untrained TERAN checkpoint that reads them; it returns both paths.
func evalWorld(t *testing.T) (world, ckpt string) {
	t.Helper()
	dir := t.TempDir()
	world = filepath.Join(dir, "world")
	if _, err := synth.Generate(context.Background(), world, synth.Config{N: 90, Seed: 1, Dim: 8, Regions: 6, Noise: 0.1, NoImages: true, Dev: 30, Test: 30}); err != nil {
		t.Fatal(err)
	}
	cfg := model.Default()
	cfg.ImageModel = model.ImageConfig{Name: "bottomup", FeatDim: 8, TransformerLayers: 1, Heads: 2, FF: 8, Hidden: 8, PosEncoding: "concat-and-process"}
	cfg.TextModel = model.TextConfig{Name: "bert", WordDim: 8, ExtractionHiddenLayer: 1, FineTune: true, Heads: 2, FF: 8, MaxPositions: 32}
	cfg.Model = model.JointConfig{Name: "teran", EmbedSize: 8, Layers: 1, Heads: 2, FF: 8}
	cfg.MaxCaptionTokens = 32
	tok, err := text.NewWordPiece(text.NewVocab([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "red", "blue", "circle", "square", "left", "of"}))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, tok, 1)
	if err != nil {
		t.Fatal(err)
	}
	ckpt = filepath.Join(dir, "tiny.safetensors")
	if err := model.Save(ckpt, m, nil, nil); err != nil {
		t.Fatal(err)
	}
	return world, ckpt
}

// TestEvalChecksOutputsFirst: an --out or --save-sims that cannot be
// written is a usage error naming the flag and the path, found before the
// data is even read (the data here does not exist).
func TestEvalChecksOutputsFirst(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-dir")
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flag, path, why string
	}{
		{"--out", filepath.Join(missing, "m.json"), "no such file or directory"},
		{"--save-sims", filepath.Join(missing, "s.npy"), "no such file or directory"},
		{"--out", filepath.Join(notDir, "m.json"), "is not a directory"},
		{"--save-sims", dir, "is a directory"},
	} {
		_, stderr, code := run(t, "eval", "--checkpoint", filepath.Join(dir, "none.safetensors"), "--data", filepath.Join(dir, "no-world"), "--no-ndcg", c.flag, c.path)
		if code != 2 || !strings.Contains(stderr, c.flag) || !strings.Contains(stderr, c.path) || !strings.Contains(stderr, c.why) {
			t.Errorf("%s %s: exit %d, stderr %q; want a usage error naming the flag, the path and %q", c.flag, c.path, code, stderr, c.why)
		}
	}
	// With --sims too, before the matrix is read.
	_, stderr, code := run(t, "eval", "--sims", filepath.Join(dir, "none.npy"), "--out", filepath.Join(missing, "m.json"))
	if code != 2 || !strings.Contains(stderr, "--out: ") {
		t.Errorf("--sims with a bad --out: exit %d, stderr %q; want a usage error about --out", code, stderr)
	}
}

// TestEvalReportBeforeFiles: the metrics reach stdout before --out is
// written, so a failure to write it loses nothing.
func TestEvalReportBeforeFiles(t *testing.T) {
	saved, savedOut := evalFlags, stdout
	defer func() { evalFlags, stdout = saved, savedOut }()
	sims := &eval.Matrix{Rows: 2, Cols: 10, Data: make([]float32, 20)}
	for i := range sims.Data {
		sims.Data[i] = float32(i % 7)
	}
	rep, err := eval.Evaluate(sims, eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, asJSON := range []bool{false, true} {
		var buf bytes.Buffer
		stdout = &buf
		evalFlags.json = asJSON
		evalFlags.out = filepath.Join(t.TempDir(), "gone", "m.json") // its directory vanished during the run
		err := writeReport(rep)
		if err == nil || !strings.Contains(err.Error(), "--out") {
			t.Errorf("json %v: error %v, want one about --out", asJSON, err)
		}
		if !strings.Contains(buf.String(), "rsum") {
			t.Errorf("json %v: stdout %q, want the report printed before the failed write", asJSON, buf.String())
		}
	}
}

// TestEvalProtocolBeforeEncoding: a protocol the split cannot have is
// refused right after the data is read, before the checkpoint (missing
// here) is loaded and anything encoded.
func TestEvalProtocolBeforeEncoding(t *testing.T) {
	world, _ := evalWorld(t)
	none := filepath.Join(t.TempDir(), "none.safetensors")
	for _, c := range []struct{ proto, want string }{
		{"5k", "protocol 5k needs 5000 images, split test has 30"},
		{"1k", "split test has 30 images, not a multiple of 1000"},
	} {
		_, stderr, code := run(t, "eval", "--checkpoint", none, "--data", world, "--protocol", c.proto)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("--protocol %s: exit %d, stderr %q; want a usage error %q", c.proto, code, stderr, c.want)
		}
	}
}

// TestEvalShowsProgress: xmr eval shows the progress of encoding and
// scoring (log lines off a terminal), writes --out and --save-sims, and
// prints the table.
func TestEvalShowsProgress(t *testing.T) {
	world, ckpt := evalWorld(t)
	dir := t.TempDir()
	out, simsPath := filepath.Join(dir, "m.json"), filepath.Join(dir, "s.npy")
	stdout, stderr, code := run(t, "eval", "--checkpoint", ckpt, "--data", world, "--no-ndcg", "--out", out, "--save-sims", simsPath)
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr)
	}
	for _, want := range []string{`msg="encode images done" count=30`, `msg="encode captions done" count=150`, `msg="score done" count=30`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if !strings.Contains(stdout, "rsum") {
		t.Errorf("stdout %q, want the table", stdout)
	}
	sims, err := eval.ReadNPY(simsPath)
	if err != nil || sims.Rows != 30 || sims.Cols != 150 {
		t.Errorf("--save-sims: %v, %v; want a 30 x 150 matrix", sims, err)
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("--out: %v", err)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(matches) > 0 {
		t.Errorf("left behind %v", matches)
	}
}

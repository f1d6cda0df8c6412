package learn

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/internal/detecttest"
	"github.com/xmr-project/xmr/train"
)

// TestTrainTuned runs Train on a recipe that fine-tunes the detector
// (teran-photos-tuned at a tiny size) on 24 shared photos extracted with
// their s32 activations: the run gets the detector (train.Run refuses a
// vision-cut without one) and its test photos' features are recomputed
// with its part (finetune.RefeatureSplit, which refuses a split without
// activations) before they are scored.
func TestTrainTuned(t *testing.T) {
	shared := filepath.Join("..", "..", "..", "shared", "data", "flickr8k-photos")
	karpathy := filepath.Join(shared, "dataset_flickr8k.json")
	if _, err := os.Stat(karpathy); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the shared photos: %v", err)
		}
		t.Skipf("the shared photos are not here: %v", err)
	}
	det := detecttest.Detector(t)
	ctx := context.Background()
	specs, err := extract.KarpathySplits(karpathy, filepath.Join(shared, "images"), []string{"train", "val"}, data.IDFilename)
	if err != nil {
		t.Fatal(err)
	}
	for i := range specs {
		n := map[string]int{data.SplitTrain: 24, data.SplitDev: 8}[specs[i].Name]
		specs[i].Items, specs[i].Captions = specs[i].Items[:n], specs[i].Captions[:n]
	}
	cut, _ := detect.CutNamed("s32")
	tapped, err := det.WithTaps(cut.Node)
	if err != nil {
		t.Fatal(err)
	}
	e, err := extract.New(tapped, extract.Options{Taps: cut.Name})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	feats := filepath.Join(dir, "feats")
	if _, err := extract.Build(ctx, e, feats, specs, extract.BuildOptions{Workers: 2}); err != nil {
		t.Fatal(err)
	}
	cfg, err := train.LoadConfig("teran-photos-tuned")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ImageModel.Hidden, cfg.ImageModel.FF, cfg.ImageModel.TransformerLayers = 64, 128, 1
	cfg.TextModel.WordDim, cfg.TextModel.FF = 64, 128
	cfg.Model.EmbedSize, cfg.Model.FF = 64, 128
	cfg.Training.BatchSize, cfg.Training.ValStep = 16, 0
	path := filepath.Join(dir, "tuned.yaml")
	if err := os.WriteFile(path, []byte(cfg.Marshal()), 0o644); err != nil {
		t.Fatal(err)
	}
	src := data.Source{Path: feats}
	test, err := src.Load(ctx, data.SplitDev)
	if err != nil {
		t.Fatal(err)
	}
	defer test.Close()
	rel, err := eval.RelevanceMatrices(ctx, test.Captions, test.CapsPerImage)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", t.TempDir())
	o, err := Train(ctx, path, src, test, rel, 4*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d iterations, %s: rsum %.1f", o.Iters, o.Stopped, o.Metrics.RSum)
	if o.Iters == 0 || o.Metrics.RSum <= 0 {
		t.Errorf("outcome %+v", o)
	}
}

package train

import (
	"context"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/finetune"
	"github.com/xmr-project/xmr/internal/detecttest"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/npy"
	"github.com/xmr-project/xmr/synth"
)

// visionDetector is the real detector (detecttest).
func visionDetector(t testing.TB) *detect.Detector { return detecttest.Detector(t) }

// visionMaps are the maps the test data set's features pool: 128
// informative columns (the synthetic world's, under neck_s4's name) and
// backbone_s32's 480, which cut s32's part computes.
var visionMaps = []string{"neck_s4", "backbone_s32"}

const (
	visionInfo  = 128              // informative columns
	visionWidth = visionInfo + 480 // with backbone_s32's
	visionCut   = "s32"            // the cut the test fine-tunes from
	visionTrain = 300              // train images
	visionDev   = 100              // dev images
	visionR     = 8                // region slots: a world learnt in fewer iterations than with 16
	visionScale = 0.5              // the random activations' standard deviation
	visionPref  = finetune.Prefix  // the part's weights' names start so
	visionMeta  = finetune.MetaKey // the checkpoints' key naming the cut
)

// visionData writes, in a new directory, a data set that
// finetune.OpenData accepts: a synthetic world's train and dev splits
// whose features are [the world's 128 columns | backbone_s32's 480], with
// an extract.Record naming the detector, and random float16 activations
// at cut s32 (taps-s32/SPLIT.npy) from which the part, with the
// detector's weights, computes the backbone_s32 columns at the regions'
// boxes, as xmr extract --taps writes them.
func visionData(t *testing.T, det *detect.Detector) string {
	t.Helper()
	ctx := context.Background()
	tmp := t.TempDir()
	world := filepath.Join(tmp, "world")
	if _, err := synth.Generate(ctx, world, synth.Config{N: visionTrain + visionDev + 100, Seed: 9, Dim: visionInfo, Regions: visionR, Noise: 0.02,
		NoImages: true, Dev: visionDev, Test: 100}); err != nil {
		t.Fatal(err)
	}
	cut, err := detect.CutNamed(visionCut)
	if err != nil {
		t.Fatal(err)
	}
	part, err := finetune.NewPart(det, cut, visionMaps)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "data")
	rng := rand.New(rand.NewPCG(11, 1))
	rec := &extract.Record{
		Extractor: extract.Identity{Name: detect.Name, Version: detect.Version, Width: visionWidth, Maps: visionMaps, Pooling: extract.Pooling},
		Kind:      extract.KindRegions, MaxBoxes: visionR, Splits: map[string]extract.SplitRecord{}, Taps: visionCut,
	}
	for _, split := range []string{data.SplitTrain, data.SplitDev} {
		s, err := data.LoadPrecomp(ctx, world, split, nil)
		if err != nil {
			t.Fatal(err)
		}
		g := s.Images
		if g.D != visionInfo || g.Boxes == nil {
			t.Fatalf("the world's %s split: %d-d features, boxes %v", split, g.D, g.Boxes != nil)
		}
		reg := &data.Regions{N: g.N, R: g.R, D: visionWidth, Feat: make([]float32, g.N*g.R*visionWidth),
			Boxes: slices.Clone(g.Boxes), Count: slices.Clone(g.Count)}
		for i := range g.N {
			for r := range g.R {
				copy(reg.Region(i, r), g.Region(i, r))
			}
		}
		// The activations, in float16 as xmr extract writes them.
		path := extract.TapsPath(dir, visionCut, split)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		in := part.InShape()
		w, err := npy.Create(path, npy.Float16, append([]int{g.N}, in...))
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float32, g.N*in[0]*in[1]*in[2])
		for i := range x {
			x[i] = visionScale * float32(rng.NormFloat64())
		}
		if err := w.WriteFloat32(x); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		// backbone_s32's columns as the part computes them from those
		// (float16) activations.
		taps, err := finetune.OpenTaps(path, reg, in)
		if err != nil {
			t.Fatal(err)
		}
		full, err := part.Refeature(taps, reg)
		taps.Close()
		if err != nil {
			t.Fatal(err)
		}
		out := &data.Split{Name: split, Images: full, Captions: s.Captions, CapsPerImage: s.CapsPerImage, ImageIDs: s.ImageIDs}
		if err := data.WritePrecomp(ctx, dir, out); err != nil {
			t.Fatal(err)
		}
		rec.Splits[split] = extract.SplitRecord{Images: g.N, Captions: true}
		s.Close()
	}
	if err := extract.WriteRecord(dir, rec); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(world); err != nil {
		t.Fatal(err)
	}
	return dir
}

// visionConfig is the tiny TERAN fine-tuning the detector from cut s32.
func visionConfig(t *testing.T) Config {
	cfg := tinyConfig(t, "teran-mrsw-small.yaml")
	// At 1e-3 the part's weights moved so fast that the model learnt
	// half as much in these iterations; 2e-4 is the photo recipe's.
	cfg.Training.VisionCut, cfg.Training.VisionLR = visionCut, 2e-4
	cfg.Training.ValStep = 0 // at the end of each epoch and of the run
	return cfg
}

// detectorOf returns an Options.Detector that gives det.
func detectorOf(det *detect.Detector) func(context.Context) (*detect.Detector, error) {
	return func(context.Context) (*detect.Detector, error) { return det, nil }
}

// visionTensors returns the tensors of the checkpoint at path named with
// the part's prefix, and its metadata.
func visionTensors(t *testing.T, path string) (map[string][]float32, map[string]string) {
	t.Helper()
	f, err := checkpoint.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ts := map[string][]float32{}
	for _, name := range f.Names() {
		if !strings.HasPrefix(name, visionPref) {
			continue
		}
		d, _, err := f.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		ts[name] = d
	}
	return ts, f.Metadata()
}

// distance is the Euclidean distance between two sets of tensors of the
// same names.
func distance(t *testing.T, a, b map[string][]float32) float64 {
	t.Helper()
	var s float64
	for name, x := range a {
		y, ok := b[name]
		if !ok || len(y) != len(x) {
			t.Fatalf("%s: %d values, and %d (present: %v) in the other", name, len(x), len(y), ok)
		}
		for i := range x {
			d := float64(x[i] - y[i])
			s += d * d
		}
	}
	return math.Sqrt(s)
}

// TestVisionLearns trains a tiny TERAN that fine-tunes the detector's
// upper part (cut s32) on a synthetic world whose features carry the
// part's 480 columns beside the world's 128: the loss falls and
// text-to-image recall rises well above chance (100 dev images: R@1 1%,
// R@10 10%); every checkpoint carries the part's weights (vision.*), moved
// away from the detector's, and names the cut; the validations read the
// features that the part recomputes with the weights of the moment (the
// best checkpoint scores the best validation's rsum again on the dev
// features its part makes); and a resumed run goes on from the
// checkpoint's part, not the detector's.
func TestVisionLearns(t *testing.T) {
	det := visionDetector(t)
	dir := visionData(t, det)
	cfg := visionConfig(t)
	out := t.TempDir()
	const iters = 120
	start := time.Now()
	res, err := Run(context.Background(), Options{Config: cfg, Data: data.Source{Path: dir}, Out: out, MaxIters: iters, ValImages: visionDev, Detector: detectorOf(det)})
	if err != nil {
		t.Fatal(err)
	}
	hist := readHistory(t, out)
	first, last := hist[0], hist[len(hist)-1]
	t.Logf("%d iterations in %v: loss %.3f -> %.3f, R@1 t2i %.1f i2t %.1f, R@10 t2i %.1f, rsum %.1f",
		res.Iters, time.Since(start).Round(time.Second), first.Loss, last.Loss, last.R1T2I, last.R1I2T, last.R10T2I, last.RSum)
	if res.Iters != iters {
		t.Errorf("the run stopped at iteration %d (%s), want %d", res.Iters, res.Stopped, iters)
	}
	if !(last.Loss < 0.8*first.Loss) {
		t.Errorf("loss did not fall: %.3f -> %.3f", first.Loss, last.Loss)
	}
	// Measured: R@1 7.2, R@10 38.8, rsum 153.6 (4.9 times chance).
	if chance := chanceRSum(visionDev, 5); last.R10T2I < 25 || last.R1T2I < 4 || last.RSum < 3*chance {
		t.Errorf("text-to-image R@1 %.1f%%, R@10 %.1f%%, rsum %.1f: not well above chance (1%%, 10%%, %.1f)", last.R1T2I, last.R10T2I, last.RSum, chance)
	}

	// The detector's weights, as the run started from.
	cut, _ := detect.CutNamed(visionCut)
	orig, err := finetune.NewPart(det, cut, visionMaps)
	if err != nil {
		t.Fatal(err)
	}
	origW := map[string][]float32{}
	for _, p := range orig.Params() {
		origW[p.Name] = slices.Clone(p.T.Data)
	}
	if len(origW) == 0 {
		t.Fatal("the part has no weights")
	}
	var lastW map[string][]float32
	for _, name := range []string{"best-rsum.safetensors", "last.safetensors"} {
		ts, md := visionTensors(t, filepath.Join(out, name))
		if md[visionMeta] != visionCut {
			t.Errorf("%s: metadata %s = %q, want %q", name, visionMeta, md[visionMeta], visionCut)
		}
		if len(ts) != len(origW) {
			t.Errorf("%s: %d tensors named %s*, the part has %d weights", name, len(ts), visionPref, len(origW))
		}
		for pn, w := range origW {
			got, ok := ts[pn]
			switch {
			case !ok:
				t.Errorf("%s: no tensor %s", name, pn)
			case len(got) != len(w):
				t.Errorf("%s: %s has %d values, the detector's %d", name, pn, len(got), len(w))
			case slices.Equal(got, w):
				t.Errorf("%s: %s is the detector's weight still: the part did not train", name, pn)
			}
		}
		if name == "last.safetensors" {
			lastW = ts
		}
	}

	// The validations read the features the part makes with the weights
	// of the moment: the best checkpoint, given the dev features that its
	// own part recomputes, scores the best validation's rsum again; given
	// the extracted features, it scores otherwise.
	dev, err := data.LoadPrecomp(context.Background(), dir, data.SplitDev, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	m, cf, err := model.Load(filepath.Join(out, "best-rsum.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	best, err := finetune.LoadPart(cf, det, visionMaps)
	cf.Close()
	if err != nil {
		t.Fatal(err)
	}
	taps, err := finetune.OpenTaps(extract.TapsPath(dir, visionCut, data.SplitDev), dev.Images, best.InShape())
	if err != nil {
		t.Fatal(err)
	}
	re, err := best.Refeature(taps, dev.Images)
	taps.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(re.Region(0, 0)[:visionInfo], dev.Images.Region(0, 0)[:visionInfo]) {
		t.Error("the trained part changed the feature columns it does not compute")
	}
	tuned := *dev
	tuned.Images = re
	score := func(s *data.Split) eval.Metrics {
		r, err := eval.EvaluateModels(context.Background(), []model.Model{m}, s, eval.ModelOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Report.Metrics
	}
	withPart, extracted := score(&tuned), score(dev)
	t.Logf("best checkpoint: rsum %.2f on the features its part makes, %.2f on the extracted ones; the run's best %.2f", withPart.RSum, extracted.RSum, res.BestRSum)
	if math.Abs(withPart.RSum-res.BestRSum) > 1e-6 {
		t.Errorf("the best checkpoint scores rsum %.4f on the dev features its part makes, the run's best validation %.4f: validation did not read the features of the weights it saved", withPart.RSum, res.BestRSum)
	}
	if withPart.RSum == extracted.RSum && withPart.I2T == extracted.I2T && withPart.T2I == extracted.T2I {
		t.Errorf("the best checkpoint ranks the same on the extracted dev features (%+v): its part changed nothing the model reads", extracted)
	}

	// Resumed, the run goes on from its checkpoint's part: after 10 more
	// iterations it is much nearer the part it stopped with than the
	// detector's.
	res, err = Run(context.Background(), Options{Data: data.Source{Path: dir}, Out: out, MaxIters: iters + 10, ValImages: visionDev, Resume: true, Detector: detectorOf(det)})
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if res.Iters != iters+10 {
		t.Errorf("the resumed run stopped at iteration %d, want %d", res.Iters, iters+10)
	}
	resumedW, md := visionTensors(t, filepath.Join(out, "last.safetensors"))
	if md[visionMeta] != visionCut || len(resumedW) != len(origW) {
		t.Fatalf("the resumed run's last.safetensors: %s = %q, %d tensors named %s*, want %q and %d", visionMeta, md[visionMeta], len(resumedW), visionPref, visionCut, len(origW))
	}
	moved, trained := distance(t, resumedW, lastW), distance(t, origW, lastW)
	t.Logf("the part moved %.4g in 10 resumed iterations; %.4g from the detector's in the first %d", moved, trained, iters)
	if moved == 0 {
		t.Error("the resumed run did not train the part")
	}
	if !(moved < 0.6*trained) {
		t.Errorf("after resuming, the part is %.4g from where it stopped, and the detector's %.4g from there: the resumed run did not start from the checkpoint's part", moved, trained)
	}
}

// TestVisionDataErrors checks that a run fine-tuning the detector refuses,
// before it trains, data it cannot recompute the features of, with a
// message that names what is wrong and the fix: a data set without the
// cut's activations, activations of other images or of another number,
// features without the cut's map, features of a tuned detector, a data
// set without its extractor record, and a run given no detector.
func TestVisionDataErrors(t *testing.T) {
	det := visionDetector(t)
	base := visionData(t, det)
	train := extract.TapsPath("DATA", visionCut, data.SplitTrain)
	editRecord := func(edit func(*extract.Record)) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			rec, err := extract.ReadRecord(dir)
			if err != nil || rec == nil {
				t.Fatalf("record: %v", err)
			}
			edit(rec)
			if err := extract.WriteRecord(dir, rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		noDet  bool
		want   []string // DATA: the data set's directory
	}{
		{"no taps", func(t *testing.T, dir string) {
			if err := os.RemoveAll(filepath.Dir(extract.TapsPath(dir, visionCut, data.SplitTrain))); err != nil {
				t.Fatal(err)
			}
		}, false, []string{train, "--taps " + visionCut}},
		{"no dev taps", func(t *testing.T, dir string) {
			if err := os.Remove(extract.TapsPath(dir, visionCut, data.SplitDev)); err != nil {
				t.Fatal(err)
			}
		}, false, []string{extract.TapsPath("DATA", visionCut, data.SplitDev), "--taps"}},
		{"taps of fewer images", func(t *testing.T, dir string) {
			writeZeroTaps(t, extract.TapsPath(dir, visionCut, data.SplitTrain), visionTrain-1)
		}, false, []string{train, "--taps"}},
		{"taps of other images", func(t *testing.T, dir string) {
			writeZeroTaps(t, extract.TapsPath(dir, visionCut, data.SplitTrain), visionTrain)
		}, false, []string{"do not give the extracted features", "--taps"}},
		{"features without backbone_s32", editRecord(func(r *extract.Record) {
			r.Extractor.Maps = []string{"neck_s4", "neck_s8"}
		}), false, []string{"backbone_s32", "every map"}},
		{"features of a tuned detector", editRecord(func(r *extract.Record) {
			r.Extractor.Tuned = visionCut
		}), false, []string{"fine-tuned detector", "published one"}},
		{"no extractor record", func(t *testing.T, dir string) {
			if err := extract.RemoveRecord(dir); err != nil {
				t.Fatal(err)
			}
		}, false, []string{extract.FileName, "--taps " + visionCut}},
		{"no detector", nil, true, []string{"no detector"}},
	}
	cfg := visionConfig(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			copyTree(t, base, dir)
			if tc.damage != nil {
				tc.damage(t, dir)
			}
			o := Options{Config: cfg, Data: data.Source{Path: dir}, Out: t.TempDir(), MaxIters: 1, ValImages: 10}
			if !tc.noDet {
				o.Detector = detectorOf(det)
			}
			_, err := Run(context.Background(), o)
			if err == nil {
				t.Fatal("the run was not refused")
			}
			for _, w := range tc.want {
				if w = strings.ReplaceAll(w, "DATA", dir); !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if _, serr := os.Stat(filepath.Join(o.Out, "last.safetensors")); serr == nil {
				t.Error("the refused run wrote a checkpoint")
			}
		})
	}
}

// writeZeroTaps replaces the activations at path with n images' zeros.
func writeZeroTaps(t *testing.T, path string, n int) {
	t.Helper()
	w, err := npy.Create(path, npy.Float16, []int{n, 16, 16, 120})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFloat32(make([]float32, n*16*16*120)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies the directory src to dst, regular files only.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

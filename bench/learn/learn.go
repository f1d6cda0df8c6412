// Package learn is `xmr bench learn`: how well each model learns on a data
// set in the same wall-clock budget, against the textbook baseline. Every
// model trains from scratch on the train split for the budget (its
// validations on the dev split count in the budget and pick the best
// checkpoint), then the best checkpoint is evaluated on the test split
// (R@1/5/10 both directions, rsum, NDCG with ROUGE-L relevance). The peer
// is VSE++ in PyTorch (tools/vsepp.py), trained on the same data for the
// same budget in the same run; each result's ratio is the model's test rsum
// over the peer's (above 1: better than the baseline).
//
// train-images=N trains every model and the peer on the same N images of
// the train split (each with all its captions, drawn by seed), written with
// the unchanged dev and test splits to a temporary precomp directory: how
// the models learn on a smaller set than the one their defaults were
// chosen on.
//
// repeats=N trains every model and the peer N times on the same data, with
// seeds seed, seed+1, ... (1, 2, ... when no seed is given), and reports
// the mean of each metric, each run's rsum in the note, and the ratio of
// the means: on a small set one run's test rsum moves by 20 to 50 with the
// seed (and with the thread count, through the order of its sums), as the
// best checkpoint is picked on a small dev split.
package learn

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/finetune"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/train"
)

// Benchmark is `xmr bench learn data=DIR [budget=4m] [models=a,b,...]
// [seed=N] [train-images=N] [repeats=N]`.
var Benchmark = bench.Benchmark{
	Name:    "learn",
	Summary: "train each model for the same budget on a data set and compare test recall with VSE++ in PyTorch [data=DIR budget=4m models=" + strings.Join(DefaultModels, ",") + " seed=N train-images=N (the same N train images, drawn by seed, for every model and the peer; default all) repeats=N (N runs of each with seeds seed, seed+1, ...; the means are reported)]",
	Run:     run,
}

// DefaultModels are the built-in configs trained by default: every model
// of the four papers that xmr has, and VSE++.
var DefaultModels = []string{"teran-mrsw-small", "teran-mwsr-small", "tern-small", "seam-e-small", "seam-c-small", "seam-g-small", "member-small", "vsepp-small"}

// PhotoModels are the configs trained by default on features that xmr
// extract made from photos (a data set whose features.json records the
// extractor): the photo recipe of each model.
var PhotoModels = []string{"teran-photos", "teran-mwsr-photos", "tern-photos", "seam-e-photos", "member-photos", "vsepp-photos"}

// params are the benchmark's arguments.
type params struct {
	data   string
	budget time.Duration
	models []string
	seed   uint64
	// trainImages, when above 0, is the number of train images to train
	// on (see writeSubset).
	trainImages int
	// repeats is the number of runs of each model and of the peer (their
	// seeds: runSeed).
	repeats int
}

// peerSeed is the seed of the train subset and of the peer: seed, or 1 when
// none is given (the models then keep their configs' own seeds).
func (p params) peerSeed() uint64 { return max(p.seed, 1) }

// runSeed is the seed of run k (0-based) of a model and of the peer:
// peerSeed()+k when runs repeat; for a single run p.seed, where 0 keeps the
// configs' own seeds.
func (p params) runSeed(k int) uint64 {
	if p.repeats <= 1 {
		return p.seed
	}
	return p.peerSeed() + uint64(k)
}

func parse(opts bench.Options) (params, error) {
	p := params{budget: 4 * time.Minute, repeats: 1}
	if opts.Quick {
		p.budget, p.models = 10*time.Second, []string{"tern-small", "vsepp-small"}
	}
	err := bench.ParseArgs("learn", opts.Args, map[string]any{"data": &p.data, "budget": &p.budget, "models": &p.models, "seed": &p.seed, "train-images": &p.trainImages, "repeats": &p.repeats})
	if err != nil {
		return p, err
	}
	if p.budget <= 0 {
		return p, fmt.Errorf("learn: budget=%v: want a positive duration such as 4m", p.budget)
	}
	if p.repeats < 1 {
		return p, fmt.Errorf("learn: repeats=%d: want 1 or more runs of each model", p.repeats)
	}
	if p.data == "" {
		return p, fmt.Errorf("learn: give data=DIR, a data set with train, dev and test splits (e.g. data=../shared/data/flickr8k-mini)")
	}
	if p.models == nil {
		p.models = DefaultModels
		if extracted(p.data) {
			p.models = PhotoModels
		}
	}
	return p, nil
}

// extracted reports whether dir is a data set that xmr extract made (its
// features.json records the extractor).
func extracted(dir string) bool {
	rec, err := extract.ReadRecord(dir)
	return err == nil && rec != nil
}

// globalDir returns dir's global-feature copy (dir/global, which xmr
// extract writes beside the regions), or "" when it has none.
func globalDir(dir string) string {
	g := filepath.Join(dir, "global")
	if _, err := os.Stat(filepath.Join(g, "train_ims.npy")); err == nil && extracted(dir) {
		return g
	}
	return ""
}

// evalSplit is the split the models are evaluated on: test, or dev when a
// precomp directory has no test split (Flickr8k as shared here: train and
// val; dev then also picks each model's checkpoint, and the note says so).
func evalSplit(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, "dev_ims.npy")); err == nil {
		if _, err := os.Stat(filepath.Join(dir, "test_ims.npy")); err != nil {
			return data.SplitDev
		}
	}
	return data.SplitTest
}

// Outcome is one model's result: its test metrics and how it trained.
type Outcome struct {
	// Seed is the run's training seed (the config's own unless given).
	Seed    uint64
	Iters   int
	Stopped string
	TrainS  float64
	Metrics eval.Metrics
}

func run(ctx context.Context, opts bench.Options) error {
	p, err := parse(opts)
	if err != nil {
		return err
	}
	src, dataDir, subset := data.Source{Path: p.data}, p.data, ""
	if p.trainImages > 0 {
		dir, total, err := writeSubset(ctx, src, p.trainImages, p.peerSeed())
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		src, dataDir = data.Source{Path: dir}, dir
		subset = fmt.Sprintf("; trained on %d of the %d train images (seed %d)", p.trainImages, total, p.peerSeed())
	}
	testName := evalSplit(dataDir)
	if testName != data.SplitTest {
		subset += "; evaluated on dev (the data has no test split), which also picked the checkpoint"
	}
	test, err := src.Load(ctx, testName)
	if err != nil {
		return fmt.Errorf("learn: %w", err)
	}
	defer test.Close()
	rel, err := eval.RelevanceMatrices(ctx, test.Captions, test.CapsPerImage)
	if err != nil {
		return err
	}
	// The models that read one vector per image (SEAM, VSE++) and the peer
	// read the global copy of extracted features, where there is one.
	gsrc, gtest, gdir := src, test, dataDir
	if g := globalDir(dataDir); g != "" {
		gsrc, gdir = data.Source{Path: g}, g
		if gtest, err = gsrc.Load(ctx, testName); err != nil {
			return fmt.Errorf("learn: %w", err)
		}
		defer gtest.Close()
	}

	peer, peerRSum, noPeer := "", 0.0, ""
	if !opts.NoPeer {
		var runs []run1
		version := ""
		for k := range p.repeats {
			seed := max(p.runSeed(k), 1)
			out, err := bench.RunPeer(ctx, opts, "vsepp.py", []string{"torch", "numpy"}, "--data", gdir, "--test-split", testName,
				"--budget", strconv.FormatFloat(p.budget.Seconds(), 'f', -1, 64), "--seed", strconv.FormatUint(seed, 10))
			if err != nil {
				noPeer = "; no peer: " + err.Error()
				runs = nil
				break
			}
			var r peerResult
			if err := json.Unmarshal(out, &r); err != nil {
				return fmt.Errorf("learn: peer output %q: %w", out, err)
			}
			version = r.Version
			runs = append(runs, run1{seed: seed, iters: r.Iters, trainS: r.TrainS, stopped: "budget", metrics: eval.Metrics{
				I2T:  eval.Recall{R1: r.Test["r1_i2t"], R5: r.Test["r5_i2t"], R10: r.Test["r10_i2t"]},
				T2I:  eval.Recall{R1: r.Test["r1_t2i"], R5: r.Test["r5_t2i"], R10: r.Test["r10_t2i"]},
				RSum: r.Test["rsum"],
			}})
		}
		if runs != nil {
			m := meanMetrics(runs)
			peer, peerRSum = "vsepp.py (PyTorch "+version+")", m.RSum
			note := runsNote(runs)
			if c := os.Getenv("OPENBLAS_CORETYPE"); c != "" {
				note += "; OPENBLAS_CORETYPE=" + c
			}
			emitMetrics(opts, "learn/vsepp-pytorch", m, "", 0, note+subset)
		}
	}
	for _, name := range p.models {
		var runs []run1
		msrc, mtest := src, test
		if cfg, err := runConfig(name, 0); err == nil && (cfg.ModelConfig().GlobalImages() || cfg.Model.Name == "vsepp") {
			msrc, mtest = gsrc, gtest
		}
		for k := range p.repeats {
			o, err := Train(ctx, name, msrc, mtest, rel, p.budget, p.runSeed(k))
			if err != nil {
				return err
			}
			runs = append(runs, run1{seed: o.Seed, iters: o.Iters, trainS: o.TrainS, stopped: o.Stopped, metrics: o.Metrics})
		}
		emitMetrics(opts, "learn/"+name, meanMetrics(runs), peer, peerRSum, runsNote(runs)+noPeer+subset)
	}
	return nil
}

// run1 is one training run of a model or of the peer.
type run1 struct {
	seed    uint64
	iters   int
	trainS  float64
	stopped string
	metrics eval.Metrics
}

// runsNote describes the runs behind a result: the iterations, time and
// stop reason of one run; the seeds, each run's test rsum and iterations
// and the spread of several.
func runsNote(runs []run1) string {
	if len(runs) == 1 {
		r := runs[0]
		return fmt.Sprintf("%d iterations in %.0f s (%s)", r.iters, r.trainS, r.stopped)
	}
	parts := make([]string, len(runs))
	lo, hi := runs[0].metrics.RSum, runs[0].metrics.RSum
	for i, r := range runs {
		parts[i] = fmt.Sprintf("seed %d: %.1f (%d iterations in %.0f s, %s)", r.seed, r.metrics.RSum, r.iters, r.trainS, r.stopped)
		lo, hi = min(lo, r.metrics.RSum), max(hi, r.metrics.RSum)
	}
	return fmt.Sprintf("mean of %d runs, rsum %.1f to %.1f; %s", len(runs), lo, hi, strings.Join(parts, "; "))
}

// meanMetrics is the mean of the runs' recalls, rsum and NDCG (the
// relevances every run has).
func meanMetrics(runs []run1) eval.Metrics {
	var m eval.Metrics
	n := float64(len(runs))
	for _, r := range runs {
		x := r.metrics
		m.I2T.R1 += x.I2T.R1 / n
		m.I2T.R5 += x.I2T.R5 / n
		m.I2T.R10 += x.I2T.R10 / n
		m.I2T.MedR += x.I2T.MedR / n
		m.I2T.MeanR += x.I2T.MeanR / n
		m.T2I.R1 += x.T2I.R1 / n
		m.T2I.R5 += x.T2I.R5 / n
		m.T2I.R10 += x.T2I.R10 / n
		m.T2I.MedR += x.T2I.MedR / n
		m.T2I.MeanR += x.T2I.MeanR / n
		m.RSum += x.RSum / n
	}
	for name := range runs[0].metrics.NDCG {
		var s eval.NDCGScore
		all := true
		for _, r := range runs {
			v, ok := r.metrics.NDCG[name]
			if !ok {
				all = false
				break
			}
			s.I2T += v.I2T / n
			s.T2I += v.T2I / n
		}
		if all {
			if m.NDCG == nil {
				m.NDCG = map[string]eval.NDCGScore{}
			}
			m.NDCG[name] = s
		}
	}
	return m
}

// peerResult is what tools/vsepp.py prints.
type peerResult struct {
	Version string             `json:"version"`
	Iters   int                `json:"iters"`
	TrainS  float64            `json:"train_s"`
	Test    map[string]float64 `json:"test"`
}

// emitMetrics reports the test rsum (against the peer's when there is one)
// and the recalls and NDCG behind it.
func emitMetrics(opts bench.Options, name string, m eval.Metrics, peer string, peerRSum float64, note string) {
	r := bench.Result{Name: name, Metric: "test rsum", Value: m.RSum, Unit: "rsum", Note: note}
	if peer != "" {
		r = r.WithPeer(peer, peerRSum, true)
	}
	opts.Emit(r)
	for _, x := range []struct {
		metric string
		v      float64
	}{
		{"i2t R@1", m.I2T.R1}, {"i2t R@5", m.I2T.R5}, {"i2t R@10", m.I2T.R10},
		{"t2i R@1", m.T2I.R1}, {"t2i R@5", m.T2I.R5}, {"t2i R@10", m.T2I.R10},
	} {
		opts.Emit(bench.Result{Name: name, Metric: x.metric, Value: x.v, Unit: "%"})
	}
	if nd, ok := m.NDCG["rouge-l"]; ok {
		opts.Emit(bench.Result{Name: name, Metric: "NDCG ROUGE-L i2t", Value: nd.I2T, Unit: ""})
		opts.Emit(bench.Result{Name: name, Metric: "NDCG ROUGE-L t2i", Value: nd.T2I, Unit: ""})
	}
}

// maxEpochs is the epochs that Train gives every run: the most a config
// allows, so that only the budget and early stopping end it.
const maxEpochs = 1_000_000

// Train trains the built-in config name (or a config file) on src for the
// budget in a temporary run directory, then evaluates its best checkpoint
// (by validation rsum) on test with the relevance matrices rel. The budget
// (or the config's early stopping), not its epochs, ends the run. A seed
// other than 0 replaces the config's.
func Train(ctx context.Context, name string, src data.Source, test *data.Split, rel []eval.Relevance, budget time.Duration, seed uint64) (*Outcome, error) {
	cfg, err := runConfig(name, seed)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "xmr-learn-*")
	if err != nil {
		return nil, fmt.Errorf("learn: %w", err)
	}
	defer os.RemoveAll(dir)
	slog.Info("learn: training", "model", name, "budget", budget)
	start := time.Now()
	opts := train.Options{Config: cfg, Data: src, Out: dir, TimeBudget: budget, CheckpointInterval: time.Hour}
	var det *detect.Detector
	if cfg.Training.VisionCut != "" {
		// A recipe that fine-tunes the detector (teran-photos-tuned).
		wdir, err := detect.Fetch(ctx, detect.DefaultCacheDir())
		if err == nil {
			det, err = detect.Load(wdir)
		}
		if err != nil {
			return nil, fmt.Errorf("learn: %s fine-tunes the detector: %w", name, err)
		}
		opts.Detector = func(context.Context) (*detect.Detector, error) { return det, nil }
	}
	res, err := train.Run(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("learn: train %s: %w", name, err)
	}
	trainS := time.Since(start).Seconds()
	m, f, err := model.Load(dir) // the run's best-rsum checkpoint
	if err != nil {
		return nil, fmt.Errorf("learn: %s: %w", name, err)
	}
	defer f.Close()
	if det != nil {
		// Its features of the test photos are its own.
		reg, err := finetune.RefeatureSplit(f, det, src.Path, test.Name, test.Images)
		if err != nil {
			return nil, fmt.Errorf("learn: %s: %w", name, err)
		}
		c := *test
		c.Images = reg
		test = &c
	}
	ev, err := eval.EvaluateModels(ctx, []model.Model{m}, test, eval.ModelOptions{Options: eval.Options{Relevances: rel}})
	if err != nil {
		return nil, fmt.Errorf("learn: evaluate %s: %w", name, err)
	}
	return &Outcome{Seed: cfg.Training.Seed, Iters: res.Iters, Stopped: res.Stopped, TrainS: trainS, Metrics: ev.Report.Metrics}, nil
}

// runConfig is the training config that Train runs for the built-in config
// (or config file) name: the config's own, with seed (other than 0) in
// place of its seed, and the most epochs a config allows. The budget ends
// the run, as it ends the peer's, and not the config's epochs: those were
// set for the data the config was chosen on, and on a small set 30 epochs
// pass in seconds (90 images with a batch of 128: 90 iterations). Early
// stopping (training.patience) still applies.
func runConfig(name string, seed uint64) (train.Config, error) {
	cfg, err := train.LoadConfig(name)
	if err != nil {
		return cfg, fmt.Errorf("learn: %w", err)
	}
	if seed != 0 {
		cfg.Training.Seed = seed
	}
	cfg.Training.Epochs = maxEpochs
	return cfg, nil
}

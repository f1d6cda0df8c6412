package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"time"

	"github.com/xmr-project/xmr/train"
)

var trainFlags struct {
	config     string
	data       dataFlags
	out        string
	timeBudget time.Duration
	resume     bool
	maxIters   int
	valImages  int
	cpuProfile string
}

func init() {
	register(&command{
		name:    "train",
		summary: "train a TERAN, TERN or SEAM model from a YAML config",
		usage:   "--config FILE.yaml --data PATH --out DIR [flags]",
		examples: `  xmr synth -n 6000 --dim 256 --no-images --out world
  xmr train --config configs/teran-mrsw-small.yaml --data world --out runs/teran --time-budget 15m
  xmr train --config configs/tern-small.yaml --data world --out runs/tern --time-budget 15m
  xmr train --config seam-c --data data/f30k_precomp --out runs/seam-c   # SEAM-C on global (N, D) features
  xmr train --out runs/teran --data world --resume     # continue a killed run
  xmr train --config teran-mrsw --data /data/coco --karpathy dataset_coco.json \
      --coco-annotations captions_train2014.json,captions_val2014.json --out runs/coco   # bottom-up files

Writes DIR/last.safetensors (with optimiser state, for --resume),
best-rsum.safetensors, best-ndcg.safetensors, metrics.csv, metrics.json,
curves.png and config.yaml.`,
		setFlags: func(fs *flag.FlagSet) {
			fs.StringVar(&trainFlags.config, "config", "", "YAML config (see configs/); not needed with --resume")
			trainFlags.data.addTo(fs)
			fs.StringVar(&trainFlags.out, "out", "", "run directory for checkpoints and metrics")
			fs.DurationVar(&trainFlags.timeBudget, "time-budget", 0, "stop cleanly after this much training time, e.g. 10m (0: no limit)")
			fs.BoolVar(&trainFlags.resume, "resume", false, "continue from OUT/last.safetensors")
			fs.IntVar(&trainFlags.maxIters, "max-iters", 0, "stop after this many iterations (0: the configured epochs)")
			fs.IntVar(&trainFlags.valImages, "val-images", 1000, "dev images used for validation")
			fs.StringVar(&trainFlags.cpuProfile, "cpuprofile", "", "write a CPU profile (go tool pprof) to `FILE`")
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
	src, err := f.data.source()
	if err != nil {
		return err
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
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
	res, err := train.Run(ctx, train.Options{Config: cfg, Data: src, Out: f.out, TimeBudget: f.timeBudget,
		Resume: f.resume, MaxIters: f.maxIters, ValImages: f.valImages})
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

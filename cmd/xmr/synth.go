package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/xmr-project/xmr/outpath"
	"github.com/xmr-project/xmr/synth"
)

var synthFlags struct {
	cfg       synth.Config
	out       string
	overwrite bool
}

func init() {
	register(&command{
		name:    "synth",
		summary: "generate a synthetic image-text world (shapes, region features, captions, ground truth)",
		usage:   "--out DIR [flags]",
		examples: `  xmr synth --out data/synth                      # 2000 images with PNGs
  xmr synth --out data/synth --seed 2 --overwrite # replace that world
  xmr synth -n 100000 --dim 256 --no-images --out data/synth100k
  xmr synth -n 25000 --seed 7 --test 5000 --dev 1000 --out data/synth25k`,
		setFlags: func(fs *flag.FlagSet) {
			d := synth.DefaultConfig()
			c := &synthFlags.cfg
			fs.IntVar(&c.N, "n", d.N, "total images: train + dev + testall (test is the first 1000 of testall)")
			fs.Uint64Var(&c.Seed, "seed", d.Seed, "world seed; the same seed and flags give byte-identical files")
			fs.IntVar(&c.Dim, "dim", d.Dim, "region feature dimension")
			fs.IntVar(&c.Regions, "regions", d.Regions, "region slots per image (3/4 to all of them are valid)")
			fs.Float64Var(&c.Noise, "noise", d.Noise, "standard deviation of the Gaussian feature noise")
			fs.BoolVar(&c.NoImages, "no-images", false, "do not write PNG files (features still come from rendered pixels)")
			fs.IntVar(&c.Workers, "workers", 0, "generating goroutines (0: one per CPU); never changes the output")
			fs.IntVar(&c.Dev, "dev", 0, "dev images (0: 20% of -n, at most 5000)")
			fs.IntVar(&c.Test, "test", 0, "testall images (0: 20% of -n, at most 5000); test is its first min(1000, N)")
			fs.StringVar(&synthFlags.out, "out", "", "output directory (required)")
			fs.BoolVar(&synthFlags.overwrite, "overwrite", false, "replace the world (or the dataset files of a split) already in --out, its images included")
		},
		run: runSynth,
	})
}

func runSynth(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected arguments %q", args)
	}
	if synthFlags.out == "" {
		return usageErrorf("--out is required")
	}
	// synth reads no file; the rule still refuses an --out that is a
	// device, a FIFO or a file.
	if err := checkOutputs(nil, []outpath.Output{{Flag: "--out", Path: synthFlags.out, Kind: outpath.Dir}}); err != nil {
		return err
	}
	cfg := synthFlags.cfg
	if cfg.Dim <= 0 || cfg.Regions <= 0 {
		return usageErrorf("--dim and --regions must be positive, have %d and %d", cfg.Dim, cfg.Regions)
	}
	if err := checkWorkers(cfg.Workers, true); err != nil {
		return err
	}
	cfg.Progress = true
	w, err := synth.New(cfg)
	if err != nil {
		return usageErrorf("%v", err)
	}
	if !synthFlags.overwrite {
		if err := checkSynthTarget(synthFlags.out); err != nil {
			return err
		}
	}
	for _, s := range w.Splits() {
		slog.Info("synth split", "name", s.Name, "images", s.Len, "captions", s.Len*synth.CaptionsPerImage)
	}
	defer synth.SingleThreadBLAS()() // workers run in parallel; BLAS threads would compete
	start := time.Now()
	m, err := w.Write(ctx, synthFlags.out)
	if errors.Is(err, context.Canceled) {
		return &interruptedError{err: err, msg: fmt.Sprintf("interrupted; nothing was written under a final name in %s and the temporary files are removed (generation is deterministic: run the same command again)", synthFlags.out)}
	}
	if err != nil {
		return err
	}
	el := time.Since(start)
	fmt.Fprintf(stdout, "wrote %d images (%d-d features, %d regions) to %s in %s (%.0f images/s)\n",
		m.Images, m.Dim, m.Regions, synthFlags.out, el.Round(time.Millisecond), float64(m.Images)/el.Seconds())
	return nil
}

// checkSynthTarget refuses an output directory that already holds a world
// (its world.json) or the files a world's splits are written to (a
// dataset in the precomp layout, or images/{split}): writing would replace
// them, and the models, runs and indexes made from them would no longer
// match their data.
func checkSynthTarget(dir string) error {
	if m, err := synth.LoadManifest(dir); err == nil {
		return fmt.Errorf("%s holds a synthetic world (%d images, seed %d, %d-d features): --overwrite replaces it, its images included", dir, m.Images, m.Seed, m.Dim)
	}
	var found []string
	for _, split := range []string{"train", "dev", "test", "testall"} {
		for _, name := range []string{split + "_ims.npy", split + "_caps.txt", filepath.Join("images", split)} {
			if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
				found = append(found, name)
			}
		}
	}
	if len(found) > 0 {
		return fmt.Errorf("%s holds %s, which a world would replace: --overwrite replaces them, or choose another --out", dir, strings.Join(found, ", "))
	}
	return nil
}

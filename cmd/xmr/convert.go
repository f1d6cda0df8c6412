package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/outpath"
)

var convertFlags struct {
	data   dataFlags
	splits string
	out    string
}

func init() {
	register(&command{
		name:    "convert",
		summary: "convert a dataset (bottom-up files, bottom-up TSV, precomp) to the precomp layout that train and eval read",
		usage:   "--data PATH [--format F] [--karpathy FILE] [--sizes FILE | --coco-annotations FILES] [--splits S1,S2] --out DIR",
		examples: `  # COCO, TERAN's bottom-up files; sizes from the COCO caption annotations:
  xmr convert --data /data/coco --karpathy dataset_coco.json \
      --coco-annotations captions_train2014.json,captions_val2014.json \
      --splits train,dev,test,testall --out coco_precomp
  # Flickr30k bottom-up files named by imgid, sizes from "id width height" lines:
  xmr convert --format bottomup --data /data/f30k --sizes f30k_sizes.txt --out f30k_precomp
  # the bottom-up attention extractor's TSV files (quote the pattern):
  xmr convert --data '/data/tsv/karpathy_*_resnet101_faster_rcnn_genome.tsv.*' \
      --karpathy dataset_coco.json --splits test --out coco_precomp

Splits are named as in precomp directories: train, dev, test, testall. For
bottomup and tsv data they come from the Karpathy file: dev is its "val"
split (the first 5000 for COCO), train includes COCO's restval, test is the
first 1000 COCO test images and testall all 5000. Writes, per split,
{split}_ims.npy and {split}_caps.txt, plus {split}_boxes.npy (pixels),
{split}_sizes.npy, {split}_nregions.npy and {split}_ids.txt when known;
each file is replaced atomically.`,
		setFlags: func(fs *flag.FlagSet) {
			convertFlags.data.addTo(fs)
			fs.StringVar(&convertFlags.splits, "splits", "train,dev,test", "comma-separated `SPLITS` to convert (train, dev, test, testall; restval for COCO's restval images alone)")
			fs.StringVar(&convertFlags.out, "out", "", "output `DIR` for the precomp files (created if needed; not the --data directory)")
		},
		run: runConvert,
	})
}

func runConvert(ctx context.Context, args []string) error {
	f := &convertFlags
	if len(args) > 0 {
		return usageErrorf("unexpected arguments %q (quote a --data glob pattern so that the shell leaves it alone)", args)
	}
	if f.out == "" {
		return usageErrorf("--out is required")
	}
	var splits []string
	for _, s := range strings.Split(f.splits, ",") {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(splits, s) {
			splits = append(splits, s)
		}
	}
	if len(splits) == 0 {
		return usageErrorf("--splits names no split")
	}
	if err := checkOutputs(f.data.inputs(), []outpath.Output{{Flag: "--out", Path: f.out, Kind: outpath.Dir, Writes: precompWrites}}); err != nil {
		return err
	}
	src, err := f.data.source()
	if err != nil {
		return err
	}
	if err := checkOutDir(f.out, src); err != nil {
		return err
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	slog.Info("convert", "from", src.String(), "to", f.out, "splits", strings.Join(splits, ","))
	for i, name := range splits {
		err := ctx.Err()
		if err == nil {
			err = convertSplit(ctx, src, name, f.out)
		}
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			done := "no split was converted"
			if i > 0 {
				done = fmt.Sprintf("%s converted", strings.Join(splits[:i], ", "))
			}
			return &interruptedError{err: err, msg: fmt.Sprintf("interrupted while converting %s; %s, and the files of %s in %s are as they were (run the same command again)", name, done, name, f.out)}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// precompWrites are the files that xmr convert writes into --out, one set
// per split.
var precompWrites = []string{"*_ims.npy", "*_caps.txt", "*_boxes.npy", "*_sizes.npy", "*_nregions.npy", "*_ids.txt"}

// convertSplit loads one split of src and writes it to out in the precomp
// layout, all its files or none (data.WritePrecomp); it stops once ctx is
// cancelled.
func convertSplit(ctx context.Context, src data.Source, name, out string) error {
	start := time.Now()
	s, err := src.Load(ctx, name)
	if err != nil {
		return err
	}
	defer s.Close()
	g := s.Images
	slog.Info("convert: loaded", "split", s.Name, "images", g.N, "regions", g.R, "dim", g.D,
		"captions", len(s.Captions), "boxes", g.Boxes != nil, "took", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if err := data.WritePrecomp(ctx, out, s); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d images (%dx%dx%d features), %d captions -> %s (%s)\n",
		s.Name, g.N, g.N, g.R, g.D, len(s.Captions), filepath.Join(out, s.Name+"_ims.npy"), time.Since(start).Round(time.Millisecond))
	return nil
}

// checkOutDir refuses to write into the dataset's own directory: precomp
// files would replace or join the input, and a directory holding two
// formats is no longer detected.
func checkOutDir(out string, src data.Source) error {
	dir := src.Path
	if src.Format == data.FormatTSV {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			dir = filepath.Dir(dir)
		}
	}
	a, err := os.Stat(out)
	if err != nil {
		return nil // does not exist yet, or MkdirAll reports it
	}
	if b, err := os.Stat(dir); err == nil && os.SameFile(a, b) {
		return usageErrorf("--out %s is the dataset directory; write the precomp files to a directory of their own", out)
	}
	return nil
}

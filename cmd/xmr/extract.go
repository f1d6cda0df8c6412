package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/outpath"
)

// extractorFlags are the flags that say how images become features: the
// detector's cache and the extractor's options. extract, index --images,
// search --image-file and serve share them; align shares --max-pixels.
type extractorFlags struct {
	models    string
	maps      string
	maxBoxes  int
	minScore  float64
	maxPixels int64
	// taps names a cut (detect.Cuts) whose activation the extractor
	// returns too (extract.Options.Taps); only xmr extract sets it
	// (--taps), and addTo does not declare it.
	taps string
}

// addTo declares the flags on fs.
func (f *extractorFlags) addTo(fs *flag.FlagSet) {
	fs.StringVar(&f.models, "models", "", "`DIR` caching the detector's weights (default $XMR_MODELS, else ~/.cache/xmr); fetched with npm the first time")
	fs.StringVar(&f.maps, "maps", "", "the detector's feature `MAPS` pooled into each region's vector, comma-separated (default: neck_s4,neck_s8,neck_s16,backbone_s32; classes, the 80 class scores, only when named); part of the features' identity")
	fs.IntVar(&f.maxBoxes, "max-boxes", 36, "region slots per image: detections first, then the whole image and 2x2 and 3x3 grid cells")
	fs.Float64Var(&f.minScore, "min-score", extract.DefaultMinScore, "detection score a detected box needs to become a region")
	addMaxPixels(fs, &f.maxPixels)
}

func (f *extractorFlags) check() error {
	switch {
	case f.maxBoxes <= 0 || f.maxBoxes > 1000:
		return usageErrorf("--max-boxes %d: want 1 to 1000", f.maxBoxes)
	case !(f.minScore > 0 && f.minScore <= 1):
		return usageErrorf("--min-score %v: want a score in (0, 1]", f.minScore)
	case f.maxPixels <= 0:
		return usageErrorf("--max-pixels %d: want a positive number", f.maxPixels)
	}
	if f.taps != "" {
		if _, err := detect.CutNamed(f.taps); err != nil {
			return usageErrorf("--taps %q: want one of %s (the cuts a photo model fine-tunes the detector from, docs/photos.md)", f.taps, strings.Join(cutNames(), ", "))
		}
	}
	return nil
}

// cutNames returns the names of detect.Cuts.
func cutNames() []string {
	var names []string
	for _, c := range detect.Cuts {
		names = append(names, c.Name)
	}
	return names
}

func (f *extractorFlags) limits() extract.Limits {
	return extract.Limits{MaxPixels: f.maxPixels}
}

// extractor fetches (the first time) and loads the detector and returns
// the extractor the flags describe.
func (f *extractorFlags) extractor(ctx context.Context) (*extract.Extractor, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	det, err := loadDetector(ctx, f.models)
	if err != nil {
		return nil, err
	}
	if f.taps != "" {
		cut, err := detect.CutNamed(f.taps)
		if err != nil {
			return nil, usageErrorf("--taps: %v", err)
		}
		if det, err = withTaps(det, cut); err != nil {
			return nil, err
		}
	}
	opt := extract.Options{MaxBoxes: f.maxBoxes, MinScore: float32(f.minScore), Taps: f.taps}
	if f.maps != "" {
		for _, m := range strings.Split(f.maps, ",") {
			if m = strings.TrimSpace(m); m != "" {
				opt.Maps = append(opt.Maps, m)
			}
		}
	}
	e, err := extract.New(det, opt)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// withTaps returns det made to return its activation at cut's node too
// (detect.Detector.WithTaps), for extract.Options.Taps. A detector of the
// tests does it with a WithTaps method of its own.
func withTaps(det extract.Detector, cut detect.Cut) (extract.Detector, error) {
	var tapped extract.Detector
	var err error
	switch d := det.(type) {
	case *detect.Detector:
		var t *detect.Detector
		if t, err = d.WithTaps(cut.Node); err == nil {
			tapped = t
		}
	case interface {
		WithTaps(nodes ...string) (extract.Detector, error)
	}:
		tapped, err = d.WithTaps(cut.Node)
	default:
		err = fmt.Errorf("this detector (%T) returns no activations", det)
	}
	if err != nil {
		return nil, fmt.Errorf("--taps %s: the detector's activation at %s: %w", cut.Name, cut.Node, err)
	}
	return tapped, nil
}

// loadDetector fetches the detector's weights into cache (default
// detect.DefaultCacheDir()) the first time and loads the network; tests
// replace it with a fake.
var loadDetector = func(ctx context.Context, cache string) (extract.Detector, error) {
	if cache == "" {
		cache = detect.DefaultCacheDir()
	}
	dir, err := detect.Fetch(ctx, cache)
	if err != nil {
		return nil, fmt.Errorf("the detector's weights: %w", err)
	}
	return detect.Load(dir)
}

var extractFlags struct {
	images    string
	captions  string
	imageRoot string
	out       string
	split     string
	splits    string
	ids       string
	shard     string
	join      bool
	workers   int
	chunk     int
	flip      bool
	augment   int
	ext       extractorFlags
}

func init() {
	register(&command{
		name:    "extract",
		summary: "make region features of JPEG and PNG images with a pretrained detector, as a data set that train, eval and index read",
		usage:   "--images DIR|KARPATHY.json --out DATA [--captions FILE] [--split S] [--taps CUT] [--shard I/N | --join] [flags]",
		examples: `  # A synthetic world's PNGs (every split, with its captions):
  xmr synth --out world --n 2000
  xmr extract --images world --out world-feats
  xmr train --config configs/teran-small.yaml --data world-feats --out runs/teran-px
  # A folder of photos to index and search (no captions):
  xmr extract --images ~/photos --out photo-feats
  xmr index --checkpoint runs/teran-px --data photo-feats --split test --out photos.idx
  # A folder of photos with captions (lines "NAME<TAB>CAPTION", 5 per image):
  xmr extract --images flickr30k-images --captions results_20130124.token --split test --out f30k-feats
  # COCO from Karpathy's split file and the images (val2014/, train2014/ under --image-root):
  xmr extract --images dataset_coco.json --image-root /data/coco --splits test,dev --out coco-feats
  # The same on three machines, then joined:
  xmr extract --images dataset_coco.json --image-root /data/coco --out coco-feats --shard 1/3   # on machine 1, 2/3 on 2, ...
  rsync -a machine2:coco-feats/parts/ machine3:coco-feats/parts/ coco-feats/parts/
  xmr extract --images dataset_coco.json --image-root /data/coco --out coco-feats --join
  # Photos to train a model that fine-tunes the detector, its activations cached too:
  xmr extract --images dataset_flickr8k.json --image-root photos --flip --taps s32 --out f8k-feats

The detector is CenterNet (MobileNetV3, COCO), fetched with npm into --models
the first time (docs/extract.md). Each image is stretched to 512x512; up to
--max-boxes regions are its detections scoring --min-score or more, then the
whole image and the cells of a 2x2 and a 3x3 grid; each region's vector is
ROI-Align over the detector's feature maps, and DATA/global holds one vector
per image for SEAM and VSE++. DATA/features.json records the extractor:
models trained on these features refuse any other's, and the other way round.

--taps CUT (s16 or s32) also caches the detector's activation at that cut for
every image, in DATA/taps-CUT/SPLIT.npy (float16, (N, H, W, C) in the order
of SPLIT_ids.txt: 16x16x120, 61 KB an image, at s32; 32x32x88, 180 KB, at
s16), which a model that fine-tunes the detector's upper part trains from
(docs/photos.md). The features are the same with it or without.

A stopped run (Ctrl-C, kill -9) keeps every finished chunk of --chunk images
in DATA/parts: run the same command again to go on. An unreadable image
(truncated, not a JPEG or PNG, over --max-pixels) is reported and left out
with its captions; the command then exits with status 1 after writing the
rest.`,
		setFlags: func(fs *flag.FlagSet) {
			f := &extractFlags
			fs.StringVar(&f.images, "images", "", "the images: a `DIR` of JPEG and PNG files (subfolders included), a synthetic world's directory, or a Karpathy split JSON file")
			fs.StringVar(&f.captions, "captions", "", "captions `FILE` for a folder of images: lines NAME<TAB>CAPTION, at least 5 per image (without it the collection is index-only)")
			fs.StringVar(&f.imageRoot, "image-root", "", "with a Karpathy JSON: the `DIR` its filepath/filename entries are under (default: the JSON's directory)")
			fs.StringVar(&f.out, "out", "", "the data set `DIR` to write")
			fs.StringVar(&f.split, "split", "test", "with a folder of images: the name of the split to write")
			fs.StringVar(&f.splits, "splits", "", "with a world or a Karpathy JSON: the splits to extract, comma-separated (default: all of a world's; train,dev,test of a Karpathy file)")
			fs.StringVar(&f.ids, "ids", "filename", "with a Karpathy JSON: the field that names the images: filename (the file name without its extension: xmr index and serve then find the photos by it), cocoid, imgid or auto (the convention of bottom-up features: cocoid for COCO, else imgid)")
			fs.StringVar(&f.shard, "shard", "", "extract only part `I/N` of the collection (1 <= I <= N), for N machines; the parts join")
			fs.BoolVar(&f.join, "join", false, "extract nothing: join the parts in DATA/parts (every shard's) into the data set")
			fs.IntVar(&f.workers, "workers", runtime.NumCPU(), "images extracted at once (1 to 4 per CPU)")
			fs.IntVar(&f.chunk, "chunk", 64, "images per part file (the work a stopped run can lose)")
			fs.StringVar(&f.ext.taps, "taps", "", "also cache the detector's activation at `CUT` ("+strings.Join(cutNames(), " or ")+") for every image, in DATA/taps-CUT/SPLIT.npy (float16; 61 KB an image at s32), for fine-tuning the detector (docs/photos.md)")
			fs.IntVar(&f.augment, "augment", 0, "also extract `N` random views of every train image (a crop of 60-100% of it, its colours jittered; ids end in "+extract.AugmentSuffix+"1 ...), as more training data")
			fs.BoolVar(&f.flip, "flip", false, "also extract every train image mirrored left to right, as more training data (its captions' left and right swapped; ids end in "+extract.MirrorSuffix+")")
			f.ext.addTo(fs)
		},
		run: runExtract,
	})
}

// parseShard reads "I/N" (1-based) into a 0-based shard and a count.
func parseShard(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return 0, 0, fmt.Errorf("--shard %q: want I/N with 1 <= I <= N, e.g. 2/4", s)
	}
	return i - 1, n, nil
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// extractSplits reads the collection that --images names.
func extractSplits() ([]extract.SplitSpec, string, error) {
	f := &extractFlags
	st, err := os.Stat(f.images)
	if err != nil {
		return nil, "", fmt.Errorf("--images: %w", err)
	}
	if !st.IsDir() {
		if !strings.EqualFold(filepath.Ext(f.images), ".json") {
			return nil, "", usageErrorf("--images %s: want a folder of images, a synthetic world or a Karpathy split .json file", f.images)
		}
		if f.captions != "" {
			return nil, "", usageErrorf("--captions is for a folder of images; a Karpathy JSON holds its captions")
		}
		ids, err := data.ParseIDScheme(f.ids)
		if err != nil {
			return nil, "", usageErrorf("--ids: %v", err)
		}
		root := f.imageRoot
		if root == "" {
			root = filepath.Dir(f.images)
		}
		s, err := extract.KarpathySplits(f.images, root, splitList(f.splits), ids)
		return s, "Karpathy split file " + f.images, err
	}
	if f.imageRoot != "" {
		return nil, "", usageErrorf("--image-root is for a Karpathy JSON given as --images")
	}
	if _, err := os.Stat(filepath.Join(f.images, "world.json")); err == nil {
		if f.captions != "" {
			return nil, "", usageErrorf("--captions is for a folder of images; a synthetic world holds its captions")
		}
		s, err := extract.WorldSplits(f.images, splitList(f.splits))
		return s, "synthetic world " + f.images, err
	}
	if f.splits != "" {
		return nil, "", usageErrorf("--splits is for a world or a Karpathy JSON; name a folder's split with --split")
	}
	if err := extract.CheckSplitName(f.split); err != nil {
		return nil, "", usageErrorf("--split %q %v: want a name such as test", f.split, err)
	}
	items, err := extract.FolderItems(f.images)
	if err != nil {
		return nil, "", err
	}
	spec := extract.SplitSpec{Name: f.split, Items: items}
	what := "folder " + f.images + " (index-only)"
	if f.captions != "" {
		if spec.Captions, err = extract.ReadCaptionFile(f.captions, f.images, items); err != nil {
			return nil, "", err
		}
		what = "folder " + f.images + " with " + f.captions
	}
	return []extract.SplitSpec{spec}, what, nil
}

func runExtract(ctx context.Context, args []string) error {
	f := &extractFlags
	if err := checkWorkers(f.workers, false); err != nil {
		return err
	}
	switch {
	case len(args) > 0:
		return usageErrorf("unexpected arguments %q", args)
	case f.images == "":
		return usageErrorf("--images is required")
	case f.out == "":
		return usageErrorf("--out is required")
	case f.chunk <= 0:
		return usageErrorf("--chunk %d: want at least 1", f.chunk)
	case f.join && f.shard != "":
		return usageErrorf("give --shard or --join, not both")
	}
	opt := extract.BuildOptions{ChunkSize: f.chunk, Workers: f.workers, Limits: f.ext.limits(), JoinOnly: f.join, Progress: true}
	if f.shard != "" {
		var err error
		if opt.Shard, opt.Shards, err = parseShard(f.shard); err != nil {
			return usageErrorf("%v", err)
		}
	}
	if err := f.ext.check(); err != nil {
		return err
	}
	if !f.join {
		var err error
		if opt.Workers, err = fitExtractWorkers(f.workers, runtime.NumCPU(), f.ext.maxPixels); err != nil {
			return err
		}
	}
	if err := checkOutputs([]outpath.Input{{Flag: "--images", Path: f.images}, {Flag: "--captions", Path: f.captions}, {Flag: "--image-root", Path: f.imageRoot}},
		[]outpath.Output{{Flag: "--out", Path: f.out, Kind: outpath.Dir}}); err != nil {
		return err
	}
	splits, what, err := extractSplits()
	if err != nil {
		return err
	}
	if f.flip {
		flipped := false
		for i, s := range splits {
			if s.Name == data.SplitTrain && s.Captions != nil {
				splits[i], flipped = extract.MirrorSplit(s), true
			}
		}
		if !flipped {
			return usageErrorf("--flip mirrors the images of a train split with captions; this collection has none")
		}
	}
	if f.augment < 0 {
		return usageErrorf("--augment must be 0 or more, is %d", f.augment)
	}
	if f.augment > 0 {
		augmented := false
		for i, s := range splits {
			if s.Name == data.SplitTrain && s.Captions != nil {
				splits[i], augmented = extract.AugmentSplit(s, f.augment, 1), true
			}
		}
		if !augmented {
			return usageErrorf("--augment adds views of the images of a train split with captions; this collection has none")
		}
	}
	// Captions, ids, file names and split names are checked before the
	// detector is loaded and a photo decoded: what a later step (train,
	// index, the API) would refuse is refused now, naming the image.
	if err := extract.CheckSplits(splits); err != nil {
		return err
	}
	e, err := f.ext.extractor(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, s := range splits {
		n += len(s.Items)
	}
	fmt.Fprintf(stdout, "extracting %d images of the %s with %s\n", n, what, e.Identity())
	if e.Taps() != "" {
		fmt.Fprintf(stdout, "caching the detector's activations at cut %s in %s\n", e.Taps(), filepath.Dir(extract.TapsPath(f.out, e.Taps(), "SPLIT")))
	}
	start := time.Now()
	rep, err := extract.Build(ctx, e, f.out, splits, opt)
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return &interruptedError{err: err, msg: fmt.Sprintf("interrupted; the finished chunks are kept in %s: run the same command again to go on",
				filepath.Join(f.out, extract.PartsDir))}
		}
		return err
	}
	el := time.Since(start)
	rate := ""
	if rep.Extracted > 0 {
		rate = fmt.Sprintf(" (%.1f images/s)", float64(rep.Extracted)/el.Seconds())
	}
	fmt.Fprintf(stdout, "extracted %d images in %s%s; %d were done before\n", rep.Extracted, el.Round(time.Millisecond), rate, rep.Reused)
	for _, sk := range rep.Skipped {
		fmt.Fprintf(stdout, "skipped %s: %s\n", sk.Path, sk.Err)
	}
	if !rep.Joined {
		fmt.Fprintf(stdout, "shard %s done: its parts are in %s; %d chunks are other shards'. Gather every shard's parts there and run:\n  %s\n",
			f.shard, filepath.Join(f.out, extract.PartsDir), rep.Missing, commandLine(extractJoinArgs()))
	} else {
		for _, s := range splits {
			fmt.Fprintf(stdout, "wrote %s: %d images", filepath.Join(f.out, s.Name+"_ims.npy"), rep.Images[s.Name])
			if s.Captions == nil {
				fmt.Fprintf(stdout, " (index-only)")
			}
			fmt.Fprintln(stdout)
			if e.Taps() != "" && rep.Images[s.Name] > 0 {
				fmt.Fprintf(stdout, "wrote %s: the detector's activations at cut %s\n", extract.TapsPath(f.out, e.Taps(), s.Name), e.Taps())
			}
		}
		fmt.Fprintf(stdout, "global features for SEAM and VSE++: %s\n", filepath.Join(f.out, "global"))
	}
	if len(rep.Skipped) > 0 {
		return fmt.Errorf("%d images could not be read and were left out (listed above)", len(rep.Skipped))
	}
	return nil
}

// extractJoinArgs returns the command line that joins the shards' parts.
func extractJoinArgs() []string {
	f := &extractFlags
	args := []string{"xmr", "extract", "--images", f.images}
	if f.captions != "" {
		args = append(args, "--captions", f.captions)
	}
	if f.imageRoot != "" {
		args = append(args, "--image-root", f.imageRoot)
	}
	if f.splits != "" {
		args = append(args, "--splits", f.splits)
	}
	if f.split != "test" {
		args = append(args, "--split", f.split)
	}
	if f.chunk != 64 {
		args = append(args, "--chunk", strconv.Itoa(f.chunk))
	}
	if f.augment > 0 {
		args = append(args, "--augment", strconv.Itoa(f.augment))
	}
	if f.flip {
		args = append(args, "--flip")
	}
	if f.ext.maps != "" {
		args = append(args, "--maps", f.ext.maps)
	}
	if f.ext.maxBoxes != 36 {
		args = append(args, "--max-boxes", strconv.Itoa(f.ext.maxBoxes))
	}
	if f.ext.taps != "" {
		args = append(args, "--taps", f.ext.taps)
	}
	return append(args, "--out", f.out, "--join")
}

package main

import (
	"context"
	"errors"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/train"
)

// The photo demo (xmr demo --photos DIR): the whole job on real photos
// with their captions, as people have them in Karpathy's layout
// (Flickr8k, Flickr30k, COCO): extract their regions with the detector
// (and its activations at the cut the recipe fine-tunes it from), train
// the photo recipe (configs/teran-photos-tuned.yaml: TERAN with the
// detector's last block trained too) for a number of iterations,
// evaluate it on the held-out split, draw what it aligns on the photos,
// index the held-out photos and serve the page on them.
const (
	// photoConfig is the photo demo's default config.
	photoConfig = "teran-photos-tuned"
	// photoIters is its default number of training iterations: two
	// epochs of Flickr8k's mirrored train photos, about 30 minutes on 2
	// cores of an AMD EPYC Zen 5 (docs/photos.md).
	photoIters = 936
	// photoValImages is the dev images each validation scores.
	photoValImages = 1000
	// photoIterSeconds is the seconds an iteration of photoConfig took on
	// Flickr8k, validations included, on 2 cores of an AMD EPYC Zen 5
	// (docs/photos.md), for the time the demo announces.
	photoIterSeconds = 1.7
)

// photoSet finds the Karpathy split file and the photos' root in dir: the
// one dataset_*.json file there (or dir itself when it is such a file),
// the photos under dir/images when its first photo is there, else dir.
func photoSet(dir string) (karpathy, root string, err error) {
	if st, err := os.Stat(dir); err != nil {
		return "", "", fmt.Errorf("--photos: %w", err)
	} else if !st.IsDir() {
		if !strings.EqualFold(filepath.Ext(dir), ".json") {
			return "", "", usageErrorf("--photos %s: want a folder holding a Karpathy split file (dataset_flickr8k.json, ...) and its photos, or the split file itself", dir)
		}
		karpathy, dir = dir, filepath.Dir(dir)
	} else {
		files, _ := filepath.Glob(filepath.Join(dir, "dataset_*.json"))
		switch len(files) {
		case 0:
			return "", "", usageErrorf("--photos %s: no Karpathy split file (dataset_*.json) in it; get the one of your data set (Flickr8k, Flickr30k or COCO) from Karpathy's caption_datasets.zip", dir)
		case 1:
			karpathy = files[0]
		default:
			return "", "", usageErrorf("--photos %s: several split files (%s): give the one to use as --photos FILE", dir, strings.Join(files, ", "))
		}
	}
	k, err := data.LoadKarpathy(karpathy)
	if err != nil {
		return "", "", err
	}
	if len(k.Images) == 0 {
		return "", "", fmt.Errorf("%s: no images", karpathy)
	}
	first := k.Images[0]
	for _, r := range []string{filepath.Join(dir, "images"), dir} {
		for _, p := range []string{filepath.Join(r, first.Filepath, first.Filename), filepath.Join(r, first.Filename)} {
			if fileExists(p) {
				return karpathy, r, nil
			}
		}
	}
	return "", "", fmt.Errorf("--photos %s: the photos of %s are not there: %s is neither under %s nor under %s",
		dir, filepath.Base(karpathy), first.Filename, filepath.Join(dir, "images"), dir)
}

// heldOut is the split the photo demo evaluates and indexes: test when the
// split file has one, else dev (which then also picked the checkpoint).
func heldOut(splits []extract.SplitSpec) string {
	for _, s := range splits {
		if s.Name == data.SplitTest {
			return data.SplitTest
		}
	}
	return data.SplitDev
}

func runPhotoDemo(ctx context.Context) error {
	f := demoFlags
	start := time.Now()
	karpathy, root, err := photoSet(f.photos)
	if err != nil {
		return err
	}
	splits, err := extract.KarpathySplits(karpathy, root, nil, data.IDFilename)
	if err != nil {
		return err
	}
	names := make([]string, len(splits))
	for i, s := range splits {
		names[i] = s.Name
		if s.Name == data.SplitTrain {
			// Mirrored copies of the training photos: the recipe's
			// augmentation (docs/photos.md, "The features").
			splits[i] = extract.MirrorSplit(s)
		}
	}
	if !slices.Contains(names, data.SplitTrain) || !slices.Contains(names, data.SplitDev) {
		return fmt.Errorf("%s has splits %s: the photo demo trains on train and validates on val", karpathy, strings.Join(names, ", "))
	}
	feats := filepath.Join(f.dir, "features")
	run := filepath.Join(f.dir, "run")
	indexDir := filepath.Join(f.dir, "index")
	held := heldOut(splits)

	cfg, err := train.LoadConfig(f.config)
	if err != nil {
		return err
	}

	// 1. The photos' regions, extracted once (resumable), with the
	// detector's activations at the cut the recipe fine-tunes it from.
	ext := extractorFlags{maxBoxes: 36, minScore: extract.DefaultMinScore, maxPixels: extract.DefaultMaxPixels, taps: cfg.Training.VisionCut}
	e, err := ext.extractor(ctx)
	if err != nil {
		return err
	}
	if photoFeaturesDone(feats, e.Identity(), ext.taps, splits) && !f.fresh {
		step(1, "using the features in %s (--fresh to extract again)", feats)
	} else {
		n := 0
		for _, s := range splits {
			n += len(s.Items)
		}
		if f.fresh {
			if err := os.RemoveAll(feats); err != nil {
				return err
			}
		}
		step(1, "extracting the regions of %d photos (%s; the train photos mirrored too) with %s into %s; Ctrl-C keeps the finished chunks, the same command goes on",
			n, strings.Join(names, ", "), e.Identity().Name, feats)
		began := time.Now()
		// One worker per CPU, or fewer where memory holds fewer (a
		// default is lowered, never refused).
		workers, _ := fitExtractWorkers(runtime.NumCPU(), runtime.NumCPU(), extract.DefaultMaxPixels)
		rep, err := extract.Build(ctx, e, feats, splits, extract.BuildOptions{Workers: workers, Progress: true})
		if err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return &interruptedError{err: err, msg: "interrupted; the finished chunks are kept: run the same command again to go on"}
			}
			return err
		}
		fmt.Fprintf(stdout, "    %d photos in %s", rep.Extracted, time.Since(began).Round(time.Second))
		if rep.Reused > 0 {
			fmt.Fprintf(stdout, " (%d done before)", rep.Reused)
		}
		fmt.Fprintln(stdout)
		for _, sk := range rep.Skipped {
			fmt.Fprintf(stdout, "    left out %s: %s\n", sk.Path, sk.Err)
		}
	}

	// 2. The photo recipe.
	best := filepath.Join(run, "best-rsum.safetensors")
	marker := filepath.Join(f.dir, demoConfigFile)
	trained := demoMarker(cfg, f.maxIters, f.timeBudget)
	reuse, why := demoReuse(best, marker, cfg, trained)
	if !reuse || f.retrain || f.fresh {
		if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		step(2, "training %s (%s) %s in %s", f.config, cfg.Model.Name, demoSchedule(f.maxIters, f.timeBudget, f.config), run)
		if why != "" && !f.retrain && !f.fresh {
			fmt.Fprintf(stdout, "    %s\n", why)
		}
		opts := train.Options{Config: cfg, Data: data.Source{Path: feats}, Out: run, TimeBudget: f.timeBudget,
			MaxIters: f.maxIters, ValImages: photoValImages, Overwrite: true, Meta: featureMeta(feats, cfg.Training.VisionCut),
			Detector: func(ctx context.Context) (*detect.Detector, error) { return network(ctx, "") }}
		if err := demoTrain(ctx, opts, marker, trained); err != nil {
			return err
		}
	} else {
		step(2, "using the model in %s (--retrain to train again)", run)
	}

	// 3. The held-out photos.
	what := "the test split"
	if held == data.SplitDev {
		what = "the val split (the split file has no test split; val also picked the checkpoint)"
	}
	step(3, "evaluating on %s", what)
	m, cf, err := model.Load(best)
	if err != nil {
		return err
	}
	defer cf.Close()
	split, err := data.LoadPrecomp(ctx, feats, held, nil)
	if err != nil {
		return err
	}
	defer split.Close()
	// A recipe that fine-tuned the detector reads features of its own.
	if split, err = tunedSplit(ctx, cf, "", feats, split); err != nil {
		return err
	}
	att, err := attachment(cf)
	if err != nil {
		return err
	}
	mid, err := checkpointIdentity(cf)
	if err != nil {
		return err
	}
	rel, err := eval.RelevanceMatrices(ctx, split.Captions, split.CapsPerImage)
	if err != nil {
		return err
	}
	res, err := eval.EvaluateModels(ctx, []model.Model{m}, split, eval.ModelOptions{Options: eval.Options{Relevances: rel}})
	if err != nil {
		return err
	}
	if err := res.Report.WriteTable(stdout); err != nil {
		return err
	}
	fmt.Fprintln(stdout, photoChance(split.NumImages()))

	paths := photoPaths(splits, held)
	step(4, "drawing alignments and retrieval results on the photos in %s", f.dir)
	if err := photoDraw(f.dir, split, res, paths); err != nil {
		return err
	}
	if err := photoIndex(ctx, indexDir, feats, m, att, mid, split, paths, res, f.fresh || f.retrain); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "    ready in %s\n", time.Since(start).Round(time.Second))

	fmt.Fprintf(stdout, "\nNext, on these photos:\n")
	fmt.Fprintf(stdout, "  %s\n", commandLine([]string{"xmr", "eval", "--checkpoint", best, "--data", feats, "--split", held}))
	fmt.Fprintf(stdout, "  %s\n", commandLine([]string{"xmr", "search", "--index", indexDir, "--text", firstCaption(split), "--explain"}))
	fmt.Fprintf(stdout, "  %s\n", commandLine([]string{"xmr", "index", "--checkpoint", best, "--images", "YOUR-PHOTOS", "--out", "my-photos.idx"}))
	fmt.Fprintf(stdout, "  %s\n", commandLine([]string{"xmr", "serve", "--index", indexDir, "--images", root}))
	if f.noServe {
		return nil
	}
	fmt.Fprintln(stdout)
	step(6, "serving the index")
	return serveIndex(ctx, indexDir, root, f.addr, firstCaption(split), nil, "")
}

// photoFeaturesDone reports whether feats holds every split of splits,
// extracted by id, with as many images as the split file lists (less
// those left out as unreadable), and the activations at cut taps (none
// wanted: "").
func photoFeaturesDone(feats string, id extract.Identity, taps string, splits []extract.SplitSpec) bool {
	rec, err := extract.ReadRecord(feats)
	if err != nil || rec == nil || !rec.Extractor.Equal(id) || taps != "" && rec.Taps != taps {
		return false
	}
	for _, s := range splits {
		sr, ok := rec.Splits[s.Name]
		if !ok || sr.Images+sr.Skipped != len(s.Items) {
			return false
		}
		if taps != "" && !fileExists(extract.TapsPath(feats, taps, s.Name)) {
			return false
		}
	}
	return true
}

// featureMeta is the checkpoint metadata that records the extractor of the
// features in dir (as xmr train records it), for a run that fine-tunes
// the detector from cut visionCut ("": none).
func featureMeta(dir, visionCut string) map[string]string {
	rec, err := extract.ReadRecord(dir)
	if err != nil || rec == nil {
		return nil
	}
	id := rec.Extractor
	id.Tuned = visionCut
	md := map[string]string{extract.MetaKey: id.Marshal()}
	if rec.Kind != "" {
		md[extract.KindMetaKey] = rec.Kind
	}
	return md
}

// photoPaths maps the ids of split name to their photo files.
func photoPaths(splits []extract.SplitSpec, name string) map[string]string {
	out := map[string]string{}
	for _, s := range splits {
		if s.Name != name {
			continue
		}
		for _, it := range s.Items {
			p := it.Path
			if abs, err := filepath.Abs(p); err == nil {
				p = abs
			}
			out[it.ID] = p
		}
	}
	return out
}

// loadPhoto reads a photo upright, as the detector saw it.
func loadPhoto(path string) (image.Image, error) {
	b, err := extract.ReadFile(path, extract.Limits{})
	if err != nil {
		return nil, err
	}
	_, img, err := extract.DecodeUpright(b, path, extract.Limits{})
	return img, err
}

// photoDraw draws the alignment of a few held-out captions on their photos
// and each one's best photos.
func photoDraw(dir string, split *data.Split, res *eval.ModelResult, paths map[string]string) error {
	load := func(i int) (image.Image, error) { return loadPhoto(paths[split.ID(i)]) }
	return drawExamples(dir, split, res, nil, load, 2, 1, "cannot draw on the photos")
}

// photoIndex indexes the held-out photos (their files from paths) in dir
// from the evaluation's embeddings, unless the index there was built by m
// already; att goes with the index's copy of m, and id is the extractor
// of m's features (its checkpoint's record).
func photoIndex(ctx context.Context, dir, feats string, m model.Model, att *index.Attachment, id *extract.Identity, split *data.Split, paths map[string]string, res *eval.ModelResult, rebuild bool) error {
	c := collection(split, "")
	for i := range c.ImageRows {
		c.ImageRows[i].Path = paths[c.ImageRows[i].ID]
	}
	if err := writeDemoIndex(ctx, dir, m, att, split, c, res, rebuild); err != nil {
		return err
	}
	// The extractor of the features, as xmr index records it: search
	// --image-file and the page's uploads extract a new photo the same way.
	rec, err := extract.ReadRecord(feats)
	if err != nil || rec == nil || id == nil {
		return fmt.Errorf("the features in %s, or the model, record no extractor: %v", feats, err)
	}
	return indexFeaturesAfter(dir, id, rec)
}

// photoChance is the chance line under the photo demo's table: the recall
// of a random ranking of n photos by text, R@k = min(k, n)/n (R@10 of 3
// photos is 100%, not 333.3%).
func photoChance(n int) string {
	if n <= 0 {
		return "(chance: no photos)"
	}
	at := func(k int) float64 { return 100 * float64(min(k, n)) / float64(n) }
	return fmt.Sprintf("(chance: R@1 %.2f%%, R@10 %.1f%% of %d photos)", at(1), at(10), n)
}

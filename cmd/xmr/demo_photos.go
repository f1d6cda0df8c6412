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

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/extract"
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
	// photoTotalTime is the photo demo's default --total-time: the hour
	// it is meant to take, less a little, so that a CPU too slow for all
	// of photoIters in it trains fewer (docs/photos.md).
	photoTotalTime = 57 * time.Minute
)

// demoReserve is the time --total-time keeps for what follows the
// training: its last validation, the evaluation (the fusion's too), the
// drawings and the indexes (about a minute on the slowest machine of
// docs/photos.md); demoMinTraining the least a main model trains however
// late its training starts.
const (
	demoReserve     = 2 * time.Minute
	demoMinTraining = 5 * time.Minute
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

// photoDemo is the demo's source of real photos (xmr demo --photos): a
// Karpathy split file and its photos in photos, their regions extracted
// into feats, the test split (else val) held out, the photos drawn on and
// shown.
type photoDemo struct {
	photos, dir, feats string
	fresh              bool
	// Found by prepare: the split file, the photos' root, the splits
	// (train mirrored too) and the one held out.
	karpathy, root string
	splits         []extract.SplitSpec
	held           string
	loaded         *data.Split // the held-out split as heldOut loaded it
}

func (p *photoDemo) prepare(ctx context.Context, cfg train.Config) (bool, error) {
	karpathy, root, err := photoSet(p.photos)
	if err != nil {
		return false, err
	}
	splits, err := extract.KarpathySplits(karpathy, root, nil, data.IDFilename)
	if err != nil {
		return false, err
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
		return false, fmt.Errorf("%s has splits %s: the photo demo trains on train and validates on val", karpathy, strings.Join(names, ", "))
	}
	p.karpathy, p.root, p.splits, p.held = karpathy, root, splits, heldOut(splits)

	// The photos' regions, extracted once (resumable), with the
	// detector's activations at the cut the recipe fine-tunes it from.
	ext := extractorFlags{maxBoxes: 36, minScore: extract.DefaultMinScore, maxPixels: extract.DefaultMaxPixels, taps: cfg.Training.VisionCut}
	e, err := ext.extractor(ctx)
	if err != nil {
		return false, err
	}
	if photoFeaturesDone(p.feats, e.Identity(), ext.taps, splits) && !p.fresh {
		step(1, "using the features in %s (--fresh to extract again)", p.feats)
		return false, nil
	}
	n := 0
	for _, s := range splits {
		n += len(s.Items)
	}
	if p.fresh {
		if err := os.RemoveAll(p.feats); err != nil {
			return false, err
		}
	}
	step(1, "extracting the regions of %d photos (%s; the train photos mirrored too) with %s into %s; Ctrl-C keeps the finished chunks, the same command goes on",
		n, strings.Join(names, ", "), e.Identity().Name, p.feats)
	began := time.Now()
	// One worker per CPU, or fewer where memory holds fewer (a default is
	// lowered, never refused).
	workers, _ := fitExtractWorkers(runtime.NumCPU(), runtime.NumCPU(), extract.DefaultMaxPixels)
	rep, err := extract.Build(ctx, e, p.feats, splits, extract.BuildOptions{Workers: workers, Progress: true})
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return false, &interruptedError{err: err, msg: "interrupted; the finished chunks are kept: run the same command again to go on"}
		}
		return false, err
	}
	fmt.Fprintf(stdout, "    %d photos in %s", rep.Extracted, time.Since(began).Round(time.Second))
	if rep.Reused > 0 {
		fmt.Fprintf(stdout, " (%d done before)", rep.Reused)
	}
	fmt.Fprintln(stdout)
	for _, sk := range rep.Skipped {
		fmt.Fprintf(stdout, "    left out %s: %s\n", sk.Path, sk.Err)
	}
	// A model trained on the features before is not trained again (the
	// extraction of the same photos gives the same features).
	return false, nil
}

// trainOptions trains on the features, the detector given to the
// recipe, which fine-tunes its upper part.
func (p *photoDemo) trainOptions() train.Options {
	return train.Options{Data: data.Source{Path: p.feats}, ValImages: photoValImages,
		Detector: func(ctx context.Context) (*detect.Detector, error) { return network(ctx, "") }}
}

func (p *photoDemo) evaluated() string {
	if p.held == data.SplitDev {
		return "the val split (the split file has no test split; val also picked the checkpoint)"
	}
	return "the test split"
}

func (p *photoDemo) heldOut(ctx context.Context, cf *checkpoint.File) (*data.Split, eval.ModelOptions, error) {
	var err error
	if p.loaded, err = data.LoadPrecomp(ctx, p.feats, p.held, nil); err != nil {
		return nil, eval.ModelOptions{}, err
	}
	// A recipe that fine-tuned the detector reads features of its own (a
	// copy of the split; the features loaded stay open until release).
	tuned, err := tunedSplit(ctx, cf, "", p.feats, p.loaded)
	return tuned, eval.ModelOptions{}, err
}

func (p *photoDemo) release() error { return p.loaded.Close() }

func (p *photoDemo) chance(split *data.Split, _ *eval.ModelResult) string {
	return photoChance(split.NumImages())
}

// draw draws the alignment of a few held-out captions on their photos
// and each one's best photos.
func (p *photoDemo) draw(dir string, split *data.Split, res *eval.ModelResult) error {
	step(4, "drawing alignments and retrieval results on the photos in %s", dir)
	paths := photoPaths(p.splits, p.held)
	load := func(i int) (image.Image, error) { return extract.LoadUpright(paths[split.ID(i)], extract.Limits{}) }
	return drawExamples(dir, split, res, nil, load, 2, 1, "cannot draw on the photos")
}

// index indexes the held-out photos from the evaluation's embeddings,
// with the part of the detector the model fine-tuned (in the index's copy
// of the model) and the record of its features' extractor (in the
// manifest): search --image-file and the page's uploads extract a new
// photo the same way.
func (p *photoDemo) index(ctx context.Context, dir string, m model.Model, cf *checkpoint.File, split *data.Split, res *eval.ModelResult, rebuild bool) error {
	att, err := attachment(cf)
	if err != nil {
		return err
	}
	mid, err := checkpointIdentity(cf)
	if err != nil {
		return err
	}
	rec, err := extract.ReadRecord(p.feats)
	if err != nil || rec == nil || mid == nil {
		return fmt.Errorf("the features in %s, or the model, record no extractor: %v", p.feats, err)
	}
	features, err := indexFeatures(mid, rec)
	if err != nil {
		return err
	}
	paths := photoPaths(p.splits, p.held)
	c := collection(split, "")
	for i := range c.ImageRows {
		c.ImageRows[i].Path = paths[c.ImageRows[i].ID]
	}
	return writeDemoIndex(ctx, dir, m, split, c, res, rebuild, att, features)
}

// partner is SEAM-E on the photos' global vectors (the features'
// global/ copy), which the demo fuses with the region model.
func (p *photoDemo) partner() *demoPartner {
	g := filepath.Join(p.feats, "global")
	return &demoPartner{data: g, held: func(ctx context.Context) (*data.Split, error) {
		return data.LoadPrecomp(ctx, g, p.held, nil)
	}, bank: func(ctx context.Context) ([]string, error) {
		train, err := data.LoadPrecomp(ctx, g, data.SplitTrain, nil)
		if err != nil {
			return nil, err
		}
		defer train.Close()
		return bankCaptions(train, demoBank), nil
	}}
}

// fusedEval is the command that evaluates the region model best fused
// with the partners.
func (p *photoDemo) fusedEval(best string) []string {
	args := []string{"xmr", "eval", "--checkpoint", best}
	for k := range partnerSeeds {
		args = append(args, "--checkpoint", filepath.Join(p.dir, partnerPath(partnerRun, k)))
	}
	return append(args, "--weights", partnerWeights(), "--data", p.feats, "--split", p.held)
}

func (p *photoDemo) next(best, indexDir string, split *data.Split) ([][]string, string) {
	fmt.Fprintf(stdout, "\nNext, on these photos:\n")
	return [][]string{
		{"xmr", "eval", "--checkpoint", best, "--data", p.feats, "--split", p.held},
		p.fusedEval(best),
		{"xmr", "search", "--index", indexDir, "--text", firstCaption(split), "--explain"},
		{"xmr", "index", "--checkpoint", best, "--images", "YOUR-PHOTOS", "--out", "my-photos.idx"},
		{"xmr", "serve", "--index", indexDir, "--images", p.root},
	}, p.root
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

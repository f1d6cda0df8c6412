package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/finetune"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/photomodel"
)

// A model trained with training.vision-cut fine-tuned the detector's
// upper part (package finetune): its checkpoint carries the part, and
// every command that gives it features makes them with that part: from
// new images (a tuned detector), or from a data set's cached activations
// (xmr extract --taps).

// network loads the detector (loadDetector) as the network itself, which
// fine-tuning needs.
func network(ctx context.Context, cache string) (*detect.Detector, error) {
	det, err := loadDetector(ctx, cache)
	if err != nil {
		return nil, err
	}
	d, ok := det.(*detect.Detector)
	if !ok {
		return nil, fmt.Errorf("the detector (%T) is not a network whose part a model can fine-tune", det)
	}
	return d, nil
}

// tunedCut returns the cut whose part checkpoint file f carries, or "".
func tunedCut(f *checkpoint.File) (string, error) {
	c, ok, err := finetune.CutOf(f.Metadata())
	if err != nil || !ok {
		return "", err
	}
	return c.Name, nil
}

// tunedExtractor returns e, or for the model of checkpoint file f that
// fine-tuned the detector, e over the detector with f's part.
func tunedExtractor(f *checkpoint.File, e *extract.Extractor) (*extract.Extractor, error) {
	if cut, err := tunedCut(f); err != nil || cut == "" {
		return e, err
	}
	d, ok := e.Detector().(*detect.Detector)
	if !ok {
		return nil, fmt.Errorf("%s fine-tuned the detector, but this detector (%T) cannot take its part", f.Path(), e.Detector())
	}
	t, err := finetune.Tuned(f, d)
	if err != nil {
		return nil, err
	}
	return e.WithDetector(t)
}

// attachment returns what an index's copy of the model of checkpoint file
// f must carry: the detector part it fine-tuned; nil for other models.
func attachment(f *checkpoint.File) (*index.Attachment, error) {
	ts, md, err := finetune.Carried(f)
	if err != nil || ts == nil {
		return nil, err
	}
	return &index.Attachment{Tensors: ts, Meta: md}, nil
}

// tunedDataIdentity returns did, the identity of the features of the data
// set at dataPath, as the model of checkpoint file f reads them: for a
// model that fine-tuned the detector from a cut, the data's features with
// that cut's maps recomputed (tunedSplit), which needs the data set's
// cached activations at the cut.
func tunedDataIdentity(f *checkpoint.File, ckptFlag string, did *extract.Identity, dataPath string) (*extract.Identity, error) {
	cut, err := tunedCut(f)
	if err != nil || cut == "" || did == nil || did.Tuned != "" {
		return did, err
	}
	if dir := extract.TapsDir(dataPath, cut); !isDir(dir) {
		return nil, fmt.Errorf("the model of --checkpoint %s fine-tuned the detector from cut %s, and %s has no activations at that cut to make its features with (%s): extract the data set again with --taps %s, or give the model photos (xmr index --images)",
			ckptFlag, cut, dataPath, dir, cut)
	}
	t := *did
	t.Tuned = cut
	return &t, nil
}

// tunedSplit returns s, a split of the data set at dataPath, as the model
// of checkpoint file f reads it: for a model that fine-tuned the detector,
// a copy whose features have the part's maps recomputed, by f's weights,
// from the data set's cached activations (xmr extract --taps); s itself
// for other models.
func tunedSplit(ctx context.Context, f *checkpoint.File, cache, dataPath string, s *data.Split) (*data.Split, error) {
	reg, err := tunedRegions(ctx, f, cache, dataPath, s.Name, s.Images, s.Global)
	if err != nil || reg == s.Images {
		return s, err
	}
	out := *s
	out.Images = reg
	return &out, nil
}

// tunedRegions is tunedSplit for the regions reg of split (global: one
// vector per image) of the data set at dataPath: a split with captions
// or an index-only one.
func tunedRegions(ctx context.Context, f *checkpoint.File, cache, dataPath, split string, reg *data.Regions, global bool) (*data.Regions, error) {
	cut, err := tunedCut(f)
	if err != nil || cut == "" {
		return reg, err
	}
	if global {
		return nil, fmt.Errorf("%s fine-tuned the detector: it reads region features that xmr extract made, not the global vectors of %s", f.Path(), dataPath)
	}
	det, err := network(ctx, cache)
	if err != nil {
		return nil, err
	}
	return finetune.RefeatureSplit(f, det, dataPath, split, reg)
}

// builtinPhotoModel returns the file of the built-in photo model
// (package photomodel), written under the models' cache directory (cache,
// default detect.DefaultCacheDir()) the first time.
func builtinPhotoModel(cache string) (string, error) {
	if cache == "" {
		cache = detect.DefaultCacheDir()
	}
	path, err := photomodel.Path(cache)
	if err != nil {
		return "", err
	}
	slog.Info("no --checkpoint: the built-in photo model, TERAN trained on Flickr8k (docs/photos.md)", "file", path)
	return path, nil
}

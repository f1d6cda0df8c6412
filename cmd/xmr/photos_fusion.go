package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/photomodel"
)

// The members of a fused index of a folder of photos (indexPhotoFusion),
// inside its directory.
const (
	regionsMember = "regions"
	globalMember  = "global"
)

// builtinPartner returns the file of the built-in photo model's
// global-vector model (package photomodel), written under the models'
// cache directory (cache, default detect.DefaultCacheDir()) the first
// time.
func builtinPartner(cache string) (string, error) {
	if cache == "" {
		cache = detect.DefaultCacheDir()
	}
	return photomodel.PartnerPath(cache)
}

// indexPhotoFusion indexes the folder of photos f.images with the region
// model of f.checkpoint (one that fine-tuned the detector) and the
// global-vector model of partner (trained on the published detector's
// global vectors), fused at weight, into f.out: f.out/regions and
// f.out/global, and f.out/fusion.json. The photos are extracted once: the
// detector with the region model's part gives the regions, and, from the
// same run, the published detector's global vector (extract's
// UntunedGlobal).
func indexPhotoFusion(ctx context.Context, f photoJob, partner string, weight float32) error {
	if err := checkFusionOut(f.out, f.mode); err != nil {
		return err
	}
	workers, err := fitExtractWorkers(f.workers, runtime.NumCPU(), f.ext.maxPixels)
	if err != nil {
		return err
	}
	e, err := f.ext.extractor(ctx)
	if err != nil {
		return err
	}
	m, et, kind, att, err := imageModel(f.checkpoint, e)
	if err != nil {
		return err
	}
	pm, pe, pkind, _, err := imageModel(partner, e)
	if err != nil {
		return err
	}
	if pkind != extract.KindGlobal || pe.Identity().Tuned != "" {
		return fmt.Errorf("%s: a fused folder index wants a partner trained on the published detector's global vectors; its model reads %q features", partner, pkind)
	}
	if et.Identity().Tuned == "" {
		return fmt.Errorf("%s: a fused folder index wants a region model that fine-tuned the detector", f.checkpoint)
	}
	if et, err = et.WithUntunedGlobal(); err != nil {
		return err
	}
	start := time.Now()
	fs, kept, skips, err := collectFolder(ctx, f, et, workers)
	if err != nil {
		return err
	}
	extracted := time.Since(start)
	gfs := make([]*extract.Features, len(fs))
	for i, x := range fs {
		g := *x
		g.Global = x.UntunedGlobal
		gfs[i] = &g
	}
	rid, pid := et.Identity(), e.Identity()
	rfeats, err := indexFeatures(&rid, &extract.Record{MaxBoxes: et.MaxBoxes(), MinScore: float32(f.ext.minScore), Kind: kind})
	if err != nil {
		return err
	}
	pfeats, err := indexFeatures(&pid, &extract.Record{MaxBoxes: e.MaxBoxes(), MinScore: float32(f.ext.minScore), Kind: extract.KindGlobal})
	if err != nil {
		return err
	}
	var st *index.Stats
	for _, b := range []struct {
		dir string
		do  func(dir string) (*index.Stats, error)
	}{
		{regionsMember, func(dir string) (*index.Stats, error) {
			return index.Build(ctx, dir, m, photoCollection(photoSource(m, fs, et, kind), fs, kept), &index.BuildOptions{Mode: f.mode, Progress: true, Layout: f.layout, Attach: att, Features: rfeats})
		}},
		{globalMember, func(dir string) (*index.Stats, error) {
			return index.Build(ctx, dir, pm, photoCollection(photoSource(pm, gfs, e, extract.KindGlobal), gfs, kept), &index.BuildOptions{Mode: f.mode, Progress: true, Layout: f.layout, Features: pfeats})
		}},
	} {
		if st, err = b.do(filepath.Join(f.out, b.dir)); err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return &interruptedError{err: err, msg: fmt.Sprintf("interrupted; %s holds no new fusion (run the same command again)", f.out)}
			}
			return err
		}
	}
	members := []index.FusionMember{{Dir: regionsMember, Weight: 1}, {Dir: globalMember, Weight: weight}}
	if err := index.WriteFusion(ctx, f.out, members); err != nil {
		return err
	}
	return reportFolder(f, st.Images, time.Since(start), extracted, skips, fmt.Sprintf(", fused: %s and %s (weight %g)", m.Name(), pm.Name(), weight))
}

// checkFusionOut refuses an --out that a fused folder index cannot be
// written into with mode: one holding an index of one model, a fusion
// already there without --overwrite, or --append (a fusion's members are
// rebuilt together).
func checkFusionOut(out string, mode index.Mode) error {
	if _, err := os.Stat(filepath.Join(out, "manifest.json")); err == nil {
		return fmt.Errorf("%s holds an index of one model; the built-in photo model writes a fused index of two (regions and global vectors): remove it or choose another --out", out)
	}
	switch {
	case mode == index.Append:
		return usageErrorf("--append: the built-in photo model's index of %s is a fusion of two indexes; index the whole folder again with --overwrite", out)
	case mode == index.Create && index.IsFusion(out):
		return fmt.Errorf("%s already holds a fused index: --overwrite replaces it", out)
	}
	return nil
}

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
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/photomodel"
	"github.com/xmr-project/xmr/progress"
)

// regionsMember is the directory of a fused folder index's region model
// (the one that fine-tuned the detector) inside it (indexPhotoFusion).
const regionsMember = "regions"

// A fusionPartner is a model fused with a folder index's region model:
// the directory of its index inside the fused index, its file and its
// weight (the region model's is 1).
type fusionPartner struct {
	dir, path string
	weight    float32
}

// builtinPartners returns the built-in photo model's partners (package
// photomodel), their files written under the models' cache directory
// (cache, default detect.DefaultCacheDir()) the first time.
func builtinPartners(cache string) ([]fusionPartner, error) {
	cache = cacheDir(cache)
	var ps []fusionPartner
	for _, p := range photomodel.Partners() {
		path, err := p.Path(cache)
		if err != nil {
			return nil, err
		}
		ps = append(ps, fusionPartner{dir: p.Name, path: path, weight: p.Weight})
	}
	return ps, nil
}

// cacheDir returns the models' cache directory: cache, or
// detect.DefaultCacheDir() when it is empty.
func cacheDir(cache string) string {
	if cache == "" {
		return detect.DefaultCacheDir()
	}
	return cache
}

// indexPhotoFusion indexes the folder of photos f.images with the region
// model of f.checkpoint (one that fine-tuned the detector) and the
// partners (models trained on the published detector's regions or global
// vectors), fused, into f.out: f.out/regions, a directory per partner,
// and f.out/fusion.json. The photos are extracted once: the detector with
// the region model's part gives its regions, and, from the same run, the
// published detector's regions and global vector (extract's Untuned) give
// the partners theirs.
func indexPhotoFusion(ctx context.Context, f photoJob, partners []fusionPartner) error {
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
	if et.Identity().Tuned == "" {
		return fmt.Errorf("%s: a fused folder index wants a region model that fine-tuned the detector", f.checkpoint)
	}
	type partnerModel struct {
		m    model.Model
		kind string
	}
	pms := make([]partnerModel, len(partners))
	for i, p := range partners {
		pm, pe, pkind, _, err := imageModel(p.path, e)
		if err != nil {
			return err
		}
		if pe.Identity().Tuned != "" {
			return fmt.Errorf("%s: a fused folder index wants partners trained on the published detector's features; this model fine-tuned the detector", p.path)
		}
		pms[i] = partnerModel{pm, pkind}
	}
	if et, err = et.WithUntuned(); err != nil {
		return err
	}
	start := time.Now()
	fs, kept, skips, err := collectFolder(ctx, f, et, workers)
	if err != nil {
		return err
	}
	extracted := time.Since(start)
	// The published detector's features, over the same boxes.
	ufs := make([]*extract.Features, len(fs))
	for i, x := range fs {
		if ufs[i] = x.Untuned(); ufs[i] == nil {
			return fmt.Errorf("%s: the extraction gave no published detector's features", kept[i].Path)
		}
	}
	rid, pid := et.Identity(), e.Identity()
	rfeats, err := indexFeatures(&rid, &extract.Record{MaxBoxes: et.MaxBoxes(), MinScore: float32(f.ext.minScore), Kind: kind})
	if err != nil {
		return err
	}
	type build struct {
		dir string
		do  func(dir string) (*index.Stats, error)
	}
	builds := []build{{regionsMember, func(dir string) (*index.Stats, error) {
		return index.Build(ctx, dir, m, photoCollection(photoSource(m, fs, et, kind), fs, kept), &index.BuildOptions{Mode: f.mode, Progress: true, Layout: f.layout, Attach: att, Features: rfeats})
	}}}
	members := []index.FusionMember{{Dir: regionsMember, Weight: 1}}
	names := m.Name()
	for i, p := range partners {
		pm := pms[i]
		pfeats, err := indexFeatures(&pid, &extract.Record{MaxBoxes: e.MaxBoxes(), MinScore: float32(f.ext.minScore), Kind: pm.kind})
		if err != nil {
			return err
		}
		builds = append(builds, build{p.dir, func(dir string) (*index.Stats, error) {
			return index.Build(ctx, dir, pm.m, photoCollection(photoSource(pm.m, ufs, e, pm.kind), ufs, kept), &index.BuildOptions{Mode: f.mode, Progress: true, Layout: f.layout, Features: pfeats})
		}})
		members = append(members, index.FusionMember{Dir: p.dir, Weight: p.weight})
		names += fmt.Sprintf(" + %g x %s", p.weight, pm.m.Name())
	}
	var st *index.Stats
	for _, b := range builds {
		if st, err = b.do(filepath.Join(f.out, b.dir)); err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return &interruptedError{err: err, msg: fmt.Sprintf("interrupted; %s holds no new fusion (run the same command again)", f.out)}
			}
			return err
		}
	}
	if err := index.WriteFusion(ctx, f.out, members); err != nil {
		return err
	}
	if err := setQueryBank(ctx, f.out, photomodel.QueryBank(), model.DefaultBankBeta, cacheDir(f.ext.models)); err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return &interruptedError{err: err, msg: fmt.Sprintf("interrupted; %s holds a fusion without its query bank (run the same command again with --overwrite)", f.out)}
		}
		return err
	}
	return reportFolder(f, st.Images, time.Since(start), extracted, skips, ", fused: "+names+fmt.Sprintf(", with a query bank of %d captions", len(photomodel.QueryBank())))
}

// setQueryBank gives the fusion in dir the query bank of captions
// (index.Fusion.SetQueryBank) at beta, with a progress bar; their
// encodings are cached under cache when it is set (bankEncodings).
func setQueryBank(ctx context.Context, dir string, captions []string, beta float64, cache string) error {
	fu, err := index.OpenFusion(ctx, dir, &index.OpenOptions{SkipChecksums: true})
	if err != nil {
		return err
	}
	defer fu.Close()
	enc, err := bankEncodings(ctx, fu, captions, cache)
	if err != nil {
		return err
	}
	bar := progress.New("query bank", int64(len(captions)), "captions")
	defer bar.Finish()
	done := 0
	return fu.SetQueryBank(ctx, enc, beta, func(d, _ int) {
		bar.Add(int64(d - done))
		done = d
	})
}

// checkFusionOut refuses an --out that a fused folder index cannot be
// written into with mode: one holding an index of one model, a fusion
// already there without --overwrite, or --append (a fusion's members are
// rebuilt together).
func checkFusionOut(out string, mode index.Mode) error {
	if _, err := os.Stat(filepath.Join(out, "manifest.json")); err == nil {
		return fmt.Errorf("%s holds an index of one model; the built-in photo model writes a fused index of several: remove it or choose another --out", out)
	}
	switch {
	case mode == index.Append:
		return usageErrorf("--append: the built-in photo model's index of %s is a fusion of several indexes; index the whole folder again with --overwrite", out)
	case mode == index.Create && index.IsFusion(out):
		return fmt.Errorf("%s already holds a fused index: --overwrite replaces it", out)
	}
	return nil
}

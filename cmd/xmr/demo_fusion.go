package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/train"
)

// The photo demo fuses its region model with a global-vector model
// trained on the same photos: the two read a photo differently and err
// differently, and their fusion ranks better than either (docs/photos.md,
// "Fusing a region model with a global one").
const (
	// partnerConfig is the global-vector model's config.
	partnerConfig = "seam-e-photos"
	// partnerWeight is its weight in the fusion (the region model's is 1),
	// chosen on Flickr8k's val split.
	partnerWeight = 0.2
	// partnerBudget bounds its training; it stops sooner by itself (its
	// validations stop improving after about 80 seconds on Flickr8k).
	partnerBudget = 5 * time.Minute
	// partnerMarkerFile marks the model trained in partnerRun.
	partnerMarkerFile = ".demo-global.yaml"
	// partnerRun, partnerIndex and fusedIndex are where, in the demo's
	// directory, the global-vector model is trained and indexed, and
	// where the fusion of the two indexes is written.
	partnerRun   = "run-global"
	partnerIndex = "index-global"
	fusedIndex   = "fused"
)

// demoPartner is the global-vector model a demo source fuses with its
// main model (photoDemo), or none (nil).
type demoPartner struct {
	// data is the data set it trains on: the global vectors that xmr
	// extract writes beside the regions.
	data string
	// held loads the held-out split from data.
	held func(ctx context.Context) (*data.Split, error)
}

// fused is what the demo's fusion stage leaves for the index and the page:
// the partner's model, its held-out split and its embeddings of it.
type fused struct {
	partner *demoPartner
	model   model.Model
	cf      *checkpoint.File
	split   *data.Split
	res     *eval.ModelResult // the partner's alone
	report  *eval.Report      // the fusion's
}

// close releases what f holds.
func (f *fused) close() {
	if f == nil {
		return
	}
	f.cf.Close()
	f.split.Close()
}

// trainPartner trains the partner model in dir/partnerRun (step 2), or
// finds it trained with the same config before.
func trainPartner(ctx context.Context, o demoOptions, p *demoPartner, again bool) error {
	cfg, err := train.LoadConfig(partnerConfig)
	if err != nil {
		return err
	}
	run := filepath.Join(o.dir, partnerRun)
	best := filepath.Join(run, "best-rsum.safetensors")
	marker := filepath.Join(o.dir, partnerMarkerFile)
	trained := demoMarker(cfg, 0, partnerBudget)
	if reuse, _ := demoReuse(best, marker, cfg, trained); reuse && !again {
		step(2, "using the global-vector model in %s, fused with it", run)
		return nil
	}
	if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	step(2, "training %s on the photos' global vectors in %s, to fuse with the region model (it stops by itself, at most %s)", partnerConfig, run, partnerBudget)
	opts := train.Options{Config: cfg, Data: data.Source{Path: p.data}, Out: run, ValImages: photoValImages, TimeBudget: partnerBudget, Overwrite: true}
	return demoTrain(ctx, opts, marker, trained)
}

// evaluateFusion evaluates the partner on the held-out split and the
// fusion of its similarities with those of the main model (res, on split
// with the evaluation options mo; step 3), and prints the fusion's table.
func evaluateFusion(ctx context.Context, o demoOptions, p *demoPartner, split *data.Split, res *eval.ModelResult, mo eval.ModelOptions) (*fused, error) {
	pm, cf, err := model.Load(filepath.Join(o.dir, partnerRun, "best-rsum.safetensors"))
	if err != nil {
		return nil, err
	}
	f := &fused{partner: p, model: pm, cf: cf}
	if f.split, err = p.held(ctx); err != nil {
		cf.Close()
		return nil, err
	}
	if f.split.NumImages() != split.NumImages() || !slices.Equal(f.split.Captions, split.Captions) {
		f.close()
		return nil, fmt.Errorf("%s: split %s holds %d images, the regions' %d: want the same photos and captions (xmr demo --fresh extracts them again)", p.data, split.Name, f.split.NumImages(), split.NumImages())
	}
	mo.Grounding = nil
	if f.res, err = eval.EvaluateModels(ctx, []model.Model{pm}, f.split, mo); err != nil {
		f.close()
		return nil, err
	}
	fu, err := eval.Fuse([]*eval.Matrix{res.Sims, f.res.Sims}, []float32{1, partnerWeight})
	if err == nil {
		opts := mo.Options
		opts.CaptionsPerImage = split.CapsPerImage
		f.report, err = eval.EvaluateFused(fu, opts)
	}
	if err == nil {
		fmt.Fprintf(stdout, "    %s alone: rsum %.1f; the two fused (weight %g, each query's scores standardised):\n", partnerConfig, f.res.Report.Metrics.RSum, partnerWeight)
		err = f.report.WriteTable(stdout)
	}
	if err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

// indexFusion indexes the held-out split with the partner model into
// dir/partnerIndex and writes the fusion of the main index (mainDir) with
// it into dir/fusedIndex, which it returns (step 5).
func indexFusion(ctx context.Context, dir, mainDir string, f *fused, rebuild bool) (string, error) {
	mid, err := checkpointIdentity(f.cf)
	if err != nil {
		return "", err
	}
	rec, err := extract.ReadRecord(f.partner.data)
	if err != nil || rec == nil || mid == nil {
		return "", fmt.Errorf("the features in %s, or the model of %s, record no extractor: %v", f.partner.data, f.cf.Path(), err)
	}
	features, err := indexFeatures(mid, rec)
	if err != nil {
		return "", err
	}
	pdir := filepath.Join(dir, partnerIndex)
	if err := writeDemoIndex(ctx, pdir, f.model, f.split, collection(f.split, ""), f.res, rebuild, nil, features); err != nil {
		return "", err
	}
	out := filepath.Join(dir, fusedIndex)
	rel := func(d string) string {
		if r, err := filepath.Rel(out, d); err == nil {
			return r
		}
		return d
	}
	members := []index.FusionMember{{Dir: rel(mainDir), Weight: 1}, {Dir: rel(pdir), Weight: partnerWeight}}
	if err := index.WriteFusion(ctx, out, members); err != nil {
		return "", err
	}
	fmt.Fprintf(stdout, "    %s fuses %s with %s (weight %g)\n", out, mainDir, pdir, partnerWeight)
	return out, nil
}

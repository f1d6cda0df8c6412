package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/photomodel"
	"github.com/xmr-project/xmr/train"
)

// The photo demo fuses its region model with global-vector models
// trained on the same photos: they read a photo differently and err
// differently, and their fusion ranks better than either
// (docs/photos.md, "Fusing a region model with a global one").
const (
	// partnerConfig is the global-vector models' config; partnerSeeds how
	// many are trained, with seeds 1, 2, ...: SEAM-E's runs differ from
	// seed to seed, and their errors too, so that several fused rank
	// better than one. The built-in photo model fuses as many, made by
	// this recipe, with the same weight each, partnerWeight (the region
	// model's is 1), chosen on Flickr8k's val split.
	partnerConfig = "seam-e-photos"
	partnerSeeds  = photomodel.SEAMESeeds
	partnerWeight = photomodel.SEAMEWeight
	// partnerBudget bounds each one's training; it stops sooner by itself
	// (its validations stop improving after about 80 seconds on
	// Flickr8k).
	partnerBudget = 5 * time.Minute
	// partnerMarkerFile marks the model trained in partnerRun.
	partnerMarkerFile = ".demo-global.yaml"
	// partnerRun, partnerIndex and fusedIndex are where, in the demo's
	// directory, the first global-vector model is trained and indexed
	// (the others' add "-2", "-3", ...: partnerPath), and where the
	// fusion of the indexes is written.
	partnerRun   = "run-global"
	partnerIndex = "index-global"
	fusedIndex   = "fused"
)

// partnerPath returns name for the first global-vector model (k = 0), and
// name with "-2", "-3", ... for the others (before a file's extension).
func partnerPath(name string, k int) string {
	if k == 0 {
		return name
	}
	ext := filepath.Ext(name)
	return fmt.Sprintf("%s-%d%s", strings.TrimSuffix(name, ext), k+1, ext)
}

// partnerWrites are the names that the partners' runs, indexes and
// markers take in the demo's directory.
func partnerWrites() []string {
	var ws []string
	for k := range partnerSeeds {
		ws = append(ws, partnerPath(partnerRun, k), partnerPath(partnerIndex, k), partnerPath(partnerMarkerFile, k))
	}
	return ws
}

// partnerWeights returns the weights of the main model and the partners
// in the fusion, as xmr eval --weights takes them.
func partnerWeights() string {
	w := "1"
	for range partnerSeeds {
		w += fmt.Sprintf(",%g", partnerWeight)
	}
	return w
}

// demoPartner is the global-vector models a demo source fuses with its
// main model (photoDemo), or none (nil).
type demoPartner struct {
	// data is the data set they train on: the global vectors that xmr
	// extract writes beside the regions.
	data string
	// held loads the held-out split from data.
	held func(ctx context.Context) (*data.Split, error)
	// bank returns the query bank's captions: demoBank of the training
	// split's (bankCaptions).
	bank func(ctx context.Context) ([]string, error)
}

// demoBank is how many training captions the photo demo's query bank
// holds, as the built-in photo model's (photomodel.QueryBank).
const demoBank = 2000

// fused is what the demo's fusion stage leaves for the index and the page:
// the partners' models, the held-out split and their embeddings of it.
type fused struct {
	partner *demoPartner
	models  []model.Model
	cfs     []*checkpoint.File
	split   *data.Split
	res     []*eval.ModelResult // each partner's alone
	report  *eval.Report        // the fusion's
	// bank is the query bank's encodings by the main model and each
	// partner, in the fusion's order (index.Fusion.SetQueryBank).
	bank []*model.Embeddings
}

// close releases what f holds.
func (f *fused) close() {
	if f == nil {
		return
	}
	for _, cf := range f.cfs {
		cf.Close()
	}
	if f.split != nil {
		f.split.Close()
	}
}

// trainPartner trains the partner models in dir/partnerRun and the
// others' runs (step 2), or finds them trained with the same config and
// seed before.
func trainPartner(ctx context.Context, o demoOptions, p *demoPartner, again bool) error {
	for k := range partnerSeeds {
		cfg, err := train.LoadConfig(partnerConfig)
		if err != nil {
			return err
		}
		cfg.Training.Seed = uint64(k + 1)
		run := filepath.Join(o.dir, partnerPath(partnerRun, k))
		best := filepath.Join(run, "best-rsum.safetensors")
		marker := filepath.Join(o.dir, partnerPath(partnerMarkerFile, k))
		trained := demoMarker(cfg, 0, partnerBudget, 0)
		if reuse, _ := demoReuse(best, marker, cfg, trained); reuse && !again {
			step(2, "using the global-vector model in %s, fused with it", run)
			continue
		}
		if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		step(2, "training %s (seed %d of %d) on the photos' global vectors in %s, to fuse with the region model (it stops by itself, at most %s)", partnerConfig, k+1, partnerSeeds, run, partnerBudget)
		opts := train.Options{Config: cfg, Data: data.Source{Path: p.data}, Out: run, ValImages: photoValImages, TimeBudget: partnerBudget, Overwrite: true}
		if err := demoTrain(ctx, opts, marker, trained); err != nil {
			return err
		}
	}
	return nil
}

// evaluateFusion evaluates the partners on the held-out split and the
// fusion of their similarities with those of the main model (main, whose
// results res are on split with the evaluation options mo; step 3), and
// prints the fusion's table, then the fusion's with the query bank.
func evaluateFusion(ctx context.Context, o demoOptions, p *demoPartner, main model.Model, split *data.Split, res *eval.ModelResult, mo eval.ModelOptions) (*fused, error) {
	f := &fused{partner: p}
	var err error
	if f.split, err = p.held(ctx); err != nil {
		return nil, err
	}
	if f.split.NumImages() != split.NumImages() || !slices.Equal(f.split.Captions, split.Captions) {
		f.close()
		return nil, fmt.Errorf("%s: split %s holds %d images, the regions' %d: want the same photos and captions (xmr demo --fresh extracts them again)", p.data, split.Name, f.split.NumImages(), split.NumImages())
	}
	mo.Grounding = nil
	sims, weights := []*eval.Matrix{res.Sims}, []float32{1}
	var alone []string
	for k := range partnerSeeds {
		pm, cf, err := model.Load(filepath.Join(o.dir, partnerPath(partnerRun, k), "best-rsum.safetensors"))
		if err != nil {
			f.close()
			return nil, err
		}
		f.models, f.cfs = append(f.models, pm), append(f.cfs, cf)
		r, err := eval.EvaluateModels(ctx, []model.Model{pm}, f.split, mo)
		if err != nil {
			f.close()
			return nil, err
		}
		f.res = append(f.res, r)
		sims, weights = append(sims, r.Sims), append(weights, partnerWeight)
		alone = append(alone, fmt.Sprintf("%.1f", r.Report.Metrics.RSum))
	}
	fu, err := eval.Fuse(sims, weights)
	if err == nil {
		opts := mo.Options
		opts.CaptionsPerImage = split.CapsPerImage
		f.report, err = eval.EvaluateFused(fu, opts)
	}
	if err == nil {
		fmt.Fprintf(stdout, "    %s alone, seeds 1-%d: rsum %s; fused with the region model (weight %g each, each query's scores standardised):\n", partnerConfig, partnerSeeds, strings.Join(alone, ", "), partnerWeight)
		err = f.report.WriteTable(stdout)
	}
	if err == nil {
		err = f.evaluateBank(ctx, p, append([]*eval.ModelResult{res}, f.res...), append([]model.Model{main}, f.models...), fu, weights, mo.Options, split.CapsPerImage)
	}
	if err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

// evaluateBank encodes the query bank's captions with each model of the
// fusion (models, whose results on the held-out split are res), scores
// the split's images for them, subtracts each image's offset from the
// fusion fu's text-to-image scores (eval.ApplyBank at
// model.DefaultBankBeta) and prints the table; f keeps the encodings for
// the index.
func (f *fused) evaluateBank(ctx context.Context, p *demoPartner, res []*eval.ModelResult, models []model.Model, fu *eval.Fused, weights []float32, opts eval.Options, perImage int) error {
	caps, err := p.bank(ctx)
	if err != nil {
		return fmt.Errorf("the query bank: %w", err)
	}
	var sims []*eval.Matrix
	for k, m := range models {
		enc, err := model.EncodeTexts(ctx, m, caps, nil)
		if err != nil {
			return fmt.Errorf("the query bank: %w", err)
		}
		sc, err := model.ScoreMatrix(ctx, res[k].Images, enc, m.Scoring())
		if err != nil {
			return fmt.Errorf("the query bank: %w", err)
		}
		f.bank = append(f.bank, enc)
		sims = append(sims, &eval.Matrix{Rows: res[k].Images.Len(), Cols: enc.Len(), Data: sc})
	}
	if err := eval.ApplyBank(fu, sims, nil, weights, model.DefaultBankBeta); err != nil {
		return err
	}
	opts.CaptionsPerImage = perImage
	rep, err := eval.EvaluateFused(fu, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "    the same, text-to-image ranking normalised by a query bank of %d training captions (docs/photos.md, \"A bank of queries\"):\n", len(caps))
	return rep.WriteTable(stdout)
}

// indexFusion indexes the held-out split with each partner model into
// dir/partnerIndex and the others' directories, and writes the fusion of
// the main index (mainDir) with them into dir/fusedIndex, which it
// returns (step 5).
func indexFusion(ctx context.Context, dir, mainDir string, f *fused, rebuild bool) (string, error) {
	rec, err := extract.ReadRecord(f.partner.data)
	if err != nil || rec == nil {
		return "", fmt.Errorf("the features in %s record no extractor: %v", f.partner.data, err)
	}
	out := filepath.Join(dir, fusedIndex)
	rel := func(d string) string {
		if r, err := filepath.Rel(out, d); err == nil {
			return r
		}
		return d
	}
	members := []index.FusionMember{{Dir: rel(mainDir), Weight: 1}}
	for k, m := range f.models {
		mid, err := checkpointIdentity(f.cfs[k])
		if err != nil {
			return "", err
		}
		if mid == nil {
			return "", fmt.Errorf("the model of %s records no extractor", f.cfs[k].Path())
		}
		features, err := indexFeatures(mid, rec)
		if err != nil {
			return "", err
		}
		pdir := filepath.Join(dir, partnerPath(partnerIndex, k))
		if err := writeDemoIndex(ctx, pdir, m, f.split, collection(f.split, ""), f.res[k], rebuild, nil, features); err != nil {
			return "", err
		}
		members = append(members, index.FusionMember{Dir: rel(pdir), Weight: partnerWeight})
	}
	if err := index.WriteFusion(ctx, out, members); err != nil {
		return "", err
	}
	fi, err := index.OpenFusion(ctx, out, &index.OpenOptions{SkipChecksums: true})
	if err != nil {
		return "", err
	}
	defer fi.Close()
	if err := fi.SetQueryBank(ctx, f.bank, model.DefaultBankBeta, nil); err != nil {
		return "", err
	}
	fmt.Fprintf(stdout, "    %s fuses %s with %s and %d more (weight %g each), with a query bank of %d training captions\n", out, mainDir, filepath.Join(dir, partnerIndex), partnerSeeds-1, partnerWeight, f.bank[0].Len())
	return out, nil
}

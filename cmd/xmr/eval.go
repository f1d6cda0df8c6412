package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/outpath"
)

var evalFlags struct {
	// Input: a similarity matrix, or checkpoints that encode a split.
	sims        string
	checkpoints stringList
	data        dataFlags
	split       string
	pooling     string
	compat      string
	space       string
	saveSims    string
	weights     string
	noNDCG      bool
	out         string

	// Relevance matrices for NDCG.
	relevance      string
	relevanceSpice string

	// Evaluation and output.
	protocol       string
	ndcgP          int
	ndcgNonZeroI2T bool
	json           bool
	cpuProfile     string
	models         string

	// A bank of queries from another split (eval.QueryBank).
	querybank       int
	querybankImages int
	querybankSplit  string
	querybankBeta   float64
	querybankCaps   string
}

// bankOn reports whether the eval flags ask for a query bank.
func bankOn() bool {
	f := &evalFlags
	return f.querybank != 0 || f.querybankImages != 0 || f.querybankCaps != ""
}

func init() {
	register(&command{
		name:    "eval",
		summary: "evaluate retrieval: Recall@1/5/10, medr, meanr, rsum and NDCG (ROUGE-L, SPICE), as in the TERAN paper",
		usage:   "(--sims SIMS.npy | --checkpoint CKPT [--checkpoint CKPT2 ...] --data PATH) [--protocol 1k|5k|all] [flags]",
		examples: `  xmr eval --checkpoint runs/teran/best-rsum.safetensors --data world --split test
  xmr eval --checkpoint runs/teran --data world --json    # a run directory: its best-rsum checkpoint
  xmr eval --checkpoint runs/coco --data /data/coco --karpathy dataset_coco.json --coco-annotations captions_val2014.json --split test
  xmr eval --checkpoint runs/teran/best-rsum.safetensors --data world --split testall --protocol 1k
  xmr eval --checkpoint runs/a/best-rsum.safetensors --checkpoint runs/b/best-rsum.safetensors --data world   # ensemble
  xmr eval --checkpoint runs/teran --checkpoint runs/seam-e --weights 1,0.2 --data F8K --split dev   # a fusion: regions and F8K/global
  xmr eval --checkpoint runs/tern/best-rsum.safetensors --data world --pooling MrSw   # "TERN MrSw Test"
  xmr eval --checkpoint teran.safetensors --data data/coco_precomp --split testall --protocol 1k --compat official   # an imported TERAN, scored as the official evaluation scores it
  xmr eval --checkpoint runs/member --data world --space cross   # MEMBER (Cross): its cross-embeddings only
  xmr eval --sims sims_5k.npy --protocol 5k
  xmr eval --sims sims_5k.npy --protocol 1k --relevance coco-test-rougeL.npy --relevance-spice coco-test-spice.npy
  xmr eval --sims sims_f30k.npy --protocol all --relevance f30k-rouge.bin --json | jq .rsum`,
		setFlags: func(fs *flag.FlagSet) {
			fs.StringVar(&evalFlags.sims, "sims", "", "similarity matrix `SIMS.npy`: images x captions (5 per image), float32 or float64")
			evalFlags.checkpoints = nil
			fs.Var(&evalFlags.checkpoints, "checkpoint", "model checkpoint `CKPT`, or a training run directory (its best-rsum checkpoint); repeat for an ensemble: the similarities are averaged")
			evalFlags.data.addTo(fs)
			fs.StringVar(&evalFlags.split, "split", "test", "split of --data to evaluate")
			fs.StringVar(&evalFlags.pooling, "pooling", "", "override the models' scoring: global (cosine of the global vectors), order (SEAM's order similarity), MrSw, MwSr, Symm or MrAvgw")
			fs.StringVar(&evalFlags.compat, "compat", "", "official: score TERAN's alignment poolings (MrSw, MwSr, Symm, MrAvgw) as the official evaluation (mesnico/TERAN evaluation.py) does: the last token before [SEP] not scored, each word's best region floored at 0 on images of fewer than 36 regions, each region's best word floored at 0 on captions of fewer than 88 tokens with [CLS] and [SEP] (docs/eval.md); default: xmr's own scoring")
			fs.StringVar(&evalFlags.space, "space", "", "MEMBER's retrieval space: self, cross, comb (the configured combination), comb-similarity or comb-embedding; default: the checkpoint's model.space")
			fs.StringVar(&evalFlags.weights, "weights", "", "fuse the checkpoints' scores with these `W1,W2,...` (one a --checkpoint): each query's scores under each model standardised over what it ranks, weighted and summed (docs/eval.md); default: the similarities averaged")
			fs.StringVar(&evalFlags.saveSims, "save-sims", "", "write the (ensemble) similarity matrix to `SIMS.npy`")
			fs.StringVar(&evalFlags.out, "out", "", "also write every metric as JSON to `FILE.json`")
			fs.BoolVar(&evalFlags.noNDCG, "no-ndcg", false, "with --checkpoint, do not compute ROUGE-L/SPICE relevance for NDCG when no relevance file is given")
			fs.StringVar(&evalFlags.relevance, "relevance", "", "ROUGE-L relevance matrix `REL.bin` (raw float32, captions x images, as from \"xmr relevance\" or TERAN) for NDCG")
			fs.StringVar(&evalFlags.relevanceSpice, "relevance-spice", "", "SPICE relevance matrix `REL.bin` (same layout) for NDCG")
			fs.StringVar(&evalFlags.protocol, "protocol", "all", "1k (folds of 1000 images, averaged), 5k (5000 images at once) or all (the matrix as is)")
			fs.IntVar(&evalFlags.ndcgP, "ndcg-p", eval.DefaultNDCGAt, "NDCG cut-off p")
			fs.BoolVar(&evalFlags.ndcgNonZeroI2T, "ndcg-nonzero-i2t", false, "average image-to-text NDCG over non-zero values only, as the official TERAN code does")
			fs.BoolVar(&evalFlags.json, "json", false, "print all metrics as one JSON object")
			fs.StringVar(&evalFlags.cpuProfile, "cpuprofile", "", "write a CPU profile (go tool pprof) to `FILE`")
			fs.IntVar(&evalFlags.querybank, "querybank", 0, "normalise text-to-image ranking with a bank of `N` captions, the first of N images spread over --querybank-split's (leaving out xmr extract --flip's mirror images): each image's scores lose a soft maximum of its scores for them, so an image that every caption ranks high (a hub) drops (an inverted softmax; docs/eval.md); with --weights or one --checkpoint; 0: none")
			fs.StringVar(&evalFlags.querybankCaps, "querybank-captions", "", "the query bank's captions from `FILE` (one a line, as xmr fuse --querybank reads them) in place of --querybank's")
			fs.IntVar(&evalFlags.querybankImages, "querybank-images", 0, "normalise image-to-text ranking too, with a bank of `N` images spread over --querybank-split's (leaving out mirror images); 0: none")
			fs.StringVar(&evalFlags.querybankSplit, "querybank-split", "train", "split of --data that the query bank comes from (not the evaluated one)")
			fs.Float64Var(&evalFlags.querybankBeta, "querybank-beta", model.DefaultBankBeta, "the query bank's inverse temperature, per unit of standardised score")
			fs.StringVar(&evalFlags.models, "models", "", "for a model that fine-tuned the detector: `DIR` caching the detector's weights (default $XMR_MODELS, else ~/.cache/xmr)")
		},
		run: runEval,
	})
}

func runEval(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected arguments %q", args)
	}
	proto, err := eval.ParseProtocol(evalFlags.protocol)
	if err != nil {
		return usageErrorf("--protocol: %v", err)
	}
	if evalFlags.ndcgP <= 0 {
		return usageErrorf("--ndcg-p must be > 0, got %d", evalFlags.ndcgP)
	}
	// Refuse an output that would destroy an input, or that cannot be
	// written, before the work (and the profile), not after.
	if err := checkOutputs(evalInputs(), []outpath.Output{
		{Flag: "--out", Path: evalFlags.out, Kind: outpath.Stream},
		{Flag: "--save-sims", Path: evalFlags.saveSims, Kind: outpath.Stream},
		profileOutput(evalFlags.cpuProfile),
	}); err != nil {
		return err
	}
	for _, o := range []struct{ flag, path string }{{"--out", evalFlags.out}, {"--save-sims", evalFlags.saveSims}} {
		if err := checkOutputFile(o.path); err != nil {
			return usageErrorf("%s: %v", o.flag, err)
		}
	}
	stopProfile, err := startCPUProfile(evalFlags.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	switch {
	case evalFlags.sims != "" && len(evalFlags.checkpoints) > 0:
		return usageErrorf("give --sims or --checkpoint, not both")
	case evalFlags.sims != "":
		if evalFlags.saveSims != "" || evalFlags.pooling != "" || evalFlags.space != "" || evalFlags.compat != "" {
			return usageErrorf("--save-sims, --pooling, --compat and --space go with --checkpoint")
		}
		sims, err := eval.ReadNPY(evalFlags.sims)
		if err != nil {
			return err
		}
		return evaluateSims(evalFlags.sims, sims, proto)
	case len(evalFlags.checkpoints) > 0:
		return evalCheckpoints(ctx, proto)
	}
	return usageErrorf("--sims or --checkpoint is required")
}

// evalCheckpoints encodes a split with each checkpoint (an ensemble when
// there are several), scores it and evaluates it.
func evalCheckpoints(ctx context.Context, proto eval.Protocol) error {
	f := evalFlags
	if f.data.path == "" {
		return usageErrorf("--checkpoint needs --data PATH")
	}
	var scoring model.Scoring
	if f.pooling != "" {
		var err error
		if scoring, err = model.ParseScoring(f.pooling); err != nil {
			return usageErrorf("--pooling: %v", err)
		}
	}
	compat, err := model.ParseCompat(f.compat)
	if err != nil {
		return usageErrorf("--compat: %v", err)
	}
	weights, err := parseWeights(f.weights, len(f.checkpoints))
	if err != nil {
		return usageErrorf("--weights: %v", err)
	}
	switch {
	case f.querybank < 0 || f.querybankImages < 0:
		return usageErrorf("--querybank %d, --querybank-images %d: want numbers of queries > 0, or 0 for none", f.querybank, f.querybankImages)
	case f.querybank > 0 && f.querybankCaps != "":
		return usageErrorf("--querybank N or --querybank-captions FILE, not both")
	case bankOn() && f.saveSims != "":
		return usageErrorf("--save-sims: a query bank ranks each direction on matrices of its own; save each model's matrix with an xmr eval of its own")
	case bankOn() && weights == nil && len(f.checkpoints) > 1:
		return usageErrorf("a query bank normalises a fusion (--weights) or one --checkpoint, not an ensemble's average")
	case (f.querybank > 0 || f.querybankImages > 0) && f.querybankSplit == f.split:
		return usageErrorf("--querybank-split %s is the evaluated split: the bank's queries must not be the ones evaluated", f.split)
	case bankOn() && !(f.querybankBeta > 0 && f.querybankBeta < 1e6):
		return usageErrorf("--querybank-beta %v: want a number > 0", f.querybankBeta)
	}
	if weights != nil && f.saveSims != "" {
		return usageErrorf("--save-sims: a fusion (--weights) ranks each direction on matrices of its own (each query's scores standardised); save each model's matrix with an xmr eval of its own")
	}
	src, err := f.data.source()
	if err != nil {
		return err
	}
	split, err := src.Load(ctx, f.split)
	if err != nil {
		return err
	}
	defer split.Close()
	if err := eval.CheckProtocol(proto, split.NumImages(), "split "+f.split); err != nil {
		return usageErrorf("--protocol: %v", err)
	}
	grounding, err := src.Grounding(f.split)
	if err != nil {
		return err
	}
	var models []model.Model
	var images []model.ImageSource
	for _, path := range f.checkpoints {
		m, ms, err := evalModel(ctx, path, src, split)
		if err != nil {
			return err
		}
		if ms != split {
			defer ms.Close()
		}
		eval.LogImageInput(m, ms)
		s := m.Scoring()
		if scoring != "" {
			s = scoring
		}
		// Before the relevance matrices and the encoding: a refusal costs
		// nothing.
		if err := eval.CheckCompat(m, s, ms, compat); err != nil {
			return usageErrorf("--compat: %s: %v", path, err)
		}
		models = append(models, m)
		images = append(images, ms.Images)
	}
	opts := eval.ModelOptions{Options: evalOptions(proto), Scoring: scoring, Compat: compat, Grounding: grounding, Images: images, Weights: weights, Progress: true}
	if bankOn() {
		bank, closeBank, err := loadQueryBank(ctx, src, f.checkpoints)
		if err != nil {
			return err
		}
		defer closeBank()
		opts.Bank = bank
	}
	if opts.Relevances, err = relevanceFiles(split.NumCaptions(), split.NumImages()); err != nil {
		return err
	}
	if len(opts.Relevances) == 0 && !f.noNDCG {
		if opts.Relevances, err = eval.RelevanceMatrices(ctx, split.Captions, split.CapsPerImage); err != nil {
			return err
		}
	}
	res, err := eval.EvaluateModels(ctx, models, split, opts)
	if err != nil {
		return err
	}
	// The report first: a failure to write a file loses no result.
	if err := writeReport(res.Report); err != nil {
		return err
	}
	if f.saveSims != "" {
		if err := atomicfile.Write(f.saveSims, func(w io.Writer) error { return eval.WriteNPY(w, res.Sims) }); err != nil {
			return fmt.Errorf("--save-sims: %w", err)
		}
	}
	return nil
}

// loadQueryBank reads the query bank: --querybank captions of
// --querybank-split (bankCaptions), or --querybank-captions, and
// --querybank-images images spread over its images (bankImages) as each checkpoint reads them
// (evalModel). It returns the bank and the function that closes what it
// opened.
func loadQueryBank(ctx context.Context, src data.Source, checkpoints []string) (*eval.QueryBank, func(), error) {
	f := evalFlags
	bank := &eval.QueryBank{Beta: f.querybankBeta}
	if f.querybankCaps != "" {
		var err error
		if bank.Captions, err = readQueryBank(f.querybankCaps); err != nil {
			return nil, nil, err
		}
	}
	images := 0
	var closers []func() error
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	if f.querybank > 0 || f.querybankImages > 0 {
		bs, err := src.Load(ctx, f.querybankSplit)
		if err != nil {
			return nil, nil, fmt.Errorf("--querybank-split: %w", err)
		}
		closers = append(closers, bs.Close)
		if f.querybank > 0 {
			bank.Captions = bankCaptions(bs, f.querybank)
		}
		idx := bankImages(bs, f.querybankImages)
		images = len(idx)
		for _, path := range checkpoints {
			if len(idx) == 0 {
				break
			}
			_, ms, err := evalModel(ctx, path, src, bs)
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("--querybank-images: %w", err)
			}
			if ms != bs {
				closers = append(closers, ms.Close)
			}
			bank.Images = append(bank.Images, eval.PickImages(ms.Images, idx))
		}
	}
	slog.Info("query bank", "split", f.querybankSplit, "captions", len(bank.Captions), "images", images, "beta", bank.Beta)
	return bank, closeAll, nil
}

// evalModel loads the model of the checkpoint at path and returns the
// split as it reads it: the regions that its own fine-tuned detector makes
// (tunedSplit), the data set's global/ copy for a model trained on global
// vectors when --data holds regions (a fusion of a region model with a
// global-vector one reads both from one --data), else split itself. A
// split other than split is the caller's to close.
func evalModel(ctx context.Context, path string, src data.Source, split *data.Split) (model.Model, *data.Split, error) {
	m, cf, err := model.Load(path)
	if err != nil {
		return nil, nil, err
	}
	defer cf.Close()
	dataPath, err := modelDataPath(cf, src.Path)
	if err != nil {
		return nil, nil, err
	}
	if err := checkDataFeatures(cf, path, dataPath); err != nil {
		return nil, nil, err
	}
	if f := evalFlags; f.space != "" {
		if m, err = inSpace(m, path, f.space); err != nil {
			return nil, nil, err
		}
	}
	if dataPath == src.Path {
		ms, err := tunedSplit(ctx, cf, evalFlags.models, dataPath, split)
		return m, ms, err
	}
	gsrc := src
	gsrc.Path = dataPath
	if gsrc, err = gsrc.Resolve(); err != nil {
		return nil, nil, err
	}
	gs, err := gsrc.Load(ctx, split.Name)
	if err != nil {
		return nil, nil, err
	}
	if gs.NumImages() != split.NumImages() || !slices.Equal(gs.Captions, split.Captions) {
		gs.Close()
		return nil, nil, fmt.Errorf("%s: split %s holds %d images and %d captions, %s's %d and %d: want the same images and captions (one xmr extract)", dataPath, split.Name, gs.NumImages(), gs.NumCaptions(), src.Path, split.NumImages(), split.NumCaptions())
	}
	slog.Info("the model reads global vectors: its images are the data set's global copy", "checkpoint", path, "data", dataPath)
	return m, gs, nil
}

// modelDataPath returns where the model of checkpoint file cf reads the
// data set at dataPath: its global/ copy when the model was trained on
// global vectors and dataPath holds regions with such a copy, else
// dataPath.
func modelDataPath(cf *checkpoint.File, dataPath string) (string, error) {
	if cf.Metadata()[extract.KindMetaKey] != extract.KindGlobal {
		return dataPath, nil
	}
	kind, err := dataKind(dataPath)
	if err != nil || kind != extract.KindRegions {
		return dataPath, err
	}
	g := filepath.Join(dataPath, "global")
	if k, err := dataKind(g); err != nil || k != extract.KindGlobal {
		return dataPath, err
	}
	return g, nil
}

// parseWeights parses --weights: n comma-separated numbers > 0, one a
// checkpoint; "" gives nil (no fusion).
func parseWeights(s string, n int) ([]float32, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) != n {
		return nil, fmt.Errorf("%d weights for %d --checkpoint: want one a checkpoint, in their order", len(parts), n)
	}
	out := make([]float32, n)
	for i, p := range parts {
		w, err := strconv.ParseFloat(strings.TrimSpace(p), 32)
		if err != nil || !(w > 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("weight %d is %q: want a number > 0", i+1, p)
		}
		out[i] = float32(w)
	}
	return out, nil
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// evalOptions returns the evaluation options of the flags.
func evalOptions(proto eval.Protocol) eval.Options {
	return eval.Options{
		Protocol:         proto,
		CaptionsPerImage: eval.DefaultCaptionsPerImage,
		NDCGAt:           evalFlags.ndcgP,
		NonZeroI2T:       evalFlags.ndcgNonZeroI2T,
	}
}

// relevanceFiles reads the relevance matrices named by --relevance and
// --relevance-spice, sized for nCap captions and nImg images.
func relevanceFiles(nCap, nImg int) ([]eval.Relevance, error) {
	var out []eval.Relevance
	for _, r := range []struct{ name, path string }{{"rouge-l", evalFlags.relevance}, {"spice", evalFlags.relevanceSpice}} {
		if r.path == "" {
			continue
		}
		m, err := eval.ReadRelevance(r.path, nCap, nImg)
		if err != nil {
			return nil, err
		}
		out = append(out, eval.Relevance{Name: r.name, Matrix: m})
	}
	return out, nil
}

// evaluateSims evaluates a similarity matrix (images x captions) from
// source (a file name, for errors) with the relevance files and options of
// the flags, and prints the report.
func evaluateSims(source string, sims *eval.Matrix, proto eval.Protocol) error {
	opts := evalOptions(proto)
	// Check the shape before reading relevance files sized from it.
	if err := eval.CheckSimilarity(sims, opts.CaptionsPerImage); err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	if err := eval.CheckProtocol(proto, sims.Rows, source); err != nil {
		return usageErrorf("--protocol: %v", err)
	}
	var err error
	if opts.Relevances, err = relevanceFiles(sims.Cols, sims.Rows); err != nil {
		return err
	}
	rep, err := eval.Evaluate(sims, opts)
	if err != nil {
		return err
	}
	return writeReport(rep)
}

// writeReport prints the report as a table or JSON, then writes --out.
func writeReport(rep *eval.Report) error {
	var err error
	if evalFlags.json {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err != nil {
		return err
	}
	if evalFlags.out != "" {
		if err := atomicfile.Write(evalFlags.out, rep.WriteJSON); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	return nil
}

// evalInputs returns the files and directories that xmr eval reads.
func evalInputs() []outpath.Input {
	in := append(checkpointInputs(evalFlags.checkpoints...), evalFlags.data.inputs()...)
	return append(in, outpath.Input{Flag: "--sims", Path: evalFlags.sims},
		outpath.Input{Flag: "--relevance", Path: evalFlags.relevance},
		outpath.Input{Flag: "--relevance-spice", Path: evalFlags.relevanceSpice},
		outpath.Input{Flag: "--querybank-captions", Path: evalFlags.querybankCaps})
}

// checkOutputFile says why path cannot be written, if it cannot: its
// directory is missing, not a directory or not writable, or path is a
// directory. An empty path is fine (no output), and so is a FIFO or a
// terminal, which is written directly.
func checkOutputFile(path string) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	} else if err == nil && atomicfile.IsStream(st) {
		return nil
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("cannot write %s: %s is not a directory", path, dir)
	}
	// The files are written to a temporary file in dir, then renamed:
	// try one.
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".check-*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// inSpace returns MEMBER checkpoint m (read from path) retrieving in space
// (self, cross, comb, comb-similarity or comb-embedding).
func inSpace(m model.Model, path, space string) (model.Model, error) {
	mb, ok := m.(*model.MEMBER)
	if !ok {
		return nil, usageErrorf("--space: %s holds a %s model; only member has retrieval spaces", path, m.Name())
	}
	name, combination, _ := strings.Cut(space, "-")
	ms, err := mb.InSpace(name, combination)
	if err != nil {
		return nil, usageErrorf("--space %q: want self, cross, comb, comb-similarity or comb-embedding (%v)", space, err)
	}
	return ms, nil
}

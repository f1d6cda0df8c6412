package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/model"
)

var evalFlags struct {
	// Input: a similarity matrix, or checkpoints that encode a split.
	sims        string
	checkpoints stringList
	data        string
	split       string
	pooling     string
	saveSims    string
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
}

func init() {
	register(&command{
		name:    "eval",
		summary: "evaluate retrieval: Recall@1/5/10, medr, meanr, rsum and NDCG (ROUGE-L, SPICE), as in the TERAN paper",
		usage:   "(--sims SIMS.npy | --checkpoint CKPT [--checkpoint CKPT2 ...] --data DIR) [--protocol 1k|5k|all] [flags]",
		examples: `  xmr eval --checkpoint runs/teran/best-rsum.safetensors --data world --split test
  xmr eval --checkpoint runs/teran/best-rsum.safetensors --data world --split testall --protocol 1k
  xmr eval --checkpoint runs/a/best-rsum.safetensors --checkpoint runs/b/best-rsum.safetensors --data world   # ensemble
  xmr eval --checkpoint runs/tern/best-rsum.safetensors --data world --pooling MrSw   # "TERN MrSw Test"
  xmr eval --sims sims_5k.npy --protocol 5k
  xmr eval --sims sims_5k.npy --protocol 1k --relevance coco-test-rougeL.npy --relevance-spice coco-test-spice.npy
  xmr eval --sims sims_f30k.npy --protocol all --relevance f30k-rouge.bin --json | jq .rsum`,
		setFlags: func(fs *flag.FlagSet) {
			fs.StringVar(&evalFlags.sims, "sims", "", "similarity matrix `SIMS.npy`: images x captions (5 per image), float32 or float64")
			fs.Var(&evalFlags.checkpoints, "checkpoint", "model checkpoint `CKPT` (repeat for an ensemble: the similarities are averaged)")
			fs.StringVar(&evalFlags.data, "data", "", "dataset directory (precomp layout) for --checkpoint")
			fs.StringVar(&evalFlags.split, "split", "test", "split of --data to evaluate")
			fs.StringVar(&evalFlags.pooling, "pooling", "", "override the scoring: global (CLS cosine), MrSw, MwSr, Symm or MrAvgw")
			fs.StringVar(&evalFlags.saveSims, "save-sims", "", "write the (ensemble) similarity matrix to `SIMS.npy`")
			fs.StringVar(&evalFlags.out, "out", "", "also write every metric as JSON to `FILE.json`")
			fs.BoolVar(&evalFlags.noNDCG, "no-ndcg", false, "with --checkpoint, do not compute ROUGE-L/SPICE relevance for NDCG when no relevance file is given")
			fs.StringVar(&evalFlags.relevance, "relevance", "", "ROUGE-L relevance matrix `REL.bin` (raw float32, captions x images, as from \"xmr relevance\" or TERAN) for NDCG")
			fs.StringVar(&evalFlags.relevanceSpice, "relevance-spice", "", "SPICE relevance matrix `REL.bin` (same layout) for NDCG")
			fs.StringVar(&evalFlags.protocol, "protocol", "all", "1k (folds of 1000 images, averaged), 5k (5000 images at once) or all (the matrix as is)")
			fs.IntVar(&evalFlags.ndcgP, "ndcg-p", eval.DefaultNDCGAt, "NDCG cut-off p")
			fs.BoolVar(&evalFlags.ndcgNonZeroI2T, "ndcg-nonzero-i2t", false, "average image-to-text NDCG over non-zero values only, as the official TERAN code does")
			fs.BoolVar(&evalFlags.json, "json", false, "print all metrics as one JSON object")
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
	var sims *eval.Matrix
	var extra func(*eval.Options) error
	source := evalFlags.sims
	switch {
	case evalFlags.sims != "" && len(evalFlags.checkpoints) > 0:
		return usageErrorf("give --sims or --checkpoint, not both")
	case evalFlags.sims != "":
		if sims, err = eval.ReadNPY(evalFlags.sims); err != nil {
			return err
		}
	case len(evalFlags.checkpoints) > 0:
		if evalFlags.data == "" {
			return usageErrorf("--checkpoint needs --data DIR")
		}
		var split *data.Split
		var align *alignResult
		sims, split, align, err = checkpointSims(ctx, evalFlags.checkpoints, evalFlags.data, evalFlags.split, evalFlags.pooling)
		if err != nil {
			return err
		}
		defer split.Close()
		source = evalFlags.data + " " + evalFlags.split
		if align != nil && !evalFlags.json {
			defer fmt.Fprintf(os.Stdout, "word-region alignment accuracy: %.1f%% of %d grounded words\n", 100*align.acc, align.n)
		}
		if evalFlags.relevance == "" && evalFlags.relevanceSpice == "" && !evalFlags.noNDCG {
			extra = func(o *eval.Options) error {
				rel, err := eval.RelevanceMatrices(ctx, split.Captions, split.CapsPerImage)
				o.Relevances = append(o.Relevances, rel...)
				return err
			}
		}
	default:
		return usageErrorf("--sims or --checkpoint is required")
	}
	if evalFlags.saveSims != "" {
		if err := atomicfile.Write(evalFlags.saveSims, func(w io.Writer) error { return eval.WriteNPY(w, sims) }); err != nil {
			return err
		}
	}
	return evaluateSims(source, sims, proto, extra)
}

// alignResult is the word-region alignment accuracy of a model on grounded
// data.
type alignResult struct {
	acc float64
	n   int
}

// checkpointSims encodes a split with each checkpoint and averages their
// similarity matrices (an ensemble when there are several).
func checkpointSims(ctx context.Context, ckpts []string, dir, splitName, pooling string) (*eval.Matrix, *data.Split, *alignResult, error) {
	split, err := data.LoadPrecomp(dir, splitName, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	grounding, err := data.LoadGrounding(dir, splitName)
	if err != nil {
		split.Close()
		return nil, nil, nil, err
	}
	var sum []float32
	var align *alignResult
	for _, path := range ckpts {
		m, f, err := model.Load(path)
		if err != nil {
			split.Close()
			return nil, nil, nil, err
		}
		f.Close()
		if m.Cfg.ImageModel.FeatDim != split.Images.D {
			split.Close()
			return nil, nil, nil, fmt.Errorf("%s: the model reads %d-d region features, %s/%s_ims.npy has %d", path, m.Cfg.ImageModel.FeatDim, dir, splitName, split.Images.D)
		}
		imgs, err := m.EncodeRegions(ctx, split.Images)
		if err != nil {
			split.Close()
			return nil, nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		txts, batches, err := m.EncodeCaptions(ctx, split.Captions)
		if err != nil {
			split.Close()
			return nil, nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		mode := m.ScoreMode()
		if pooling != "" {
			mode = pooling
		}
		s, err := model.ScoreMatrix(ctx, imgs, txts, mode)
		if err != nil {
			split.Close()
			return nil, nil, nil, err
		}
		if sum == nil {
			sum = s
		} else {
			for i, v := range s {
				sum[i] += v
			}
		}
		if len(grounding) > 0 && len(ckpts) == 1 {
			acc, n, err := eval.AlignmentAccuracy(model.AlignmentItems(imgs, txts, grounding, batches))
			if err != nil {
				split.Close()
				return nil, nil, nil, err
			}
			align = &alignResult{acc, n}
		}
	}
	for i := range sum {
		sum[i] /= float32(len(ckpts))
	}
	return &eval.Matrix{Rows: split.NumImages(), Cols: split.NumCaptions(), Data: sum}, split, align, nil
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// evaluateSims evaluates a similarity matrix (images x captions) from
// source (a file name, for errors) with the relevance files and options of
// the flags, and prints the report.
func evaluateSims(source string, sims *eval.Matrix, proto eval.Protocol, extra func(*eval.Options) error) error {
	opts := eval.Options{
		Protocol:         proto,
		CaptionsPerImage: eval.DefaultCaptionsPerImage,
		NDCGAt:           evalFlags.ndcgP,
		NonZeroI2T:       evalFlags.ndcgNonZeroI2T,
	}
	// Check the shape before reading relevance files sized from it.
	if err := eval.CheckSimilarity(sims, opts.CaptionsPerImage); err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	nImg, nCap := sims.Rows, sims.Cols
	for _, r := range []struct{ name, path string }{{"rouge-l", evalFlags.relevance}, {"spice", evalFlags.relevanceSpice}} {
		if r.path == "" {
			continue
		}
		m, err := eval.ReadRelevance(r.path, nCap, nImg)
		if err != nil {
			return err
		}
		opts.Relevances = append(opts.Relevances, eval.Relevance{Name: r.name, Matrix: m})
	}
	if extra != nil {
		if err := extra(&opts); err != nil {
			return err
		}
	}
	rep, err := eval.Evaluate(sims, opts)
	if err != nil {
		return err
	}
	if evalFlags.out != "" {
		if err := atomicfile.Write(evalFlags.out, rep.WriteJSON); err != nil {
			return err
		}
	}
	if evalFlags.json {
		return rep.WriteJSON(os.Stdout)
	}
	return rep.WriteTable(os.Stdout)
}

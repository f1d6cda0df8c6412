package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/outpath"
)

var fuseFlags struct {
	indexes   stringList
	weights   string
	out       string
	querybank string
	beta      float64
}

func init() {
	register(&command{
		name:    "fuse",
		summary: "make indexes of one collection, built with different models, one index that ranks by all of them",
		usage:   "--index DIR --index DIR2 [...] --weights W1,W2,... --out DIR",
		examples: `  xmr index --checkpoint runs/teran --data F8K --split dev --out idx/teran
  xmr index --checkpoint runs/seam-e --data F8K/global --split dev --out idx/seam-e
  xmr fuse --index idx/teran --index idx/seam-e --weights 1,0.2 --out idx/fused
  xmr search --index idx/fused --text "a dog runs through the grass"
  xmr fuse --index idx/teran --index idx/seam-e --weights 1,0.2 --querybank train-captions.txt --out idx/fused

A search of the fused index ranks by each member: every item one of them
ranks among its best 100 (at least the k asked for) is scored by all, each member's
scores of the query are standardised with their mean and deviation over
256 items of the collection, weighted and summed (xmr eval --weights
scores a split the same way, to choose the weights). The members must hold
the same images and captions in the same order; --out holds fusion.json,
which names them (relative to --out when they lie inside it).

With --querybank, every image is also scored for each caption of the file
(captions that are not about the collection: some of the training set's),
and a text search ranks each image by its fused score less a soft maximum
of those scores (an inverted softmax, docs/eval.md): an image that many
queries rank high whatever they say drops. The work is the bank's size
times a search of every image by every member.`,
		setFlags: func(fs *flag.FlagSet) {
			fuseFlags.indexes = nil
			fs.Var(&fuseFlags.indexes, "index", "member index `DIR` (repeat: two or more); the first gives the catalogue and the word-region alignments")
			fs.StringVar(&fuseFlags.weights, "weights", "", "the members' weights `W1,W2,...`, in the order of --index (default: 1 each)")
			fs.StringVar(&fuseFlags.out, "out", "", "`DIR` of the fused index (created if needed; a member may lie inside it)")
			fs.StringVar(&fuseFlags.querybank, "querybank", "", "`FILE` of captions, one a line, that are not about the collection: text searches subtract each image's soft maximum score for them")
			fs.Float64Var(&fuseFlags.beta, "querybank-beta", model.DefaultBankBeta, "--querybank's inverse temperature, per unit of standardised score")
		},
		run: runFuse,
	})
}

func runFuse(ctx context.Context, args []string) error {
	f := &fuseFlags
	if len(args) > 0 {
		return usageErrorf("unexpected arguments %q", args)
	}
	if len(f.indexes) < 2 {
		return usageErrorf("--index: %d given: a fusion needs two or more", len(f.indexes))
	}
	if f.out == "" {
		return usageErrorf("--out is required")
	}
	w := f.weights
	if w == "" {
		w = "1"
		for range f.indexes[1:] {
			w += ",1"
		}
	}
	weights, err := parseWeights(w, len(f.indexes))
	if err != nil {
		return usageErrorf("--weights: %v", err)
	}
	if !(f.beta > 0 && f.beta < 1e6) {
		return usageErrorf("--querybank-beta %v: want a number > 0", f.beta)
	}
	var bank []string
	if f.querybank != "" {
		if bank, err = readQueryBank(f.querybank); err != nil {
			return err
		}
	}
	// --out holds only fusion.json and the query bank's file of the
	// command's: a member may lie in
	// it, --out may not be or lie in a member.
	var inputs []outpath.Input
	for _, dir := range f.indexes {
		inputs = append(inputs, outpath.Input{Flag: "--index", Path: dir})
	}
	if f.querybank != "" {
		inputs = append(inputs, outpath.Input{Flag: "--querybank", Path: f.querybank})
	}
	if err := checkOutputs(inputs, []outpath.Output{{Flag: "--out", Path: f.out, Kind: outpath.Dir, Writes: []string{index.FusionFile, index.QueryBankFile}}}); err != nil {
		return err
	}
	out, err := filepath.Abs(f.out)
	if err != nil {
		return err
	}
	members := make([]index.FusionMember, len(f.indexes))
	for k, dir := range f.indexes {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		if rel, err := filepath.Rel(out, abs); err == nil && filepath.IsLocal(rel) {
			abs = rel // inside --out: the fused index moves as one directory
		}
		members[k] = index.FusionMember{Dir: abs, Weight: weights[k]}
	}
	if err := index.WriteFusion(ctx, out, members); err != nil {
		return err
	}
	if bank != nil {
		if err := setQueryBank(ctx, out, bank, f.beta, ""); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "fused %d indexes into %s, with a query bank of %d captions\n", len(members), f.out, len(bank))
		return nil
	}
	fmt.Fprintf(stdout, "fused %d indexes into %s\n", len(members), f.out)
	return nil
}

// readQueryBank reads a file of query-bank captions (xmr fuse --querybank,
// xmr eval --querybank-captions): one caption a line, blank lines
// skipped, at least one.
func readQueryBank(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("query bank: %w", err)
	}
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("query bank %s: not UTF-8 text: want one caption a line", path)
	}
	var caps []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			caps = append(caps, line)
		}
	}
	if len(caps) == 0 {
		return nil, fmt.Errorf("query bank %s: no caption: want one a line", path)
	}
	return caps, nil
}

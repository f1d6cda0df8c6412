package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/outpath"
)

var fuseFlags struct {
	indexes stringList
	weights string
	out     string
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

A search of the fused index ranks by each member: every item one of them
ranks among its best 100 (at least the k asked for) is scored by all, each member's
scores of the query are standardised with their mean and deviation over
256 items of the collection, weighted and summed (xmr eval --weights
scores a split the same way, to choose the weights). The members must hold
the same images and captions in the same order; --out holds fusion.json,
which names them (relative to --out when they lie inside it).`,
		setFlags: func(fs *flag.FlagSet) {
			fuseFlags.indexes = nil
			fs.Var(&fuseFlags.indexes, "index", "member index `DIR` (repeat: two or more); the first gives the catalogue and the word-region alignments")
			fs.StringVar(&fuseFlags.weights, "weights", "", "the members' weights `W1,W2,...`, in the order of --index (default: 1 each)")
			fs.StringVar(&fuseFlags.out, "out", "", "`DIR` of the fused index (created if needed; a member may lie inside it)")
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
	// --out holds only fusion.json of the command's: a member may lie in
	// it, --out may not be or lie in a member.
	var inputs []outpath.Input
	for _, dir := range f.indexes {
		inputs = append(inputs, outpath.Input{Flag: "--index", Path: dir})
	}
	if err := checkOutputs(inputs, []outpath.Output{{Flag: "--out", Path: f.out, Kind: outpath.Dir, Writes: []string{index.FusionFile}}}); err != nil {
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
	fmt.Fprintf(stdout, "fused %d indexes into %s\n", len(members), f.out)
	return nil
}

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/text"
	"github.com/xmr-project/xmr/weaviate"
)

var searchFlags struct {
	index      string
	text       string
	image      string
	k          int
	pooling    string
	explain    bool
	json       bool
	exact      bool
	int8       bool
	rerank     int
	candidates int
	probes     int
	weaviate   string
	imageFile  string
	models     string
	maxPixels  int64
}

func init() {
	register(&command{
		name:    "search",
		summary: "search an index: the images a sentence describes (--text), or the captions of an image (--image)",
		usage:   "--index INDEX (--text \"QUERY\" | --image ID | --image-file PHOTO) [-k 10] [--explain] [--json]",
		examples: `  xmr search --index world.idx --text "a red circle left of a blue square" -k 5
  xmr search --index world.idx --text "a red circle left of a blue square" --explain   # each word's best region
  xmr search --index world.idx --image synth-0000042 -k 5
  xmr search --index coco.idx --image-file photo.jpg -k 5   # a new image: its features extracted now (docs/extract.md)
  xmr search --index world.idx --text "two green stars" --json | jq '.results[0].image.id'
  xmr search --index world.wv --text "two green stars" --pooling MwSr --candidates 500   # a Weaviate-backed index

An index made with xmr index --backend weaviate is searched in Weaviate:
text-to-image MrSw is Weaviate's maxSim search itself; the other scorings
and image-to-text fetch --candidates items (0: max(10k, 100)) from
Weaviate by maxSim and re-rank them exactly (docs/weaviate.md). --exact and
--rerank apply to the local index only.`,
		setFlags: func(fs *flag.FlagSet) {
			fs.StringVar(&searchFlags.index, "index", "", "index `DIR` made by xmr index")
			fs.StringVar(&searchFlags.text, "text", "", "find the images this sentence describes")
			fs.StringVar(&searchFlags.image, "image", "", "find the captions that describe the indexed image with this `ID`")
			fs.StringVar(&searchFlags.imageFile, "image-file", "", "find the captions that describe a new image, this JPEG or PNG `FILE` (local index of a model trained on xmr extract's features)")
			fs.StringVar(&searchFlags.models, "models", "", "with --image-file: `DIR` caching the detector's weights (default $XMR_MODELS, else ~/.cache/xmr)")
			fs.Int64Var(&searchFlags.maxPixels, "max-pixels", extract.DefaultMaxPixels, "with --image-file: refuse an image whose header declares more pixels than this")
			fs.IntVar(&searchFlags.k, "k", 10, "number of results")
			fs.StringVar(&searchFlags.pooling, "pooling", "", "override the model's scoring: global, order, MrSw, MwSr, Symm or MrAvgw")
			addCompatRefusal(fs, &searchCompat)
			fs.BoolVar(&searchFlags.explain, "explain", false, "show, for each result, every word's best region and its cosine")
			fs.BoolVar(&searchFlags.json, "json", false, "print the results as one JSON object")
			fs.BoolVar(&searchFlags.exact, "exact", false, "score every item exactly, with its float32 vectors (default: scores estimated on compressed codes, the best --rerank scored again exactly); an index built compressed has none (rebuild it with xmr index --keep-float32)")
			fs.BoolVar(&searchFlags.int8, "int8", false, "estimate on the int8 codes instead of the 4-bit PQ codes (not on an index built compressed, which has neither)")
			fs.IntVar(&searchFlags.rerank, "rerank", 0, "how many of the best estimates to score again exactly before the best k are returned (0: max(10k, 300) after 4-bit PQ codes, max(10k, 100) after the others; -1: none)")
			fs.IntVar(&searchFlags.candidates, "candidates", 0, fmt.Sprintf("local index: prune to N candidates before the fine-grained scoring, those the inverted file rates best (global scorings, and indexes without one: those closest by global vector) (0: %d when the index has more than %d items, else all; -1: never); Weaviate-backed index: the N candidates re-ranked exactly (0: max(10k, 100))", index.AutoCandidates, index.AutoPruneItems))
			fs.IntVar(&searchFlags.probes, "probes", 0, fmt.Sprintf("local index, when pruning: how many cells of the inverted file each query vector probes (0: %d)", index.AutoProbes))
			fs.StringVar(&searchFlags.weaviate, "weaviate-url", "", "Weaviate-backed index: ask this server `URL` (another node of the cluster) instead of the one in its weaviate.json")
		},
		run: runSearch,
	})
}

// searchOutput is what --json prints.
type searchOutput struct {
	Query   string        `json:"query"`
	Mode    string        `json:"mode"` // "text-to-image" or "image-to-text"
	Scoring model.Scoring `json:"scoring"`
	// Fusion lists the members of a fused index (index.Fusion), whose
	// scores the results' are; Scoring is then the first member's.
	Fusion []fusionMember `json:"fusion,omitempty"`
	// QueryBank, on a text search of a fused index with a query bank
	// (index.Fusion.SetQueryBank), says that the scores are the fused
	// scores less each image's offset under its captions.
	QueryBank *queryBankOutput `json:"querybank,omitempty"`
	Results   []index.Result   `json:"results"`
	Millis    float64          `json:"ms"`
}

// queryBankOutput describes a fused index's query bank in search's output.
type queryBankOutput struct {
	Captions int     `json:"captions"`
	Beta     float64 `json:"beta"`
}

// fusionMember describes a member of a fused index in search's output.
type fusionMember struct {
	Index   string        `json:"index"`
	Model   string        `json:"model"`
	Scoring model.Scoring `json:"scoring"`
	Weight  float32       `json:"weight"`
}

// fusionMembers describes the members of ix when it is a fusion.
func fusionMembers(ix index.Searcher) []fusionMember {
	fu, ok := ix.(*index.Fusion)
	if !ok {
		return nil
	}
	var out []fusionMember
	for k, m := range fu.Members() {
		info := m.ModelInfo()
		out = append(out, fusionMember{Index: m.Dir(), Model: info.Name, Scoring: info.Scoring, Weight: fu.Weights()[k]})
	}
	return out
}

func runSearch(ctx context.Context, args []string) error {
	f := searchFlags
	if len(args) > 0 {
		return usageErrorf("unexpected arguments %q (quote the query: --text \"a red circle\")", args)
	}
	if err := refuseCompat("search", searchCompat); err != nil {
		return err
	}
	switch {
	case f.index == "":
		return usageErrorf("--index is required")
	case btoi(f.text != "")+btoi(f.image != "")+btoi(f.imageFile != "") != 1:
		return usageErrorf("give --text or --image (an indexed image's id) or --image-file (a new image), one of them")
	case f.text != "" && text.Blank(f.text):
		return usageErrorf("--text %q: %s: give a sentence describing an image", f.text, blankText(f.text))
	case f.k <= 0:
		return usageErrorf("-k must be positive, is %d", f.k)
	case f.rerank < -1:
		return usageErrorf("--rerank must be positive, 0 (the default) or -1 (none), is %d", f.rerank)
	case f.candidates < -1:
		return usageErrorf("--candidates must be positive, 0 (automatic) or -1 (never prune), is %d", f.candidates)
	case f.probes < 0:
		return usageErrorf("--probes must be positive or 0 (the default), is %d", f.probes)
	}
	opts := &index.SearchOptions{K: f.k, Explain: f.explain, Exact: f.exact, Int8: f.int8, Rerank: f.rerank, Candidates: f.candidates, Probes: f.probes}
	if f.pooling != "" {
		s, err := model.ParseScoring(f.pooling)
		if err != nil {
			return usageErrorf("--pooling: %v", err)
		}
		opts.Scoring = s
	}
	ix, err := openIndex(ctx, f.index, f.weaviate)
	if err != nil {
		return err
	}
	defer ix.Close()
	out := searchOutput{Scoring: ix.ModelInfo().Scoring, Fusion: fusionMembers(ix)}
	if opts.Scoring != "" {
		out.Scoring = opts.Scoring
	}
	if f.text != "" {
		if _, err := ix.Model(); err != nil { // load it before the clock starts
			return err
		}
	}
	start := time.Now()
	if f.text != "" {
		out.Query, out.Mode = f.text, "text-to-image"
		out.Results, err = ix.SearchText(ctx, f.text, opts)
		if fu, ok := ix.(*index.Fusion); ok {
			if n, beta := fu.QueryBank(); n > 0 {
				out.QueryBank = &queryBankOutput{Captions: n, Beta: beta}
			}
		}
	} else if f.imageFile != "" {
		out.Query, out.Mode = f.imageFile, "image-to-text"
		out.Results, err = searchImageFile(ctx, ix, f.index, f.imageFile, f.models, extract.Limits{MaxPixels: f.maxPixels}, opts)
	} else {
		out.Query, out.Mode = f.image, "image-to-text"
		out.Results, err = ix.SearchImage(ctx, f.image, opts)
	}
	if err != nil {
		return err
	}
	out.Millis = float64(time.Since(start).Microseconds()) / 1000
	if f.explain && len(out.Results) > 0 && !explained(out.Results) {
		slog.Warn("--explain: no word-region alignment to show: the index's model encodes global vectors only", "model", ix.ModelInfo().Name)
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		return enc.Encode(out)
	}
	return printResults(out)
}

// openIndex opens the index in dir: a Weaviate-backed one (weaviate.json;
// weaviateURL, if set, replaces its server's address), a fusion of local
// ones (index.FusionFile) or a local one.
func openIndex(ctx context.Context, dir, weaviateURL string) (index.Searcher, error) {
	if weaviate.IsIndex(dir) {
		return weaviate.Open(ctx, dir, &weaviate.OpenOptions{URL: weaviateURL})
	}
	if weaviateURL != "" {
		return nil, usageErrorf("--weaviate-url: %s is not a Weaviate-backed index (no %s)", dir, weaviate.ManifestFile)
	}
	if index.IsFusion(dir) {
		return index.OpenFusion(ctx, dir, nil)
	}
	return index.Open(ctx, dir, nil)
}

// printResults writes the results as a table, with the alignments under
// each result when explained.
func printResults(o searchOutput) error {
	scoring := string(o.Scoring) + " scoring"
	if len(o.Fusion) > 0 {
		var parts []string
		for _, m := range o.Fusion {
			parts = append(parts, fmt.Sprintf("%g x %s (%s)", m.Weight, m.Model, m.Scoring))
		}
		scoring = "fused scores: " + strings.Join(parts, " + ") + ", each standardised"
	}
	if o.QueryBank != nil {
		scoring += fmt.Sprintf(", less each image's offset under a query bank of %d captions", o.QueryBank.Captions)
	}
	fmt.Fprintf(stdout, "%s, %s, %d results in %.1f ms\n", o.Mode, scoring, len(o.Results), o.Millis)
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	for _, r := range o.Results {
		if r.Image != nil {
			path := r.Image.Path
			if path == "" {
				path = "-"
			}
			fmt.Fprintf(tw, "%d\t%.4f\t%s\t%s\n", r.Rank, r.Score, r.Image.ID, path)
		} else {
			fmt.Fprintf(tw, "%d\t%.4f\t%s\t%s\n", r.Rank, r.Score, r.Caption.ImageID, r.Caption.Text)
		}
		for _, a := range r.Explain {
			box := ""
			if a.Box != nil {
				box = fmt.Sprintf("box %.2f %.2f %.2f %.2f", a.Box[0], a.Box[1], a.Box[2], a.Box[3])
			}
			fmt.Fprintf(tw, "\t\t  %s\tregion %d  cos %.3f  %s\n", a.Word, a.Region, a.Cosine, strings.TrimSpace(box))
		}
	}
	return tw.Flush()
}

// explained reports whether any result carries an explanation.
func explained(rs []index.Result) bool {
	for _, r := range rs {
		if len(r.Explain) > 0 {
			return true
		}
	}
	return false
}

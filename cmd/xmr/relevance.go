package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/eval"
	_ "github.com/xmr-project/xmr/eval/spice" // registers the "spice" metric
	"github.com/xmr-project/xmr/internal/infile"
	"github.com/xmr-project/xmr/outpath"
)

var relevanceFlags struct {
	metric   string
	captions string
	out      string
	perImage int
	workers  int
}

func init() {
	register(&command{
		name:    "relevance",
		summary: "compute an NDCG relevance matrix (ROUGE-L or SPICE between captions) in TERAN's raw float32 layout; resumable",
		usage:   "--metric rouge-l|spice --captions CAPS.txt --out REL.bin [--per-image 5]",
		examples: `  xmr relevance --metric rouge-l --captions data/coco_precomp/testall_caps.txt --out coco-testall-rouge.bin
  xmr relevance --metric spice --captions data/f30k_precomp/test_caps.txt --out f30k-test-spice.bin
  # interrupted (Ctrl-C)? run the same command again to continue`,
		setFlags: func(fs *flag.FlagSet) {
			fs.StringVar(&relevanceFlags.metric, "metric", "rouge-l", "relevance metric: "+strings.Join(eval.MetricNames(), ", "))
			fs.StringVar(&relevanceFlags.captions, "captions", "", "captions `CAPS.txt`, one per line, per-image consecutive lines per image")
			fs.StringVar(&relevanceFlags.out, "out", "", "output `REL.bin`: captions x images float32, little-endian, no header")
			fs.IntVar(&relevanceFlags.perImage, "per-image", eval.DefaultCaptionsPerImage, "captions per image")
			fs.IntVar(&relevanceFlags.workers, "workers", 0, "goroutines (default: all cores)")
		},
		run: runRelevance,
	})
}

func runRelevance(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected arguments %q", args)
	}
	if relevanceFlags.captions == "" || relevanceFlags.out == "" {
		return usageErrorf("--captions and --out are required")
	}
	if relevanceFlags.perImage <= 0 {
		return usageErrorf("--per-image must be > 0, got %d", relevanceFlags.perImage)
	}
	if err := checkWorkers(relevanceFlags.workers, true); err != nil {
		return err
	}
	if !slices.Contains(eval.MetricNames(), relevanceFlags.metric) {
		return usageErrorf("--metric %q: known metrics are %s", relevanceFlags.metric, strings.Join(eval.MetricNames(), ", "))
	}
	// A known metric that fails to start (SPICE on a broken $XMR_WORDNET)
	// is a runtime error, not a usage error.
	m, err := eval.LookupMetric(relevanceFlags.metric)
	if err != nil {
		return err
	}
	// The matrix grows in OUT.partial (with OUT.partial.json), which is
	// renamed to OUT at the end: OUT is a regular file, never a stream.
	out := relevanceFlags.out
	if err := checkOutputs([]outpath.Input{{Flag: "--captions", Path: relevanceFlags.captions}},
		[]outpath.Output{{Flag: "--out", Path: out, Writes: []string{out + ".partial", out + ".partial.json"}}}); err != nil {
		return err
	}
	caps, err := readCaptionLines(relevanceFlags.captions)
	if err != nil {
		return err
	}
	if len(caps) == 0 || len(caps)%relevanceFlags.perImage != 0 {
		return fmt.Errorf("%s: %d captions is not a positive multiple of %d per image", relevanceFlags.captions, len(caps), relevanceFlags.perImage)
	}
	nImg := len(caps) / relevanceFlags.perImage
	slog.Info("relevance", "metric", m.Name(), "captions", len(caps), "images", nImg, "out", relevanceFlags.out,
		"size_mb", int64(len(caps))*int64(nImg)*4>>20)
	start := time.Now()
	err = eval.ComputeRelevance(ctx, m, caps, relevanceFlags.perImage, relevanceFlags.out, eval.RelevanceOptions{Workers: relevanceFlags.workers})
	if err != nil {
		return err
	}
	slog.Info("relevance written", "out", relevanceFlags.out, "shape", fmt.Sprintf("%dx%d", len(caps), nImg), "elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

// readCaptionLines reads one caption per line. Only the line terminator
// ("\n" or "\r\n") is removed: the caption is otherwise kept as written,
// since ROUGE-L splits on single spaces and counts empty tokens. A blank
// caption (data.CheckCaption: nothing but spaces, control or invisible
// characters) is an error naming the line, as in every caption file.
func readCaptionLines(path string) ([]string, error) {
	f, err := infile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read captions: %w", err)
	}
	defer f.Close()
	var caps []string
	br := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := br.ReadString('\n')
		if len(line) > 0 {
			line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
			if err := data.CheckCaption(line); err != nil {
				return nil, fmt.Errorf("read captions %s: line %d: the caption %w; every line must hold one caption", path, len(caps)+1, err)
			}
			caps = append(caps, line)
		}
		if err == io.EOF {
			return caps, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read captions %s: %w", path, err)
		}
	}
}

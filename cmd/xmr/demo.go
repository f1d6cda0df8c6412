package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/synth"
	"github.com/xmr-project/xmr/text"
	"github.com/xmr-project/xmr/train"
	"github.com/xmr-project/xmr/viz"
)

var demoFlags struct {
	dir        string
	n          int
	timeBudget time.Duration
	config     string
	retrain    bool
}

func init() {
	register(&command{
		name:    "demo",
		summary: "the whole job on the built-in synthetic world: generate, train TERAN, evaluate, show alignments",
		usage:   "[flags]",
		examples: `  xmr demo                          # about 6 minutes on 2 cores; writes ./xmr-demo
  xmr demo --time-budget 15m        # train longer for better recall
  xmr demo --config tern-small      # the same with TERN
  xmr demo --config seam-e-small    # SEAM-E (the mean of each image's regions stands in for its global feature)

It generates a synthetic world (shapes with captions and ground truth) in
DIR/world, trains a small model in DIR/run, evaluates it on the test split
with the papers' metrics, and draws DIR/alignment-*.png (each word's best
region; not for SEAM, which aligns no words with regions) and
DIR/query-*.png (the top images for a caption).`,
		setFlags: func(fs *flag.FlagSet) {
			fs.StringVar(&demoFlags.dir, "dir", "xmr-demo", "working directory")
			fs.IntVar(&demoFlags.n, "n", 6000, "images in the synthetic world")
			fs.DurationVar(&demoFlags.timeBudget, "time-budget", 5*time.Minute, "training time")
			fs.StringVar(&demoFlags.config, "config", "teran-mrsw-small", "model config (a file or a built-in name)")
			fs.BoolVar(&demoFlags.retrain, "retrain", false, "train again even if DIR/run has a model")
		},
		run: runDemo,
	})
}

func runDemo(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected arguments %v", args)
	}
	f := demoFlags
	world := filepath.Join(f.dir, "world")
	run := filepath.Join(f.dir, "run")
	manifest, err := synth.LoadManifest(world)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(stdout, "    (the world in %s is unreadable, generating it again: %v)\n", world, err)
		}
		fmt.Fprintf(stdout, "1/4 generating a synthetic world of %d images in %s\n", f.n, world)
		if manifest, err = synth.Generate(ctx, world, synth.Config{N: f.n, Seed: 1, Dim: 256, Regions: 36, Noise: 0.1, Progress: true}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "1/4 using the synthetic world in %s\n", world)
	}
	best := filepath.Join(run, "best-rsum.safetensors")
	if _, err := os.Stat(best); err != nil || f.retrain {
		cfg, err := train.LoadConfig(f.config)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "2/4 training %s (%s) for %v in %s\n", f.config, cfg.Model.Name, f.timeBudget, run)
		res, err := train.Run(ctx, train.Options{Config: cfg, Data: data.Source{Path: world}, Out: run, TimeBudget: f.timeBudget, ValImages: 500, Overwrite: true})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "    %d iterations; training curves in %s\n", res.Iters, filepath.Join(run, "curves.png"))
	} else {
		fmt.Fprintf(stdout, "2/4 using the model in %s (--retrain to train again)\n", run)
	}

	fmt.Fprintf(stdout, "3/4 evaluating on the test split\n")
	m, cf, err := model.Load(best)
	if err != nil {
		return err
	}
	cf.Close()
	split, err := data.LoadPrecomp(world, "test", nil)
	if err != nil {
		return err
	}
	defer split.Close()
	grounding, err := data.LoadGrounding(world, "test")
	if err != nil {
		return err
	}
	rel, err := eval.RelevanceMatrices(ctx, split.Captions, split.CapsPerImage)
	if err != nil {
		return err
	}
	res, err := eval.EvaluateModels(ctx, []model.Model{m}, split, eval.ModelOptions{Options: eval.Options{Relevances: rel}, Grounding: grounding})
	if err != nil {
		return err
	}
	if err := res.Report.WriteTable(stdout); err != nil {
		return err
	}
	if res.Report.Alignment != nil {
		regions, _ := split.Images.Dims()
		fmt.Fprintf(stdout, "(alignment chance: about %.0f%%)\n", 100/float64(max(regions, 1)))
	}

	fmt.Fprintf(stdout, "4/4 drawing alignments and retrieval results in %s\n", f.dir)
	var files []string
	for k, c := range []int{0, 7, 13} {
		if c >= split.NumCaptions() {
			break
		}
		i := split.ImageOf(c)
		img, err := loadImage(world, split, i)
		if err != nil {
			fmt.Fprintf(stdout, "    (no PNG images to draw: %v)\n", err)
			break
		}
		if len(res.Images.Vecs) > 0 { // SEAM has no region or word vectors to align
			words := overlayWords(split, c, i, model.MatchWords(res.Images, i, res.Texts, c), grounding)
			path := filepath.Join(f.dir, fmt.Sprintf("alignment-%d.png", k+1))
			if err := viz.SavePNG(path, viz.AlignmentOverlay(img, split.Captions[c], words, 4)); err != nil {
				return err
			}
			files = append(files, path)
		}
		// The caption's top 5 images.
		column := make([]float32, split.NumImages())
		for j := range column {
			column[j] = res.Sims.At(j, c)
		}
		var cells []image.Image
		var labels []string
		var relevant []bool
		for _, h := range queryResults(column, i, 5) {
			im, err := loadImage(world, split, h.index)
			if err != nil {
				return err
			}
			cells = append(cells, im)
			labels = append(labels, fmt.Sprintf("#%d %.2f", h.rank, h.score))
			relevant = append(relevant, h.index == i)
		}
		path := filepath.Join(f.dir, fmt.Sprintf("query-%d.png", k+1))
		if err := viz.SavePNG(path, viz.ResultGrid(split.Captions[c], cells, labels, relevant, 2)); err != nil {
			return err
		}
		files = append(files, path)
	}
	if len(files) > 0 {
		fmt.Fprintf(stdout, "    wrote %s\n", strings.Join(files, ", "))
	}
	fmt.Fprintf(stdout, "\nNext, on the same world:\n")
	for _, args := range demoNext(best, world, manifest) {
		fmt.Fprintf(stdout, "  %s\n", shellJoin(args))
	}
	return nil
}

// demoNext returns the commands the demo suggests afterwards: only ones
// that work on the world m just made (TestDemoNextCommandsRun runs them),
// evaluating the checkpoint best on the test split and on all of testall,
// with the 1K and 5K protocols where testall has the images they need.
func demoNext(best, world string, m *synth.Manifest) [][]string {
	eval := []string{"xmr", "eval", "--checkpoint", best, "--data", world}
	out := [][]string{append(slices.Clone(eval), "--split", "test")}
	testall := 0
	for _, s := range m.Splits {
		if s.Name == "testall" {
			testall = s.Len
		}
	}
	if testall > 1000 {
		out = append(out, append(slices.Clone(eval), "--split", "testall"))
	}
	if testall >= 2000 && testall%1000 == 0 {
		out = append(out, append(slices.Clone(eval), "--split", "testall", "--protocol", "1k"))
	}
	if testall == 5000 {
		out = append(out, append(slices.Clone(eval), "--split", "testall", "--protocol", "5k"))
	}
	return out
}

// queryResult is one image of a query's result grid.
type queryResult struct {
	index, rank int // rank counts from 1
	score       float32
}

// queryResults returns the k best images by score, and when the
// ground-truth image truth is not among them, it too, last, with its rank:
// the grid always shows where the right image came.
func queryResults(scores []float32, truth, k int) []queryResult {
	var out []queryResult
	found := false
	for r, h := range model.TopK(scores, k) {
		out = append(out, queryResult{index: h.Index, rank: r + 1, score: h.Score})
		found = found || h.Index == truth
	}
	if !found && truth >= 0 && truth < len(scores) {
		rank := 1
		for j, s := range scores {
			if s > scores[truth] || (s == scores[truth] && j < truth) {
				rank++
			}
		}
		out = append(out, queryResult{index: truth, rank: rank, score: scores[truth]})
	}
	return out
}

// loadImage reads the PNG of image i of a synthetic split.
func loadImage(world string, s *data.Split, i int) (image.Image, error) {
	var errs []error
	for _, sub := range []string{s.Name, "testall"} {
		img, err := viz.LoadPNG(filepath.Join(world, "images", sub, s.ID(i)+".png"))
		if err == nil {
			return img, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// overlayWords turns the word matches of caption c in image i into the
// overlay's labelled boxes (in pixels), leaving out stop words and
// punctuation, and marks each right or wrong where ground truth exists.
func overlayWords(s *data.Split, c, i int, matches []model.WordMatch, grounding []data.Grounding) []viz.WordRegion {
	fields := strings.Fields(s.Captions[c])
	truth := map[int][]int{}
	if c < len(grounding) {
		for _, w := range grounding[c].Words {
			truth[w.Index] = w.Correct()
		}
	}
	size := [2]float32{1, 1}
	if s.Sizes != nil {
		size = s.Sizes[i]
	}
	var out []viz.WordRegion
	for _, mw := range matches {
		if mw.Word >= len(fields) || text.IsStopWord(fields[mw.Word]) || !hasLetter(fields[mw.Word]) {
			continue
		}
		b5 := s.Images.Box5(i, mw.Region)
		wr := viz.WordRegion{Word: fields[mw.Word], Score: mw.Cosine, Box: [4]float32{b5[0] * size[0], b5[1] * size[1], b5[2] * size[0], b5[3] * size[1]}}
		if corr, ok := truth[mw.Word]; ok {
			right := slices.Contains(corr, mw.Region)
			wr.Correct = &right
		}
		out = append(out, wr)
	}
	return out
}

func hasLetter(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return true
		}
	}
	return false
}

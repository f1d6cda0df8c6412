package main

import (
	"context"
	"encoding/json"
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

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/internal/infile"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/outpath"
	"github.com/xmr-project/xmr/synth"
	"github.com/xmr-project/xmr/text"
	"github.com/xmr-project/xmr/train"
	"github.com/xmr-project/xmr/viz"
)

// demoFlags holds xmr demo's flags as parsed, demoFlagSet the flag set
// (which says which were given: --photos changes the defaults of the
// others).
var (
	demoFlags   demoOptions
	demoFlagSet *flag.FlagSet
)

// demoOptions are xmr demo's options. runDemo resolves them from the
// flags once (--photos changes the defaults of others) and passes them to
// the pipeline's stages.
type demoOptions struct {
	dir        string
	n          int
	timeBudget time.Duration
	totalTime  time.Duration
	maxIters   int
	config     string
	retrain    bool
	fresh      bool
	noServe    bool
	addr       string
	photos     string
}

// The demo's world and training schedule, chosen together with
// configs/teran-mrsw-demo.yaml (whose comment gives the measurements) so
// that a fresh demo learns as much on a slow CPU as on a fast one: it
// trains for a number of iterations, not for a time, and these are few
// and cheap enough to take minutes on 2 cores.
const (
	// demoDim and demoRegions size the world's region features: 128-d
	// features in 16 region slots (12 to 16 valid regions an image; a
	// scene has 2 to 6 objects).
	demoDim     = 128
	demoRegions = 16
	// demoIters is the default number of training iterations.
	demoIters = 600
	// demoConfig is the default config, the one demoIters and
	// demoIterSeconds are measured for.
	demoConfig = "teran-mrsw-demo"
	// demoIterSeconds is the seconds a training iteration of demoConfig
	// took on 2 idle cores of an Intel Xeon with AVX-512 (600 iterations
	// in 1m9s with OpenBLAS's SkylakeX kernels, 2026-11-28;
	// docs/benchmarks.md, "demo"), for the time the demo announces. Other
	// CPUs take more or less, and round differently, so the figures differ
	// in their last digits.
	demoIterSeconds = 0.115
)

func init() {
	register(&command{
		name:    "demo",
		summary: "the whole job on a synthetic world: generate it, train TERAN, evaluate, index, and serve the search page",
		usage:   "[flags]",
		examples: `  xmr demo                             # about 2 minutes on 2 idle cores of an Intel Xeon, then serves http://127.0.0.1:8080/
  xmr demo --no-serve                  # stop after the evaluation and the index (scripts, CI)
  xmr demo --max-iters 2000            # train longer for better recall (a model of other iterations is trained again)
  xmr demo --time-budget 1m            # stop training after a minute even if iterations remain
  xmr demo --fresh                     # make the world, the model and the index again
  xmr demo --config tern-small         # the same with TERN
  xmr demo --config seam-e-small       # SEAM-E (the mean of each image's regions stands in for its global feature)

It generates a synthetic world (shapes with captions, ground truth and PNG
images) in DIR/world, trains a small model in DIR/run (with a progress
bar; for a number of iterations, not a time, so that it learns as much on
a slow CPU as on a fast one), evaluates it on the test split with the
papers' metrics, draws DIR/alignment-*.png (each word's best region; not
for SEAM, which aligns no words with regions) and DIR/query-*.png (the
top images for a caption), builds an index of the test split in
DIR/index, and serves it: a page to search the images by sentence and see
each word's region. A second run reuses the world, the model and the
index that the first one made.`,
		setFlags: func(fs *flag.FlagSet) {
			fs.StringVar(&demoFlags.dir, "dir", "xmr-demo", "working directory")
			fs.IntVar(&demoFlags.n, "n", 6000, "images in the synthetic world (at least 200)")
			fs.DurationVar(&demoFlags.timeBudget, "time-budget", 0, "stop training after this much time even if iterations remain (0: no limit)")
			fs.IntVar(&demoFlags.maxIters, "max-iters", demoIters, "training iterations (0: the time budget alone)")
			fs.DurationVar(&demoFlags.totalTime, "total-time", 0, fmt.Sprintf("aim to be ready (everything but serving) this long after the start: the main model trains last, for what is left once %s are kept for the evaluation and the index, at most --max-iters (0: no aim; --photos: %s)", demoReserve, photoTotalTime))
			fs.StringVar(&demoFlags.config, "config", demoConfig, "model config (a file or a built-in name; teran-mrsw-demo is a small TERAN with a schedule for a few hundred iterations)")
			fs.BoolVar(&demoFlags.retrain, "retrain", false, "train again even if DIR/run has a model (and index again)")
			fs.BoolVar(&demoFlags.fresh, "fresh", false, "make everything again: the world, the model and the index")
			fs.BoolVar(&demoFlags.noServe, "no-serve", false, "stop after the evaluation and the index; do not serve")
			fs.StringVar(&demoFlags.addr, "addr", "127.0.0.1:8080", "address to serve the page on (host:port; port 0 picks a free one)")
			fs.StringVar(&demoFlags.photos, "photos", "", "run on real photos instead: a `DIR` holding a Karpathy split file (dataset_flickr8k.json, ...) and its photos; the defaults become --dir xmr-photos --config "+photoConfig+fmt.Sprintf(" --max-iters %d --total-time %s", photoIters, photoTotalTime))
			demoFlagSet = fs
		},
		run: runDemo,
	})
}

// demoWrites are what the demo writes into its directory; photoDemoWrites
// what the photo demo writes into its own.
var (
	demoWrites      = []string{"world", "run", "index", demoConfigFile, "alignment-*.png", "query-*.png"}
	photoDemoWrites = append([]string{"features", "run", "index", demoConfigFile, fusedIndex, "alignment-*.png", "query-*.png"}, partnerWrites()...)
)

// demoSteps is how many steps the demo prints.
const demoSteps = 6

// step prints the heading of demo step i.
func step(i int, format string, args ...any) {
	fmt.Fprintf(stdout, "%d/%d %s\n", i, demoSteps, fmt.Sprintf(format, args...))
}

func runDemo(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected arguments %v", args)
	}
	o := demoFlags
	set := givenFlags(demoFlagSet)
	if o.photos != "" {
		if !set["dir"] {
			o.dir = "xmr-photos"
		}
		if !set["config"] {
			o.config = photoConfig
		}
		if !set["max-iters"] {
			o.maxIters = photoIters
		}
		if !set["total-time"] {
			o.totalTime = photoTotalTime
		}
		if set["n"] {
			return usageErrorf("--n sizes the synthetic world; --photos brings its own photos")
		}
	}
	switch {
	case o.n < 200:
		return usageErrorf("--n must be at least 200 (a test split of at least 40 images), is %d", o.n)
	case o.maxIters < 0:
		return usageErrorf("--max-iters must be positive (or 0 with --time-budget), is %d", o.maxIters)
	case o.timeBudget < 0:
		return usageErrorf("--time-budget must be positive or 0 (no limit), is %v", o.timeBudget)
	case o.totalTime < 0:
		return usageErrorf("--total-time must be positive or 0 (no aim), is %v", o.totalTime)
	case o.timeBudget == 0 && o.maxIters == 0:
		return usageErrorf("--max-iters 0 trains until --time-budget, which is 0: give one of them")
	}
	var src demoSource = &worldDemo{dir: filepath.Join(o.dir, "world"), n: o.n, fresh: o.fresh}
	inputs := []outpath.Input{{Flag: "--config", Path: o.config}}
	writes := demoWrites
	if o.photos != "" {
		src = &photoDemo{photos: o.photos, dir: o.dir, feats: filepath.Join(o.dir, "features"), fresh: o.fresh}
		inputs = append(inputs, outpath.Input{Flag: "--photos", Path: o.photos})
		writes = photoDemoWrites
	}
	if err := checkOutputs(inputs, []outpath.Output{{Flag: "--dir", Path: o.dir, Kind: outpath.Dir, Writes: writes}}); err != nil {
		return err
	}
	return demo(ctx, o, src)
}

// demoSource is the first stage of the demo: the data it trains on,
// evaluates, draws, indexes and serves. The stages after it are the same
// for every source (demo): a synthetic world (worldDemo) or photos with
// their captions (photoDemo).
type demoSource interface {
	// prepare makes the data, or finds it made (step 1), for a training
	// with cfg; made says it was made anew, so that a model trained
	// before is trained again.
	prepare(ctx context.Context, cfg train.Config) (made bool, err error)
	// trainOptions returns the options of a training on the data (its
	// Data, ValImages and Detector; the demo sets the rest).
	trainOptions() train.Options
	// evaluated names the split that the demo evaluates and indexes
	// (step 3's heading).
	evaluated() string
	// heldOut loads that split, as the model of checkpoint cf reads it,
	// with the options of its evaluation; release releases what it
	// loaded.
	heldOut(ctx context.Context, cf *checkpoint.File) (*data.Split, eval.ModelOptions, error)
	release() error
	// chance returns the line printed under the evaluation's table.
	chance(split *data.Split, res *eval.ModelResult) string
	// draw draws alignments and retrieval results into dir (step 4).
	draw(dir string, split *data.Split, res *eval.ModelResult) error
	// index writes the held-out split's index into dir from the
	// evaluation's embeddings (step 5), with what the model of cf needs
	// to read a new image.
	index(ctx context.Context, dir string, m model.Model, cf *checkpoint.File, split *data.Split, res *eval.ModelResult, rebuild bool) error
	// next returns the commands the demo suggests afterwards, and the
	// folder of images the page shows.
	next(best, indexDir string, split *data.Split) (commands [][]string, images string)
	// partner returns the global-vector model that the demo fuses with
	// the main one (demo_fusion.go), or nil.
	partner() *demoPartner
}

// demo runs the demo's pipeline on src, as o says: the data (step 1),
// training or the model trained before (2), evaluation (3), drawings (4),
// the index (5) and the page (6).
func demo(ctx context.Context, o demoOptions, src demoSource) error {
	start := time.Now()
	cfg, err := train.LoadConfig(o.config)
	if err != nil {
		return err
	}
	made, err := src.prepare(ctx, cfg)
	if err != nil {
		return err
	}

	// The partners train first: they stop by themselves, so the main
	// model, trained last, can have what is left of --total-time.
	partner := src.partner()
	if partner != nil {
		if err := trainPartner(ctx, o, partner, o.retrain || o.fresh || made); err != nil {
			return err
		}
	}

	run := filepath.Join(o.dir, "run")
	best := filepath.Join(run, "best-rsum.safetensors")
	marker := filepath.Join(o.dir, demoConfigFile)
	trained := demoMarker(cfg, o.maxIters, o.timeBudget, o.totalTime) // before train.Run, which may fill in what the data says
	reuse, why := demoReuse(best, marker, cfg, trained)
	if !reuse || o.retrain || o.fresh || made {
		// The marker names the model in run only once its training ends.
		if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		budget, note := demoBudget(o.timeBudget, o.totalTime, time.Since(start))
		step(2, "training %s (%s) %s in %s", o.config, cfg.Model.Name, demoSchedule(o.maxIters, budget, o.config), run)
		if note != "" {
			fmt.Fprintf(stdout, "    %s\n", note)
		}
		if wv := cfg.TextModel.WordVectors; wv != "" {
			fmt.Fprintf(stdout, "    its word embeddings start from the pretrained vectors of %s\n", wv)
		}
		if why != "" && !o.retrain && !o.fresh && !made {
			fmt.Fprintf(stdout, "    %s\n", why)
		}
		opts := src.trainOptions()
		opts.Config, opts.Out, opts.TimeBudget, opts.MaxIters, opts.Overwrite = cfg, run, budget, o.maxIters, true
		if err := demoTrain(ctx, opts, marker, trained); err != nil {
			return err
		}
	} else {
		step(2, "using the model in %s (--retrain to train again)", run)
	}

	m, cf, err := model.Load(best)
	if err != nil {
		return err
	}
	defer cf.Close()
	step(3, "evaluating on %s", src.evaluated())
	split, mo, err := src.heldOut(ctx, cf)
	defer src.release()
	if err != nil {
		return err
	}
	if mo.Relevances, err = eval.RelevanceMatrices(ctx, split.Captions, split.CapsPerImage); err != nil {
		return err
	}
	res, err := eval.EvaluateModels(ctx, []model.Model{m}, split, mo)
	if err != nil {
		return err
	}
	if err := res.Report.WriteTable(stdout); err != nil {
		return err
	}
	if line := src.chance(split, res); line != "" {
		fmt.Fprintln(stdout, line)
	}
	var fu *fused
	if partner != nil {
		if fu, err = evaluateFusion(ctx, o, partner, m, split, res, mo); err != nil {
			return err
		}
		defer fu.close()
	}

	if err := src.draw(o.dir, split, res); err != nil {
		return err
	}
	indexDir := filepath.Join(o.dir, "index")
	if err := src.index(ctx, indexDir, m, cf, split, res, o.fresh || o.retrain); err != nil {
		return err
	}
	if fu != nil {
		if indexDir, err = indexFusion(ctx, o.dir, indexDir, fu, o.fresh || o.retrain); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "    ready in %s\n", time.Since(start).Round(time.Second))

	commands, images := src.next(best, indexDir, split)
	for _, args := range commands {
		fmt.Fprintf(stdout, "  %s\n", commandLine(args))
	}
	if o.noServe {
		return nil
	}
	fmt.Fprintln(stdout)
	step(6, "serving the index")
	return serveIndex(ctx, indexDir, images, o.addr, firstCaption(split), nil, "")
}

// worldDemo is the demo's synthetic world (the default source): made in
// dir with n images, its test split held out, its PNGs drawn and shown.
type worldDemo struct {
	dir      string
	n        int
	fresh    bool
	manifest *synth.Manifest
	// test is the test split (heldOut), grounding its ground truth,
	// which the evaluation scores the alignments against and the drawings
	// mark.
	test      *data.Split
	grounding []data.Grounding
}

func (w *worldDemo) prepare(ctx context.Context, _ train.Config) (bool, error) {
	m, made, err := demoWorld(ctx, w.dir, w.n, w.fresh)
	w.manifest = m
	return made, err
}

func (w *worldDemo) trainOptions() train.Options {
	return train.Options{Data: data.Source{Path: w.dir}, ValImages: 200}
}

func (w *worldDemo) evaluated() string { return "the test split" }

func (w *worldDemo) heldOut(ctx context.Context, _ *checkpoint.File) (*data.Split, eval.ModelOptions, error) {
	var err error
	if w.test, err = data.LoadPrecomp(ctx, w.dir, "test", nil); err != nil {
		return nil, eval.ModelOptions{}, err
	}
	if w.grounding, err = data.LoadGrounding(w.dir, "test"); err != nil {
		return nil, eval.ModelOptions{}, err
	}
	return w.test, eval.ModelOptions{Grounding: w.grounding}, nil
}

func (w *worldDemo) release() error { return w.test.Close() }

func (w *worldDemo) chance(split *data.Split, res *eval.ModelResult) string {
	if res.Report.Alignment == nil {
		return ""
	}
	regions, _ := split.Images.Dims()
	return fmt.Sprintf("(alignment chance: about %.0f%%)", 100/float64(max(regions, 1)))
}

func (w *worldDemo) draw(dir string, split *data.Split, res *eval.ModelResult) error {
	step(4, "drawing alignments and retrieval results in %s", dir)
	load := func(i int) (image.Image, error) { return loadImage(w.dir, split, i) }
	return drawExamples(dir, split, res, w.grounding, load, 4, 2, "no PNG images to draw")
}

// images returns the folder of the test split's PNGs, or "" when the
// world has none.
func (w *worldDemo) images(split *data.Split) string {
	if images := filepath.Join(w.dir, "images", split.Name); isDir(images) {
		return images
	}
	return ""
}

func (w *worldDemo) index(ctx context.Context, dir string, m model.Model, _ *checkpoint.File, split *data.Split, res *eval.ModelResult, rebuild bool) error {
	return writeDemoIndex(ctx, dir, m, split, collection(split, w.images(split)), res, rebuild, nil, nil)
}

func (w *worldDemo) partner() *demoPartner { return nil }

func (w *worldDemo) next(best, indexDir string, split *data.Split) ([][]string, string) {
	fmt.Fprintf(stdout, "\nNext, on the same world:\n")
	images := w.images(split)
	out := demoNext(best, w.dir, w.manifest)
	out = append(out, []string{"xmr", "search", "--index", indexDir, "--text", firstCaption(split), "--explain"})
	serve := []string{"xmr", "serve", "--index", indexDir}
	if images != "" {
		serve = append(serve, "--images", images)
	}
	return append(out, serve), images
}

// demoWorld returns the demo's world in dir, generating it (madeWorld)
// when there is none, when it is unreadable or of another size than n
// images, or when fresh is set.
func demoWorld(ctx context.Context, dir string, n int, fresh bool) (m *synth.Manifest, madeWorld bool, err error) {
	m, err = synth.LoadManifest(dir)
	why := ""
	switch {
	case fresh:
		why = " (--fresh)"
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		why = fmt.Sprintf(" (the world there is unreadable: %v)", err)
	case m.Images != n || !m.PNG || m.Dim != demoDim || m.Regions != demoRegions:
		why = fmt.Sprintf(" (the world there has %d images of %d regions of %d-d features, PNGs %v)", m.Images, m.Regions, m.Dim, m.PNG)
	default:
		step(1, "using the synthetic world in %s (--fresh to make it again)", dir)
		return m, false, nil
	}
	step(1, "generating a synthetic world of %d images with PNGs in %s%s", n, dir, why)
	m, err = synth.Generate(ctx, dir, synth.Config{N: n, Seed: 1, Dim: demoDim, Regions: demoRegions, Noise: 0.1, Progress: true})
	return m, true, err
}

// demoSchedule describes the training the demo asks for: iters
// iterations (0: no limit) and the time budget (0: none), with the time
// that the default iterations of the default config take on a slow CPU.
func demoSchedule(iters int, budget time.Duration, config string) string {
	switch {
	case iters == 0:
		return "for " + budget.String()
	case budget > 0:
		return fmt.Sprintf("for %d iterations or %s", iters, budget)
	case config == demoConfig && float64(iters)*demoIterSeconds >= 10:
		d := time.Duration(float64(iters) * demoIterSeconds * float64(time.Second))
		return fmt.Sprintf("for %d iterations (about %s on 2 cores of the Intel Xeon it was measured on; more or less on another CPU)", iters, d.Round(10*time.Second))
	case config == photoConfig && float64(iters)*photoIterSeconds >= 10:
		d := time.Duration(float64(iters) * photoIterSeconds * float64(time.Second))
		return fmt.Sprintf("for %d iterations (about %s on 2 cores of the AMD EPYC Zen 5 it was measured on; more or less on another CPU)", iters, d.Round(time.Minute))
	}
	return fmt.Sprintf("for %d iterations", iters)
}

// demoTrain trains as opts say, says how long it took and where the
// curves are, and then writes trained into marker, the file that tells a
// later run that opts.Out holds this model.
func demoTrain(ctx context.Context, opts train.Options, marker, trained string) error {
	began := time.Now()
	res, err := train.Run(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "    %d iterations in %s; training curves in %s\n", res.Iters, time.Since(began).Round(time.Second), filepath.Join(opts.Out, "curves.png"))
	return atomicfile.WriteBytes(marker, []byte(trained))
}

// drawExamples draws, for a few captions of split, each word's best region
// on the caption's image (alignment-K.png, skipped for models without
// region and word vectors, such as SEAM) and the caption's top 5 images
// (query-K.png), reading the images with load and enlarging them by
// overlayScale and gridScale. When an image cannot be read it says so
// after noImages and draws nothing more.
func drawExamples(dir string, split *data.Split, res *eval.ModelResult, grounding []data.Grounding, load func(int) (image.Image, error), overlayScale, gridScale int, noImages string) error {
	// Each image is decoded once: a caption's own image is most often
	// among its top 5 too.
	loaded := map[int]image.Image{}
	load = func(read func(int) (image.Image, error)) func(int) (image.Image, error) {
		return func(i int) (image.Image, error) {
			if img, ok := loaded[i]; ok {
				return img, nil
			}
			img, err := read(i)
			if err == nil {
				loaded[i] = img
			}
			return img, err
		}
	}(load)
	var files []string
	for k, c := range []int{0, 7, 13} {
		if c >= split.NumCaptions() {
			break
		}
		i := split.ImageOf(c)
		img, err := load(i)
		if err != nil {
			fmt.Fprintf(stdout, "    (%s: %v)\n", noImages, err)
			break
		}
		if len(res.Images.Vecs) > 0 {
			words := overlayWords(split, c, i, model.MatchWords(res.Images, i, res.Texts, c), grounding)
			path := filepath.Join(dir, fmt.Sprintf("alignment-%d.png", k+1))
			if err := viz.SavePNG(path, viz.AlignmentOverlay(img, split.Captions[c], words, overlayScale)); err != nil {
				return err
			}
			files = append(files, path)
		}
		column := make([]float32, split.NumImages())
		for j := range column {
			column[j] = res.Sims.At(j, c)
		}
		var cells []image.Image
		var labels []string
		var relevant []bool
		for _, h := range queryResults(column, i, 5) {
			im, err := load(h.index)
			if err != nil {
				return err
			}
			cells = append(cells, im)
			labels = append(labels, fmt.Sprintf("#%d %.2f", h.rank, h.score))
			relevant = append(relevant, h.index == i)
		}
		path := filepath.Join(dir, fmt.Sprintf("query-%d.png", k+1))
		if err := viz.SavePNG(path, viz.ResultGrid(split.Captions[c], cells, labels, relevant, gridScale)); err != nil {
			return err
		}
		files = append(files, path)
	}
	if len(files) > 0 {
		fmt.Fprintf(stdout, "    wrote %s\n", strings.Join(files, ", "))
	}
	return nil
}

// writeDemoIndex writes the index of split (as the collection c) in dir
// from the evaluation's embeddings of it (res), unless the index there was
// built by m already (and rebuild is not set); att is stored with the
// index's copy of m (Writer.Attach) and features in its manifest
// (Writer.SetFeatures).
func writeDemoIndex(ctx context.Context, dir string, m model.Model, split *data.Split, c index.Collection, res *eval.ModelResult, rebuild bool, att *index.Attachment, features json.RawMessage) error {
	if ix, err := index.Open(ctx, dir, &index.OpenOptions{SkipChecksums: true}); err == nil {
		same := ix.Manifest().Model.Fingerprint == model.Fingerprint(m)
		ni, nc := ix.Len()
		ix.Close()
		if same && !rebuild && ni == split.NumImages() && nc == split.NumCaptions() {
			step(5, "using the index in %s (%d images, %d captions)", dir, ni, nc)
			return nil
		}
	}
	step(5, "indexing the %s split in %s", split.Name, dir)
	w, err := index.NewWriter(dir, m, index.Overwrite)
	if err != nil {
		return err
	}
	defer w.Abort()
	w.Attach(att)
	w.SetFeatures(features)
	if err := w.AddImages(ctx, res.Images, c.ImageRows); err != nil {
		return err
	}
	if err := w.AddCaptions(ctx, res.Texts, c.Captions); err != nil {
		return err
	}
	if err := w.Commit(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "    %d images and %d captions\n", len(c.ImageRows), len(c.Captions))
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

// demoConfigFile, in the demo's directory, holds the config (as xmr
// writes it) that the model in run was trained with.
const demoConfigFile = ".demo-config.yaml"

// demoMarker is what the marker file says of a model trained with cfg for
// iters iterations within the time budget (0: none): a demo asked for
// another schedule trains again.
func demoMarker(cfg train.Config, iters int, budget, total time.Duration) string {
	m := cfg.Marshal() + fmt.Sprintf("# xmr demo --max-iters %d --time-budget %s\n", iters, budget)
	if total > 0 { // markers written before --total-time existed stay valid without it
		m += fmt.Sprintf("# --total-time %s\n", total)
	}
	return m
}

// demoBudget returns the main model's training time budget: budget
// (--time-budget), or, with total (--total-time) and elapsed since the
// demo started, what is left of total once demoReserve is kept for the
// evaluation and the index, if that is less, and never under
// demoMinTraining (or budget, when less). note says so when total decides it ("" otherwise).
func demoBudget(budget, total, elapsed time.Duration) (time.Duration, string) {
	if total <= 0 {
		return budget, ""
	}
	left := (total - elapsed - demoReserve).Round(time.Second)
	if budget > 0 && budget <= left {
		return budget, ""
	}
	if floor := demoMinTraining; left < floor {
		if budget > 0 && budget < floor { // --time-budget is never exceeded
			floor = budget
		}
		return floor, fmt.Sprintf("%s of --total-time %s went to the steps before it: training for %s all the same, so the demo will take longer", elapsed.Round(time.Second), total, floor)
	}
	return left, fmt.Sprintf("what --total-time %s leaves after %s of the steps before it and %s kept for the evaluation and the index; a fast CPU does every iteration sooner", total, elapsed.Round(time.Second), demoReserve)
}

// demoReuse reports whether the demo can reuse the trained model best for
// the config cfg and the schedule that want (demoMarker) describes: it
// exists and was trained so, as the marker file says (demos made before
// the marker existed: its run's config.yaml names the same model). why
// says what stands in the way, "" when nothing does or there is no model
// yet.
func demoReuse(best, marker string, cfg train.Config, want string) (reuse bool, why string) {
	if _, err := os.Stat(best); err != nil {
		return false, ""
	}
	run := filepath.Dir(best)
	if b, err := infile.ReadFile(marker); err == nil {
		switch {
		case string(b) == want:
			return true, ""
		case strings.HasPrefix(string(b), cfg.Marshal()):
			return false, fmt.Sprintf("the model in %s was trained for another number of iterations or time; training again", run)
		}
		return false, fmt.Sprintf("the model in %s was trained with another config; training again", run)
	}
	prev, err := train.LoadConfig(filepath.Join(run, "config.yaml"))
	if err != nil {
		return false, fmt.Sprintf("the model in %s has no readable config (%v); training again", run, err)
	}
	if prev.Model.Name != cfg.Model.Name {
		return false, fmt.Sprintf("the model in %s is %s, the config asks for %s; training again", run, prev.Model.Name, cfg.Model.Name)
	}
	return true, ""
}

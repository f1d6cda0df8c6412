// Command finetune is a research probe for docs/photos.md: it measures
// whether fine-tuning the detector's upper layers with TERAN's matching
// loss, through ROI-Align, lifts retrieval on real photos. It is not one of
// xmr's commands: a checkpoint it trains is not written, and `xmr index`,
// `serve` and `align` know nothing of it.
//
//	go run ./tools/finetune cache --karpathy dataset_flickr8k.json --image-root DIR --data DATA --cut s32
//	go run ./tools/finetune train --data DATA --cut s32 [--iters 468] [--val-every 117] [--vision-lr 5e-5] [--frozen]
//
// DATA is a data set that `xmr extract` made from the Karpathy file (with
// --flip or without). cache runs the detector's frozen lower part once on
// every image of DATA's train and dev splits, in DATA's order (mirrored
// where the id says so), and writes the activation at the cut
// (detect.Cuts) to DATA/taps-CUT/SPLIT.npy, float32 (N, H, W, C). train
// trains the config (default configs/teran-photos.yaml) as `xmr train`
// does, with the same batches, loss, optimiser and schedule, except that
// the region features' columns of the maps that the cut recomputes come
// from the detector's upper part run on the tape from the cached
// activation and pooled by ROI-Align over each region's box, so that the
// matching loss trains the detector's weights too (at --vision-lr, the
// model's other weights at the config's lr). Each validation (on dev, the
// features of its images recomputed with the current weights) prints one
// JSON line. With --frozen the detector's part is not trained: the run is
// then `xmr train`'s on the extracted features.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/npy"
	"github.com/xmr-project/xmr/tensor"
	"github.com/xmr-project/xmr/train"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: finetune cache|train [flags] (see the package comment)")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "cache":
		err = runCache(ctx, os.Args[2:])
	case "train":
		err = runTrain(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want cache or train", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "finetune:", err)
		os.Exit(1)
	}
}

// splits are the data set's splits that the probe reads.
var splits = []string{data.SplitTrain, data.SplitDev}

// tapPath is where cache writes split's activations at cut.
func tapPath(dataDir string, cut detect.Cut, split string) string {
	return filepath.Join(dataDir, "taps-"+cut.Name, split+".npy")
}

// readIDs reads DATA/SPLIT_ids.txt.
func readIDs(dataDir, split string) ([]string, error) {
	path := filepath.Join(dataDir, split+"_ids.txt")
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		ids = append(ids, strings.TrimSpace(sc.Text()))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return ids, nil
}

func runCache(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cache", flag.ExitOnError)
	karpathy := fs.String("karpathy", "", "the Karpathy split FILE that DATA was extracted from")
	root := fs.String("image-root", "", "the DIR its photos are under (default: the file's directory)")
	dataDir := fs.String("data", "", "the data set DIR that xmr extract made")
	cutName := fs.String("cut", "s32", "where to cut the detector: s16 or s32 (detect.Cuts)")
	models := fs.String("models", detect.DefaultCacheDir(), "the DIR caching the detector's weights")
	workers := fs.Int("workers", 2, "images at once")
	fs.Parse(args)
	if *karpathy == "" || *dataDir == "" {
		return errors.New("cache: give --karpathy FILE and --data DIR")
	}
	cut, err := detect.CutNamed(*cutName)
	if err != nil {
		return err
	}
	if *root == "" {
		*root = filepath.Dir(*karpathy)
	}
	wdir, err := detect.Fetch(ctx, *models)
	if err != nil {
		return err
	}
	det, err := detect.Load(wdir)
	if err != nil {
		return err
	}
	tapped, err := det.WithTaps(cut.Node)
	if err != nil {
		return err
	}
	specs, err := extract.KarpathySplits(*karpathy, *root, []string{"train", "val"}, data.IDFilename)
	if err != nil {
		return err
	}
	byID := map[string]extract.Item{}
	for _, s := range specs {
		for _, it := range extract.MirrorSplit(s).Items {
			byID[it.ID] = it
		}
	}
	for _, split := range splits {
		ids, err := readIDs(*dataDir, split)
		if err != nil {
			return err
		}
		items := make([]extract.Item, len(ids))
		for i, id := range ids {
			it, ok := byID[id]
			if !ok {
				return fmt.Errorf("%s: image %q of %s is not in %s", *dataDir, id, split, *karpathy)
			}
			items[i] = it
		}
		var shape []int
		var out []float32
		var mu sync.Mutex
		var firstErr error
		next := make(chan int)
		var wg sync.WaitGroup
		began := time.Now()
		done := 0
		for range max(*workers, 1) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					m, err := tapOf(ctx, tapped, items[i])
					mu.Lock()
					switch {
					case err != nil:
						firstErr = cmpErr(firstErr, err)
					case out == nil:
						shape = []int{len(items), m.H, m.W, m.C}
						out = make([]float32, len(items)*len(m.Data))
						fallthrough
					default:
						copy(out[i*len(m.Data):], m.Data)
					}
					done++
					if done%1000 == 0 {
						slog.Info("cache", "split", split, "done", done, "of", len(items), "per_second", fmt.Sprintf("%.1f", float64(done)/time.Since(began).Seconds()))
					}
					mu.Unlock()
				}
			}()
		}
		for i := range items {
			if ctx.Err() != nil {
				break
			}
			next <- i
		}
		close(next)
		wg.Wait()
		if err := cmpErr(firstErr, ctx.Err()); err != nil {
			return err
		}
		path := tapPath(*dataDir, cut, split)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := npy.WriteFile(path, shape, out); err != nil {
			return err
		}
		slog.Info("cache written", "path", path, "shape", shape, "seconds", int(time.Since(began).Seconds()))
	}
	return nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// tapOf runs the detector on one photo and returns the activation at its tap.
func tapOf(ctx context.Context, d *detect.Detector, it extract.Item) (detect.FeatureMap, error) {
	p, err := extract.LoadFile(it.Path, extract.Limits{})
	if err != nil {
		return detect.FeatureMap{}, err
	}
	if it.Mirror {
		p.Mirror()
	}
	o, err := d.Run(ctx, p.RGB, detect.RunOptions{Maps: []string{detect.Maps[0].Name}})
	if err != nil {
		return detect.FeatureMap{}, fmt.Errorf("%s: %w", it.Path, err)
	}
	m := o.Taps[0]
	m.Data = slices.Clone(m.Data)
	o.Release()
	return m, nil
}

// taps are a split's cached activations and its regions' boxes in the
// detector's input pixels.
type taps struct {
	arr   *npy.Array
	per   int // values per image
	shape []int
	boxes [][][4]float32
}

func loadTaps(path string, reg *data.Regions) (*taps, error) {
	f, err := npy.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a, err := f.Map()
	if err != nil {
		return nil, err
	}
	if len(a.Shape) != 4 || a.Shape[0] != reg.N {
		return nil, fmt.Errorf("%s: shape %v, want (%d, H, W, C): run cache again", path, a.Shape, reg.N)
	}
	t := &taps{arr: a, per: a.Shape[1] * a.Shape[2] * a.Shape[3], shape: a.Shape[1:], boxes: make([][][4]float32, reg.N)}
	const S = detect.InputSize
	for i := range reg.N {
		for r := range reg.NumRegions(i) {
			b := reg.Boxes[(i*reg.R+r)*4:]
			t.boxes[i] = append(t.boxes[i], [4]float32{b[0] * S, b[1] * S, b[2] * S, b[3] * S})
		}
	}
	return t, nil
}

// batch gathers images idx's activations.
func (t *taps) batch(idx []int) *tensor.Tensor {
	x := tensor.New(append([]int{len(idx)}, t.shape...)...)
	for k, i := range idx {
		copy(x.Data[k*t.per:(k+1)*t.per], t.arr.Data[i*t.per:(i+1)*t.per])
	}
	return x
}

// tuned is a model whose images' region features are, for the maps the
// cut recomputes, computed on the tape by the detector's upper part.
type tuned struct {
	model.Model
	net    *detect.Net
	cut    detect.Cut
	cols   [][2]int // the feature columns of each of net's outputs
	stride []int
	train  *taps
	params []nn.Named
}

// Params adds the detector part's weights, named for the optimiser's
// vision group (train.VisionPrefix), whose learning rate is
// training.vision-lr: the probe sets it to --vision-lr.
func (t *tuned) Params() []nn.Named { return append(t.Model.Params(), t.params...) }

// features returns feat (B, R, D) with the cut's columns recomputed from
// the activations of images idx of tp.
func (t *tuned) features(tape *tensor.Tape, tp *taps, idx []int, feat *tensor.Tensor) *tensor.Tensor {
	R, D := feat.Shape[1], feat.Shape[2]
	ys := t.net.Forward(tape, tp.batch(idx))
	boxes := make([][][4]float32, len(idx))
	for k, i := range idx {
		boxes[k] = tp.boxes[i]
	}
	var parts []*tensor.Tensor
	at := 0
	for j, y := range ys {
		lo, hi := t.cols[j][0], t.cols[j][1]
		if lo > at {
			parts = append(parts, tape.Narrow(feat, 2, at, lo-at))
		}
		parts = append(parts, tape.ROIAlign(y, t.stride[j], boxes, R))
		at = hi
	}
	if at < D {
		parts = append(parts, tape.Narrow(feat, 2, at, D-at))
	}
	return tape.Concat(2, parts...)
}

// EncodeImages recomputes a training batch's features (Items set) on the
// tape; other batches are encoded as they come (dev's features are
// recomputed before each validation).
func (t *tuned) EncodeImages(tape *tensor.Tape, im model.Images) *model.Encoded {
	if t.train != nil && im.Items != nil {
		im.Feat = t.features(tape, t.train, im.Items, im.Feat)
	}
	return t.Model.EncodeImages(tape, im)
}

// refeature returns a copy of reg with the cut's columns recomputed from
// tp with the current weights.
func (t *tuned) refeature(tp *taps, reg *data.Regions) *data.Regions {
	out := *reg
	out.Feat = slices.Clone(reg.Feat)
	n := reg.R * reg.D
	for lo := 0; lo < reg.N; lo += 32 {
		hi := min(lo+32, reg.N)
		idx := make([]int, 0, hi-lo)
		for i := lo; i < hi; i++ {
			idx = append(idx, i)
		}
		f := t.features(nil, tp, idx, tensor.FromData(out.Feat[lo*n:hi*n], hi-lo, reg.R, reg.D))
		copy(out.Feat[lo*n:hi*n], f.Data)
	}
	return &out
}

// validation is one line of train's output.
type validation struct {
	Iter    int       `json:"iter"`
	Epoch   float64   `json:"epoch"`
	Seconds float64   `json:"train_seconds"`
	Loss    float64   `json:"loss"`
	RSum    float64   `json:"rsum"`
	I2T     []float64 `json:"i2t_r1_r5_r10"`
	T2I     []float64 `json:"t2i_r1_r5_r10"`
}

func runTrain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("train", flag.ExitOnError)
	dataDir := fs.String("data", "", "the data set DIR (with its taps-CUT caches)")
	cfgPath := fs.String("config", "configs/teran-photos.yaml", "the training config FILE")
	cutName := fs.String("cut", "s32", "where the detector is cut: s16 or s32")
	iters := fs.Int("iters", 468, "iterations to train")
	valEvery := fs.Int("val-every", 117, "validate every N iterations (and at the end)")
	visionLR := fs.Float64("vision-lr", 5e-5, "the learning rate of the detector's weights")
	frozen := fs.Bool("frozen", false, "do not train the detector: the extracted features as they are")
	models := fs.String("models", detect.DefaultCacheDir(), "the DIR caching the detector's weights")
	fs.Parse(args)
	if *dataDir == "" {
		return errors.New("train: give --data DIR")
	}
	cfg, err := train.LoadConfig(*cfgPath)
	if err != nil {
		return err
	}
	cut, err := detect.CutNamed(*cutName)
	if err != nil {
		return err
	}
	src, err := data.Source{Path: *dataDir}.Resolve()
	if err != nil {
		return err
	}
	tr, err := src.Load(ctx, data.SplitTrain)
	if err != nil {
		return err
	}
	dev, err := src.Load(ctx, data.SplitDev)
	if err != nil {
		return err
	}
	rec, err := extract.ReadRecord(*dataDir)
	if err != nil || rec == nil {
		return fmt.Errorf("%s: no extractor record (features.json): not a data set of xmr extract (%v)", *dataDir, err)
	}
	cfg.ImageModel.FeatDim = tr.Images.D
	mc := cfg.ModelConfig()
	tok, err := model.BuildTokenizer(mc, tr.Captions)
	if err != nil {
		return err
	}
	inner, err := model.New(mc, tok, cfg.Training.Seed)
	if err != nil {
		return err
	}
	if fn, ok := inner.(model.FeatureNormalizer); ok && fn.NormalizesFeatures() {
		mean, std, err := model.FeatureStats(tr.Images)
		if err != nil {
			return err
		}
		if err := fn.SetFeatureStats(mean, std); err != nil {
			return err
		}
	}
	t := &tuned{Model: inner, cut: cut}
	var devTaps *taps
	if !*frozen {
		wdir, err := detect.Fetch(ctx, *models)
		if err != nil {
			return err
		}
		det, err := detect.Load(wdir)
		if err != nil {
			return err
		}
		if t.net, err = det.CutNet(cut); err != nil {
			return err
		}
		// The columns of each recomputed map in the extracted features.
		for _, name := range cut.Maps {
			at := 0
			found := false
			for _, m := range rec.Extractor.Maps {
				i := slices.IndexFunc(detect.Maps, func(s detect.MapSpec) bool { return s.Name == m })
				if i < 0 {
					return fmt.Errorf("%s: unknown map %q", *dataDir, m)
				}
				if m == name {
					t.cols = append(t.cols, [2]int{at, at + detect.Maps[i].C})
					t.stride = append(t.stride, detect.Maps[i].Stride)
					found = true
				}
				at += detect.Maps[i].C
			}
			if !found {
				return fmt.Errorf("%s: its features do not pool map %s, which cut %s trains", *dataDir, name, cut.Name)
			}
		}
		for _, p := range t.net.Params() {
			t.params = append(t.params, nn.Named{Name: train.VisionPrefix + p.Name, T: p.T})
		}
		cfg.Training.VisionLR = *visionLR
		if t.train, err = loadTaps(tapPath(*dataDir, cut, data.SplitTrain), tr.Images); err != nil {
			return err
		}
		if devTaps, err = loadTaps(tapPath(*dataDir, cut, data.SplitDev), dev.Images); err != nil {
			return err
		}
		if err := checkTaps(t, tr.Images); err != nil {
			return err
		}
	}
	nCaps := tr.NumCaptions()
	bs := cfg.Training.BatchSize
	perEpoch := nCaps / bs
	st, err := train.NewStepper(t, cfg.Training, perEpoch)
	if err != nil {
		return err
	}
	slog.Info("training", "params", st.NumParams(), "iters_per_epoch", perEpoch, "cut", cut.Name, "frozen", *frozen)
	enc := json.NewEncoder(os.Stdout)
	var trained time.Duration
	lastLoss := 0.0
	validate := func(it int) error {
		return st.WithAverage(func() error {
			ds := *dev
			if t.net != nil {
				ds.Images = t.refeature(devTaps, dev.Images)
			}
			res, err := eval.EvaluateModels(ctx, []model.Model{inner}, &ds, eval.ModelOptions{})
			if err != nil {
				return err
			}
			r := res.Report
			return enc.Encode(validation{Iter: it, Epoch: float64(it) / float64(perEpoch), Seconds: trained.Seconds(), Loss: lastLoss, RSum: r.RSum,
				I2T: []float64{r.I2T.R1, r.I2T.R5, r.I2T.R10}, T2I: []float64{r.T2I.R1, r.T2I.R5, r.T2I.R10}})
		})
	}
	var order []int
	pos, epoch := 0, 0
	for it := 0; it < *iters; it++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if pos+bs > len(order) {
			order = train.EpochOrder(cfg.Training.Seed, epoch, nCaps) // xmr train's shuffle
			pos = 0
			epoch++
		}
		b := train.BatchOf(inner, tr, order[pos:pos+bs])
		pos += bs
		began := time.Now()
		loss, err := st.Step(b, it)
		if err != nil {
			return err
		}
		trained += time.Since(began)
		lastLoss = loss
		if it%50 == 0 {
			slog.Info("step", "iter", it, "loss", fmt.Sprintf("%.3f", loss), "seconds_per_iter", fmt.Sprintf("%.2f", trained.Seconds()/float64(it+1)))
		}
		if (it+1)%*valEvery == 0 || it+1 == *iters {
			if err := validate(it + 1); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkTaps checks, on the first images, that the untrained part
// recomputes the extracted features' columns from the cache: the cache
// and the data set describe the same images in the same order.
func checkTaps(t *tuned, reg *data.Regions) error {
	idx := []int{0, reg.N / 2, reg.N - 1}
	n := reg.R * reg.D
	feat := tensor.New(len(idx), reg.R, reg.D)
	for k, i := range idx {
		copy(feat.Data[k*n:], reg.Image(i))
	}
	got := t.features(nil, t.train, idx, feat)
	var maxErr, maxAbs float64
	for k, i := range idx {
		for r := range reg.NumRegions(i) {
			for _, c := range t.cols {
				for j := c[0]; j < c[1]; j++ {
					want := float64(feat.Data[k*n+r*reg.D+j])
					maxErr = max(maxErr, abs(float64(got.Data[k*n+r*reg.D+j])-want))
					maxAbs = max(maxAbs, abs(want))
				}
			}
		}
	}
	if maxErr > 1e-3*max(maxAbs, 1) {
		return fmt.Errorf("the cached activations do not give the extracted features (max difference %.3g of %.3g): run cache again", maxErr, maxAbs)
	}
	slog.Info("cache checked against the extracted features", "max_difference", maxErr, "max_value", maxAbs)
	return nil
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

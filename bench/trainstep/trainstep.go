// Package trainstep is `xmr bench train-step`: one training step of a
// TERAN or TERN config (the paper's TERAN MrSw by default) on random inputs
// of the paper's shapes, as train.Run takes it, against a PyTorch peer of
// the same architecture and sizes (tools/peer_trainstep.py) run in the same
// run at one thread and at GOMAXPROCS threads.
package trainstep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/blas"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/optim"
	"github.com/xmr-project/xmr/tensor"
	"github.com/xmr-project/xmr/text"
	"github.com/xmr-project/xmr/train"
)

// Benchmark is `xmr bench train-step`.
var Benchmark = bench.Benchmark{
	Name:    "train-step",
	Summary: "one TERAN/TERN training step (forward, backward, Adam) at a config's size, vs PyTorch [CONFIG, default teran-mrsw: the paper's]",
	Run:     run,
}

// Shapes of the random batch: regions per image and word pieces per caption
// between [CLS] and [SEP] (COCO's typical length).
const (
	regions = 36
	words   = 12
)

// setup is one config's model, optimiser and batch, ready to step.
type setup struct {
	name    string
	cfg     train.Config
	mc      model.Config
	model   model.Model
	stepper *train.Stepper
	batch   train.Batch
	params  int // trained scalars
}

// newSetup builds the model of config name (a built-in config or a YAML
// file) with random weights and a random batch of the config's batch size:
// images of 36 regions and captions of 12 WordPiece tokens plus [CLS] and
// [SEP] over the config's vocabulary (BERT's 30522 tokens by default).
func newSetup(name string) (*setup, error) {
	cfg, err := train.LoadConfig(name)
	if err != nil {
		return nil, err
	}
	mc := cfg.ModelConfig()
	mc.TextModel.Pretrain = "" // same sizes, random weights: no download
	vocab := make([]string, max(mc.TextModel.VocabSize, 5))
	copy(vocab, []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"})
	for i := 5; i < len(vocab); i++ {
		vocab[i] = fmt.Sprintf("w%d", i)
	}
	tok, err := text.NewWordPiece(text.NewVocab(vocab))
	if err != nil {
		return nil, err
	}
	m, err := model.New(mc, tok, cfg.Training.Seed)
	if err != nil {
		return nil, err
	}
	b := cfg.Training.BatchSize
	rng := rand.New(rand.NewPCG(1, 1))
	im := model.Images{Feat: tensor.RandN(rng, b, regions, mc.ImageModel.FeatDim), Boxes: tensor.New(b, regions, 5), Valid: tensor.Full(1, b, regions)}
	for i := range im.Feat.Data {
		im.Feat.Data[i] = max(im.Feat.Data[i], 0) // bottom-up features are non-negative
	}
	t := words + 2
	tx := model.Texts{IDs: make([]int32, b*t), Valid: tensor.Full(1, b, t), Align: tensor.Full(1, b, t), Words: make([]int32, b*t), Lengths: make([]int, b)}
	for i := 0; i < b; i++ {
		tx.Lengths[i] = t
		tx.IDs[i*t], tx.IDs[i*t+t-1] = 2, 3
		tx.Align.Data[i*t], tx.Align.Data[i*t+t-1] = 0, 0
		tx.Words[i*t], tx.Words[i*t+t-1] = -1, -1
		for j := 1; j < t-1; j++ {
			tx.IDs[i*t+j] = int32(5 + rng.IntN(len(vocab)-5))
			tx.Words[i*t+j] = int32(j - 1)
		}
	}
	stepper, err := train.NewStepper(m, cfg.Training, 1000)
	if err != nil {
		return nil, err
	}
	return &setup{name: name, cfg: cfg, mc: mc, model: m, stepper: stepper, batch: train.Batch{Images: im, Texts: tx}, params: stepper.NumParams()}, nil
}

// step takes training step iter.
func (s *setup) step(iter int) error {
	_, err := s.stepper.Step(s.batch, iter)
	return err
}

// peerResult is what tools/peer_trainstep.py prints.
type peerResult struct {
	Version  string  `json:"version"`
	Threads  int     `json:"threads"`
	StepS    float64 `json:"step_s"`
	CPUS     float64 `json:"cpu_s"`
	Params   int     `json:"params"`
	MaxRSS   float64 `json:"max_rss_mib"`
	BLASCore string  `json:"blas_core"`
}

// run times training steps of a config on random inputs of the paper's
// shapes (see newSetup). A step is what train.Run does per batch: forward,
// backward, gradient clipping and the optimiser of train.NewStepper. The
// best of 3 steps after a warm-up counts (1 with --quick), and the peer's
// best at its best thread count.
func run(ctx context.Context, opts bench.Options) error {
	name := "teran-mrsw"
	if len(opts.Args) > 0 {
		name = opts.Args[0]
	}
	if opts.Quick && len(opts.Args) == 0 {
		name = "teran-mrsw-small"
	}
	s, err := newSetup(name)
	if err != nil {
		return err
	}
	if err := s.step(0); err != nil { // warm-up: allocations, pools
		return err
	}
	reps := 3
	if opts.Quick {
		reps = 1
	}
	var best time.Duration
	var bestCPU float64
	for r := 0; r < reps; r++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		start, c0 := time.Now(), bench.CPUSeconds()
		if err := s.step(r + 1); err != nil {
			return err
		}
		if d := time.Since(start); r == 0 || d < best {
			best, bestCPU = d, bench.CPUSeconds()-c0
		}
	}
	rss := bench.MaxRSSMiB()
	b := s.cfg.Training.BatchSize
	note := fmt.Sprintf("%s, batch %d, %d regions, %d tokens, %.1fM parameters; GOMAXPROCS=%d, %s",
		name, b, regions, words+2, float64(s.params)/1e6, runtime.GOMAXPROCS(0), blas.Describe())

	var peer *peerResult
	peerNote := ""
	if opts.NoPeer {
		peerNote = "peer skipped (--no-peer)"
	} else if runs, err := runPeers(ctx, opts, s, reps); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		peerNote = "PyTorch peer skipped: " + err.Error()
	} else {
		var times []string
		for _, p := range runs {
			if peer == nil || p.StepS < peer.StepS {
				peer = p
			}
			times = append(times, fmt.Sprintf("%d thread(s) %.3f s, %.0f MiB", p.Threads, p.StepS, p.MaxRSS))
		}
		peerNote = fmt.Sprintf("peer: PyTorch %s (%s), best of: %s", peer.Version, peer.BLASCore, strings.Join(times, "; "))
	}
	emit := func(r bench.Result, peerValue float64) {
		if peer != nil && peerValue > 0 {
			r = r.WithPeer(fmt.Sprintf("pytorch-%s (%d threads)", peer.Version, peer.Threads), peerValue, false)
		}
		opts.Emit(r)
	}
	var pStep, pEx, pCPU, pRSS float64
	if peer != nil {
		pStep, pEx, pCPU, pRSS = peer.StepS, 1000*peer.StepS/float64(b), peer.CPUS, peer.MaxRSS
	}
	emit(bench.Result{Name: "train-step " + name, Metric: "step time", Value: best.Seconds(), Unit: "s", Note: note + "; " + peerNote}, pStep)
	emit(bench.Result{Name: "train-step " + name, Metric: "time per example", Value: 1000 * best.Seconds() / float64(b), Unit: "ms"}, pEx)
	emit(bench.Result{Name: "train-step " + name, Metric: "CPU time", Value: bestCPU, Unit: "s", Note: "user+system time of the process in the best step (all threads)"}, pCPU)
	emit(bench.Result{Name: "train-step " + name, Metric: "peak memory", Value: rss, Unit: "MiB", Note: "process max RSS (peer: VmHWM of its own process, at its best thread count)"}, pRSS)
	return nil
}

// errUnsupported says the peer does not model a config.
var errUnsupported = errors.New("the PyTorch peer models TERAN with a fine-tuned BERT and the alignment loss (MrSw) only")

// peerArgs returns the peer's command line for s: every size explicitly,
// so that both sides build the same model.
func peerArgs(s *setup, threads, steps int) ([]string, error) {
	tm, im, jm, tc := s.mc.TextModel, s.mc.ImageModel, s.mc.Model, s.cfg.Training
	if jm.Name != "teran" || tm.Name != "bert" || !tm.FineTune || tc.LossType != train.LossAlignment || tc.AlignmentMode != model.MrSw {
		return nil, fmt.Errorf("%w; %s is model %s, text model %s (fine-tune %v), loss %s (%s)", errUnsupported, s.name, jm.Name, tm.Name, tm.FineTune, tc.LossType, tc.AlignmentMode)
	}
	slot0 := im.Slot0
	if slot0 == "" {
		slot0 = "zero"
	}
	// The timed steps are iterations 1 and on: the hardest negatives count
	// from max-violation-after.
	mv := tc.MaxViolation && tc.MaxViolationAfter <= 1
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return []string{
		"--vocab", fmt.Sprint(max(tm.VocabSize, 5)), "--word-dim", fmt.Sprint(tm.WordDim), "--bert-layers", fmt.Sprint(tm.ExtractionHiddenLayer),
		"--bert-heads", fmt.Sprint(tm.Heads), "--bert-ff", fmt.Sprint(tm.FF), "--max-positions", fmt.Sprint(tm.MaxPositions),
		"--text-dropout", f(float64(tm.Dropout)),
		"--feat-dim", fmt.Sprint(im.FeatDim), "--pos-encoding", im.PosEncoding, "--slot0", slot0, "--img-hidden", fmt.Sprint(im.Hidden),
		"--img-layers", fmt.Sprint(im.TransformerLayers), "--img-heads", fmt.Sprint(im.Heads), "--img-ff", fmt.Sprint(im.FF),
		"--img-dropout", f(float64(im.Dropout)),
		"--embed", fmt.Sprint(jm.EmbedSize), "--layers", fmt.Sprint(jm.Layers), "--heads", fmt.Sprint(jm.Heads), "--ff", fmt.Sprint(jm.FF),
		"--dropout", f(float64(jm.Dropout)), "--shared", strconv.Itoa(b2i(jm.SharedTransformer)),
		"--batch", fmt.Sprint(tc.BatchSize), "--regions", fmt.Sprint(regions), "--words", fmt.Sprint(words),
		"--lr", f(tc.LR), "--bert-lr", f(tc.BERTLR), "--beta1", f(optim.Config{Beta1: tc.Beta1}.WithDefaults().Beta1), "--grad-clip", f(tc.GradClip),
		"--margin", f(float64(tc.Margin)), "--max-violation", strconv.Itoa(b2i(mv)),
		"--threads", fmt.Sprint(threads), "--warmup", "1", "--steps", fmt.Sprint(steps),
	}, nil
}

// runPeers runs the peer at 1 thread and at GOMAXPROCS threads, checking
// that its model has xmr's number of parameters (within 0.1%).
func runPeers(ctx context.Context, opts bench.Options, s *setup, steps int) ([]*peerResult, error) {
	var out []*peerResult
	for _, threads := range threadCounts(runtime.GOMAXPROCS(0)) {
		args, err := peerArgs(s, threads, steps)
		if err != nil {
			return nil, err
		}
		b, err := bench.RunPeer(ctx, opts, "peer_trainstep.py", []string{"torch"}, args...)
		if err != nil {
			return nil, err
		}
		var p peerResult
		if err := json.Unmarshal(bench.LastLine(b), &p); err != nil {
			return nil, fmt.Errorf("peer output %q: %w", b, err)
		}
		if err := checkParams(p.Params, s.params); err != nil {
			return nil, err
		}
		out = append(out, &p)
	}
	return out, nil
}

// checkParams fails when the peer's parameter count is more than 0.1% away
// from xmr's: the two would not be the same model.
func checkParams(peer, ours int) error {
	if ours <= 0 || math.Abs(float64(peer-ours)) > 0.001*float64(ours) {
		return fmt.Errorf("the peer's model has %d parameters, xmr's %d (more than 0.1%% apart): not the same architecture", peer, ours)
	}
	return nil
}

// threadCounts returns 1 and n (once when n is 1).
func threadCounts(n int) []int {
	if n <= 1 {
		return []int{1}
	}
	return []int{1, n}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Package trainstep is `xmr bench train-step`: one training step of a
// TERAN or TERN config (the paper's TERAN MrSw by default) on random inputs
// of the paper's shapes, as train.Run takes it, against a PyTorch peer of
// the same architecture and sizes (tools/peer_trainstep.py) run in the same
// run at one thread and at GOMAXPROCS threads, its steps alternating with
// xmr's.
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

// peerResult is the summary tools/peer_trainstep.py prints at its end.
type peerResult struct {
	Version  string    `json:"version"`
	Threads  int       `json:"threads"`
	Steps    []float64 `json:"steps_s"`
	CPUs     []float64 `json:"cpus_s"`
	Params   int       `json:"params"`
	MaxRSS   float64   `json:"max_rss_mib"`
	BLASCore string    `json:"blas_core"`
}

// timing is one timed step: wall and CPU seconds (CPU of the process that
// took it, all its threads).
type timing struct{ Wall, CPU float64 }

// best returns the fastest of ts.
func best(ts []timing) timing {
	b := ts[0]
	for _, t := range ts[1:] {
		if t.Wall < b.Wall {
			b = t
		}
	}
	return b
}

// phase is xmr's steps and the peer's at one thread count, taken in turn;
// in the last phase, then the replays of a step's products and more of the
// peer's steps, taken in turn.
type phase struct {
	threads      int
	ours, theirs []timing
	peer         peerResult
	// replays and theirsReplay are the replays of the products and the
	// peer's steps taken in turn with them; rss is xmr's peak memory
	// before the first replay (whose operands would add to it).
	replays, theirsReplay []timing
	rss                   float64
}

// ratio is the peer's best step over ours: above 1, xmr is faster.
func (ph phase) ratio() float64 { return best(ph.theirs).Wall / best(ph.ours).Wall }

// pause lets the threads of the side that just stepped go idle before the
// other steps (OpenBLAS's threads spin a while after a call, Go's idle
// workers briefly).
const pause = 300 * time.Millisecond

// run times training steps of a config on random inputs of the paper's
// shapes (see newSetup). A step is what train.Run does per batch: forward,
// backward, gradient clipping and the optimiser of train.NewStepper.
//
// The PyTorch peer runs at 1 thread, then at GOMAXPROCS threads, each as a
// process that stays up while xmr's steps and its own alternate: one of
// ours, then one of the peer's, 3 times (1 with --quick) after a warm-up
// step on each side, so that both meet the machine at the same speed. In
// each such phase the best step of each side counts; the ratio reported is
// the lower of the phases' (the peer at its best thread count).
//
// Then the matrix products of one step (recorded in the warm-up step) are
// replayed alone, as many times, alternating with more of the peer's steps
// in the last phase: "products alone" is the time a step would take if
// everything else cost nothing, and its ratio against the peer the most
// that any work outside the products could give.
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
	iter := 0
	prod, err := record(s, iter) // warm-up: allocations, pools
	if err != nil {
		return err
	}
	reps := 3
	if opts.Quick {
		reps = 1
	}
	var phases []phase
	peerNote := "peer skipped (--no-peer)"
	if !opts.NoPeer {
		if phases, err = runPeers(ctx, opts, s, prod, reps, &iter); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			phases, peerNote = nil, "PyTorch peer skipped: "+err.Error()
		}
	}
	var ours, replay timing
	var rss float64
	var peer, last *phase
	if len(phases) == 0 {
		ts, err := alternate(ctx, timeSteps(s, &iter), nil, reps)
		if err != nil {
			return err
		}
		ours, rss = best(ts), bench.MaxRSSMiB()
		if ts, err = alternate(ctx, timeReplays(prod), nil, reps); err != nil {
			return err
		}
		replay = best(ts)
	} else {
		last = &phases[len(phases)-1]
		rss, replay = last.rss, best(last.replays)
		var parts []string
		for i := range phases {
			ph := &phases[i]
			if peer == nil || ph.ratio() < peer.ratio() {
				peer = ph
			}
			parts = append(parts, fmt.Sprintf("at %d thread(s) %.3f s against xmr's %.3f s (%.2fx), %.0f MiB",
				ph.threads, best(ph.theirs).Wall, best(ph.ours).Wall, ph.ratio(), ph.peer.MaxRSS))
		}
		ours = best(peer.ours)
		peerNote = fmt.Sprintf("peer: PyTorch %s (%s), steps alternating with xmr's, best of %d each: %s; the ratio is the lower",
			peer.peer.Version, peer.peer.BLASCore, reps, strings.Join(parts, "; "))
	}
	b := s.cfg.Training.BatchSize
	note := fmt.Sprintf("%s, batch %d, %d regions, %d tokens, %.1fM parameters; GOMAXPROCS=%d, %s",
		name, b, regions, words+2, float64(s.params)/1e6, runtime.GOMAXPROCS(0), blas.Describe())

	emit := func(r bench.Result, peerValue float64) {
		if peer != nil && peerValue > 0 {
			r = r.WithPeer(fmt.Sprintf("pytorch-%s (%d threads)", peer.peer.Version, peer.threads), peerValue, false)
		}
		opts.Emit(r)
	}
	var pStep, pEx, pCPU, pRSS float64
	if peer != nil {
		t := best(peer.theirs)
		pStep, pEx, pCPU, pRSS = t.Wall, 1000*t.Wall/float64(b), t.CPU, peer.peer.MaxRSS
	}
	emit(bench.Result{Name: "train-step " + name, Metric: "step time", Value: ours.Wall, Unit: "s", Note: note + "; " + peerNote}, pStep)
	emit(bench.Result{Name: "train-step " + name, Metric: "time per example", Value: 1000 * ours.Wall / float64(b), Unit: "ms"}, pEx)
	emit(bench.Result{Name: "train-step " + name, Metric: "CPU time", Value: ours.CPU, Unit: "s", Note: "user+system time of the process in the best step (all threads)"}, pCPU)
	emit(bench.Result{Name: "train-step " + name, Metric: "peak memory", Value: rss, Unit: "MiB", Note: "process max RSS before the products' replay (peer: VmHWM of its own process)"}, pRSS)
	r := bench.Result{Name: "train-step " + name, Metric: "products alone", Value: replay.Wall, Unit: "s",
		Note: fmt.Sprintf("the step's %d matrix products (%.3f TFLOP) replayed alone through blas.Sgemm at %.1f GFLOP/s, best of %d: the step's time if nothing else cost any",
			len(prod.calls), prod.flops/1e12, prod.flops/1e9/replay.Wall, reps)}
	if last != nil {
		r.Note += fmt.Sprintf("; the peer's steps alternating with the replays (%d threads): the ratio is the most that any work outside the products could give", last.threads)
		r = r.WithPeer(fmt.Sprintf("pytorch-%s (%d threads)", last.peer.Version, last.threads), best(last.theirsReplay).Wall, false)
	}
	opts.Emit(r)
	return nil
}

// alternate does reps timed pieces of work, each followed, when p is not
// nil, by one of the peer's steps, with a pause before each.
func alternate(ctx context.Context, work func() (timing, error), p *bench.Peer, reps int) (ours []timing, err error) {
	for r := 0; r < reps; r++ {
		if err := sleep(ctx, pause); err != nil {
			return nil, err
		}
		t, err := work()
		if err != nil {
			return nil, err
		}
		ours = append(ours, t)
		if p == nil {
			continue
		}
		if err := sleep(ctx, pause); err != nil {
			return nil, err
		}
		if _, err := p.Ask("step"); err != nil {
			return nil, err
		}
	}
	return ours, nil
}

// timeSteps returns work that takes the next training step of s (*iter
// counts the steps s has taken) and times it.
func timeSteps(s *setup, iter *int) func() (timing, error) {
	return func() (timing, error) {
		*iter++
		start, c0 := time.Now(), bench.CPUSeconds()
		if err := s.step(*iter); err != nil {
			return timing{}, err
		}
		return timing{Wall: time.Since(start).Seconds(), CPU: bench.CPUSeconds() - c0}, nil
	}
}

// timeReplays returns work that replays p's products and times it.
func timeReplays(p *products) func() (timing, error) {
	return func() (timing, error) {
		c0 := bench.CPUSeconds()
		w := p.replay()
		return timing{Wall: w, CPU: bench.CPUSeconds() - c0}, nil
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
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

// runPeers runs the peer at 1 thread and at GOMAXPROCS threads, each
// phase's steps alternating with reps of s's (*iter counts them), after
// checking that the peer's model has xmr's number of parameters (within
// 0.1%). In the last phase reps replays of prod follow, alternating with
// as many more of the peer's steps.
func runPeers(ctx context.Context, opts bench.Options, s *setup, prod *products, reps int, iter *int) ([]phase, error) {
	var out []phase
	counts := threadCounts(runtime.GOMAXPROCS(0))
	for i, threads := range counts {
		args, err := peerArgs(s, threads, reps)
		if err != nil {
			return nil, err
		}
		p, line, err := bench.StartPeer(ctx, opts, "peer_trainstep.py", []string{"torch"}, append(args, "--serve")...)
		if err != nil {
			return nil, err
		}
		var replay *products
		if i == len(counts)-1 {
			replay = prod
		}
		ph, err := runPhase(ctx, s, replay, p, line, reps, iter)
		if err != nil {
			return nil, err
		}
		ph.threads = threads
		out = append(out, ph)
	}
	return out, nil
}

// runPhase alternates reps steps of s with the peer's, p having answered
// ready line, then, when prod is not nil, reps replays of prod with as many
// more of the peer's steps (noting xmr's peak memory before them), and ends
// the peer.
func runPhase(ctx context.Context, s *setup, prod *products, p *bench.Peer, ready []byte, reps int, iter *int) (phase, error) {
	var r struct {
		Ready  bool `json:"ready"`
		Params int  `json:"params"`
	}
	var ph phase
	err := json.Unmarshal(ready, &r)
	if err == nil && !r.Ready {
		err = errors.New(`want {"ready": true, ...}`)
	}
	if err != nil {
		err = fmt.Errorf("peer's first line %q: %w", ready, err)
	} else {
		err = checkParams(r.Params, s.params)
	}
	if err == nil {
		ph.ours, err = alternate(ctx, timeSteps(s, iter), p, reps)
	}
	ph.rss = bench.MaxRSSMiB()
	if err == nil && prod != nil {
		ph.replays, err = alternate(ctx, timeReplays(prod), p, reps)
	}
	rest, cerr := p.Close()
	if err != nil {
		return ph, err
	}
	if cerr != nil {
		return ph, cerr
	}
	if err := json.Unmarshal(bench.LastLine(rest), &ph.peer); err != nil {
		return ph, fmt.Errorf("peer's summary %q: %w", rest, err)
	}
	want := reps + len(ph.replays)
	if len(ph.peer.Steps) != want || len(ph.peer.CPUs) != want {
		return ph, fmt.Errorf("peer's summary %q: want %d steps", rest, want)
	}
	for i, w := range ph.peer.Steps {
		t := timing{Wall: w, CPU: ph.peer.CPUs[i]}
		if i < reps {
			ph.theirs = append(ph.theirs, t)
		} else {
			ph.theirsReplay = append(ph.theirsReplay, t)
		}
	}
	return ph, nil
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

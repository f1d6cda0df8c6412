// Package trainstep is `xmr bench train-step`: one training step of a
// TERAN or TERN config (the paper's TERAN MrSw by default) on random inputs
// of the paper's shapes, as train.Run takes it.
package trainstep

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/tensor"
	"github.com/xmr-project/xmr/text"
	"github.com/xmr-project/xmr/train"
)

// Benchmark is `xmr bench train-step [CONFIG]`.
var Benchmark = bench.Benchmark{
	Name:    "train-step",
	Summary: "one TERAN/TERN training step (forward, backward, Adam) at a config's size [CONFIG, default teran-mrsw: the paper's]",
	Run:     run,
}

// run times training steps of a config on random inputs of the paper's
// shapes: B images of 36 regions and B captions of 12 WordPiece tokens
// (COCO's typical length) over BERT's 30522-token vocabulary. A step is
// what train.Run does per batch: forward, backward, gradient clipping and
// the optimiser of train.NewStepper.
func run(ctx context.Context, opts bench.Options) error {
	name := "teran-mrsw"
	if len(opts.Args) > 0 {
		name = opts.Args[0]
	}
	if opts.Quick && len(opts.Args) == 0 {
		name = "teran-mrsw-small"
	}
	cfg, err := train.LoadConfig(name)
	if err != nil {
		return err
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
		return err
	}
	m, err := model.New(mc, tok, cfg.Training.Seed)
	if err != nil {
		return err
	}
	b, regions, words := cfg.Training.BatchSize, 36, 12
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
		return err
	}
	nParams := 0
	for _, p := range m.Params() {
		nParams += p.T.Numel()
	}
	batch := train.Batch{Images: im, Texts: tx}
	step := func(iter int) error {
		_, err := stepper.Step(batch, iter)
		return err
	}
	if err := step(0); err != nil { // warm-up: allocations, pools
		return err
	}
	reps := 3
	if opts.Quick {
		reps = 1
	}
	var best time.Duration
	for r := 0; r < reps; r++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		start := time.Now()
		if err := step(r + 1); err != nil {
			return err
		}
		if d := time.Since(start); r == 0 || d < best {
			best = d
		}
	}
	note := fmt.Sprintf("%s, batch %d, %d regions, %d tokens, %.1fM parameters, %d CPUs", name, b, regions, t, float64(nParams)/1e6, runtime.NumCPU())
	opts.Emit(bench.Result{Name: "train-step " + name, Metric: "step time", Value: best.Seconds(), Unit: "s", Note: note})
	opts.Emit(bench.Result{Name: "train-step " + name, Metric: "time per example", Value: 1000 * best.Seconds() / float64(b), Unit: "ms", Note: note})
	opts.Emit(bench.Result{Name: "train-step " + name, Metric: "peak memory", Value: bench.MaxRSSMiB(), Unit: "MiB", Note: "process max RSS"})
	return nil
}

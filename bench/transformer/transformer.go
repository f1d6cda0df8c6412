// Package transformer is `xmr bench transformer`: one training step
// (forward, backward, Adam) and one no-grad inference of TERAN's shared
// transformer layers (package nn), each against PyTorch on the CPU running
// the same shapes in the same run (tools/peer_transformer.py).
package transformer

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/blas"
	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/optim"
	"github.com/xmr-project/xmr/tensor"
)

// Benchmark is `xmr bench transformer [blas-threads=N]`.
var Benchmark = bench.Benchmark{
	Name:    "transformer",
	Summary: "transformer encoder: training step (fwd+bwd+Adam) and 1-sequence inference, vs PyTorch on the CPU",
	Run:     run,
}

// config is the work the benchmark times.
type config struct {
	Layers, D, Heads, FF int
	Dropout              float32
	Batch, Tokens        int // training batch
	SingleTokens         int // the no-grad single sequence
	Warmup, Iters        int // training steps
	InferIters           int
}

// configFor returns TERAN's shared layers (2 post-norm layers at d = 1024,
// 4 heads, ff 2048) on a batch of 32 x 36 tokens, or tiny sizes if quick.
func configFor(quick bool) config {
	if quick {
		return config{Layers: 2, D: 64, Heads: 4, FF: 128, Dropout: 0.1, Batch: 4, Tokens: 10, SingleTokens: 6, Warmup: 1, Iters: 2, InferIters: 5}
	}
	return config{Layers: 2, D: 1024, Heads: 4, FF: 2048, Dropout: 0.1, Batch: 32, Tokens: 36, SingleTokens: 12, Warmup: 2, Iters: 7, InferIters: 50}
}

// setup builds the encoder and the training batch: random inputs (B, T, D)
// and a key-padding mask where sequence b has T - b%8 real tokens.
func setup(cfg config) (enc *nn.TransformerEncoder, x, valid *tensor.Tensor) {
	rng := rand.New(rand.NewPCG(1, 2))
	enc = nn.NewTransformerEncoder(rng, cfg.Layers, cfg.D, cfg.Heads, cfg.FF, cfg.Dropout, nn.ReLU)
	x = tensor.RandN(rng, cfg.Batch, cfg.Tokens, cfg.D)
	valid = tensor.New(cfg.Batch, cfg.Tokens)
	for b := range cfg.Batch {
		for j := range cfg.Tokens - b%8 {
			valid.Data[b*cfg.Tokens+j] = 1
		}
	}
	return enc, x, valid
}

// newOptimizer returns PyTorch's default Adam at lr 1e-4, as the peer uses.
func newOptimizer(enc *nn.TransformerEncoder) (*optim.Adam, error) {
	return optim.NewAdam([]optim.Group{{Params: nn.Tensors(enc.Params()), LR: 1e-4}}, optim.Config{})
}

// peerResult is what tools/peer_transformer.py prints.
type peerResult struct {
	Version string  `json:"version"`
	Threads int     `json:"threads"`
	TrainMS float64 `json:"train_ms"`
	InferMS float64 `json:"infer_ms"`
	MaxRSS  float64 `json:"max_rss_mib"`
	// TrainCPUMS is the process's CPU time per training step (median).
	TrainCPUMS float64 `json:"train_cpu_ms"`
}

// run times the model and its PyTorch peer. One optional argument,
// blas-threads=N, runs OpenBLAS's own N threads per product instead of the
// default (one thread per call, products split over goroutines).
func run(ctx context.Context, opts bench.Options) error {
	cfg := configFor(opts.Quick)
	for _, a := range opts.Args {
		var n int
		if _, err := fmt.Sscanf(a, "blas-threads=%d", &n); err != nil || n < 1 {
			return fmt.Errorf("transformer: argument %q: want blas-threads=N (N >= 1)", a)
		}
		if ob, ok := blas.Current().(*blas.OpenBLAS); ok {
			threads, split := ob.Threads(), ob.Split()
			defer func() {
				ob.SetThreads(threads)
				ob.SetSplit(split)
			}()
			ob.SetThreads(n)
			if n > 1 {
				ob.SetSplit(1)
			}
		}
	}
	shape := fmt.Sprintf("%d layers d=%d h=%d ff=%d, batch %dx%d", cfg.Layers, cfg.D, cfg.Heads, cfg.FF, cfg.Batch, cfg.Tokens)
	threads := fmt.Sprintf("GOMAXPROCS=%d, %s", runtime.GOMAXPROCS(0), blas.Describe())

	enc, x, valid := setup(cfg)
	opt, err := newOptimizer(enc)
	if err != nil {
		return fmt.Errorf("transformer: %w", err)
	}
	var mem memPeak
	tp := tensor.NewTape()
	step := func(i int) {
		tp.Seed(1, uint64(i))
		y := enc.Forward(tp, x, valid) // (B, T, D)
		loss := tp.MeanAll(tp.Mul(y, y))
		mem.sample()
		tp.BackwardAndReset(loss) // as train.Stepper steps
		opt.StepAndZeroGrad()     // step() then zero_grad(), in one pass
		mem.sample()
	}
	trainTimes := make([]float64, 0, cfg.Iters)
	cpuTimes := make([]float64, 0, cfg.Iters)
	for i := range cfg.Warmup + cfg.Iters {
		if err := ctx.Err(); err != nil {
			return err
		}
		t0, c0 := time.Now(), bench.CPUSeconds()
		step(i)
		if i >= cfg.Warmup {
			trainTimes = append(trainTimes, msSince(t0))
			cpuTimes = append(cpuTimes, (bench.CPUSeconds()-c0)*1e3)
		}
	}
	tp.Reset()
	trainMS, trainCPU := bench.Median(trainTimes), bench.Median(cpuTimes)

	xs := tensor.RandN(rand.New(rand.NewPCG(3, 4)), 1, cfg.SingleTokens, cfg.D)
	inferTimes := make([]float64, 0, cfg.InferIters)
	for i := range 5 + cfg.InferIters {
		t0 := time.Now()
		enc.Forward(nil, xs, nil)
		if i >= 5 {
			inferTimes = append(inferTimes, msSince(t0))
		}
	}
	inferMS := bench.Median(inferTimes)

	var peer *peerResult
	peerNote := ""
	if opts.NoPeer {
		peerNote = "peer skipped (--no-peer)"
	} else if p, err := runPeer(ctx, opts, cfg); err != nil {
		peerNote = "PyTorch peer skipped: " + err.Error()
	} else {
		peer = p
	}
	emit := func(r bench.Result, peerValue float64, higherIsBetter bool) {
		if peer != nil && peerValue > 0 {
			r = r.WithPeer("pytorch-"+peer.Version, peerValue, higherIsBetter)
		} else if peerNote != "" {
			r.Note += "; " + peerNote
		}
		opts.Emit(r)
	}
	var pTrain, pEx, pInfer, pRSS, pCPU float64
	if peer != nil {
		pTrain, pInfer, pRSS, pCPU = peer.TrainMS, peer.InferMS, peer.MaxRSS, peer.TrainCPUMS
		pEx = float64(cfg.Batch) / (peer.TrainMS / 1e3)
	}
	emit(bench.Result{Name: "transformer/train", Metric: "step time", Value: trainMS, Unit: "ms/step",
		Note: shape + ", dropout 0.1, fwd+bwd+Adam, median of " + fmt.Sprint(cfg.Iters) + "; " + threads}, pTrain, false)
	emit(bench.Result{Name: "transformer/train", Metric: "throughput", Value: float64(cfg.Batch) / (trainMS / 1e3), Unit: "examples/s",
		Note: shape}, pEx, true)
	emit(bench.Result{Name: "transformer/train", Metric: "CPU time", Value: trainCPU, Unit: "ms/step",
		Note: "user+system time of the process per step (all threads)"}, pCPU, false)
	emit(bench.Result{Name: "transformer/infer", Metric: "latency", Value: inferMS, Unit: "ms",
		Note: fmt.Sprintf("no-grad forward of 1x%d tokens, median of %d", cfg.SingleTokens, cfg.InferIters)}, pInfer, false)
	opts.Emit(bench.Result{Name: "transformer/train", Metric: "peak heap in use", Value: mem.heapInuse / (1 << 20), Unit: "MiB", Note: "runtime.MemStats.HeapInuse, max over steps"})
	opts.Emit(bench.Result{Name: "transformer/train", Metric: "peak Go sys", Value: mem.sys / (1 << 20), Unit: "MiB", Note: "runtime.MemStats.Sys"})
	emit(bench.Result{Name: "transformer", Metric: "max RSS", Value: bench.MaxRSSMiB(), Unit: "MiB", Note: "getrusage, whole process (peer: its own process)"}, pRSS, false)
	return nil
}

// runPeer runs tools/peer_transformer.py over the same shapes, with as many
// PyTorch threads as xmr has GOMAXPROCS.
func runPeer(ctx context.Context, opts bench.Options, cfg config) (*peerResult, error) {
	out, err := bench.RunPeer(ctx, opts, "peer_transformer.py", []string{"torch"},
		"--layers", fmt.Sprint(cfg.Layers), "--d", fmt.Sprint(cfg.D), "--heads", fmt.Sprint(cfg.Heads),
		"--ff", fmt.Sprint(cfg.FF), "--dropout", fmt.Sprint(cfg.Dropout), "--batch", fmt.Sprint(cfg.Batch),
		"--tokens", fmt.Sprint(cfg.Tokens), "--single-tokens", fmt.Sprint(cfg.SingleTokens),
		"--threads", fmt.Sprint(runtime.GOMAXPROCS(0)), "--warmup", fmt.Sprint(cfg.Warmup), "--iters", fmt.Sprint(cfg.Iters),
		"--infer-iters", fmt.Sprint(cfg.InferIters))
	if err != nil {
		return nil, err
	}
	var p peerResult
	if err := json.Unmarshal(bench.LastLine(out), &p); err != nil {
		return nil, fmt.Errorf("peer output %q: %w", out, err)
	}
	return &p, nil
}

// memPeak tracks the largest Go heap seen at the sample points.
type memPeak struct{ heapInuse, sys float64 }

func (m *memPeak) sample() {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.heapInuse = math.Max(m.heapInuse, float64(s.HeapInuse))
	m.sys = math.Max(m.sys, float64(s.Sys))
}

func msSince(t0 time.Time) float64 { return float64(time.Since(t0).Nanoseconds()) / 1e6 }

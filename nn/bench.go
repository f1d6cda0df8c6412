package nn

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/blas"
	"github.com/xmr-project/xmr/tensor"
)

func init() {
	bench.Register(bench.Benchmark{
		Name:    "transformer",
		Summary: "transformer encoder: training step (fwd+bwd+Adam) and 1-sequence inference, vs PyTorch on the CPU",
		Run:     runTransformerBench,
	})
}

// transformerBenchConfig is the work that `xmr bench transformer` times:
// TERAN's shared layers (2 post-norm layers at d = 1024, 4 heads, ff 2048).
type transformerBenchConfig struct {
	Layers, D, Heads, FF int
	Dropout              float32
	Batch, Tokens        int // training batch
	SingleTokens         int // the no-grad single sequence
	Warmup, Iters        int // training steps
	InferIters           int
}

func benchConfig(quick bool) transformerBenchConfig {
	if quick {
		return transformerBenchConfig{Layers: 2, D: 64, Heads: 4, FF: 128, Dropout: 0.1, Batch: 4, Tokens: 10, SingleTokens: 6, Warmup: 1, Iters: 2, InferIters: 5}
	}
	return transformerBenchConfig{Layers: 2, D: 1024, Heads: 4, FF: 2048, Dropout: 0.1, Batch: 32, Tokens: 36, SingleTokens: 12, Warmup: 2, Iters: 7, InferIters: 50}
}

// peerResult is what scripts/peer_transformer.py prints.
type peerResult struct {
	Version string  `json:"version"`
	Threads int     `json:"threads"`
	TrainMS float64 `json:"train_ms"`
	InferMS float64 `json:"infer_ms"`
	MaxRSS  float64 `json:"max_rss_mib"`
	// TrainCPUMS is the process's CPU time per training step (median).
	TrainCPUMS float64 `json:"train_cpu_ms"`
}

// runTransformerBench times the model and its PyTorch peer. One optional
// argument, blas-threads=N, runs OpenBLAS's own N threads per product
// instead of the default (one thread per call, products split over
// goroutines).
func runTransformerBench(ctx context.Context, opts bench.Options) error {
	cfg := benchConfig(opts.Quick)
	for _, a := range opts.Args {
		var n int
		if _, err := fmt.Sscanf(a, "blas-threads=%d", &n); err != nil || n < 1 {
			return fmt.Errorf("argument %q: want blas-threads=N (N >= 1)", a)
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

	rng := rand.New(rand.NewPCG(1, 2))
	enc := NewTransformerEncoder(rng, cfg.Layers, cfg.D, cfg.Heads, cfg.FF, cfg.Dropout, ReLU)
	params := Tensors(enc.Params())
	opt := newAdam(params, 1e-4)
	x := tensor.RandN(rng, cfg.Batch, cfg.Tokens, cfg.D)
	lengths := make([]int, cfg.Batch)
	for b := range lengths {
		lengths[b] = cfg.Tokens - b%8
	}
	valid := benchMask(cfg.Tokens, lengths)

	var mem memPeak
	tp := tensor.NewTape()
	step := func(i int) {
		tp.Reset()
		tp.Seed(1, uint64(i))
		y := enc.Forward(tp, x, valid) // (B, T, D)
		loss := tp.MeanAll(tp.Mul(y, y))
		mem.sample()
		tp.Backward(loss)
		opt.step() // also zeroes the gradients, as zero_grad() before the next step
		mem.sample()
	}
	trainTimes := make([]float64, 0, cfg.Iters)
	cpuTimes := make([]float64, 0, cfg.Iters)
	for i := 0; i < cfg.Warmup+cfg.Iters; i++ {
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
	trainMS, trainCPU := median(trainTimes), median(cpuTimes)

	xs := tensor.RandN(rng, 1, cfg.SingleTokens, cfg.D)
	inferTimes := make([]float64, 0, cfg.InferIters)
	for i := 0; i < 5+cfg.InferIters; i++ {
		t0 := time.Now()
		enc.Forward(nil, xs, nil)
		if i >= 5 {
			inferTimes = append(inferTimes, msSince(t0))
		}
	}
	inferMS := median(inferTimes)

	var peer *peerResult
	peerNote := ""
	if opts.NoPeer {
		peerNote = "peer skipped (--no-peer)"
	} else if p, err := runTransformerPeer(ctx, cfg); err != nil {
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

func benchMask(t int, lengths []int) *tensor.Tensor {
	m := tensor.New(len(lengths), t)
	for b, n := range lengths {
		for j := 0; j < n; j++ {
			m.Data[b*t+j] = 1
		}
	}
	return m
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

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// runTransformerPeer runs scripts/peer_transformer.py over the same shapes,
// with as many PyTorch threads as xmr has GOMAXPROCS (2 on the benchmark
// machine).
func runTransformerPeer(ctx context.Context, cfg transformerBenchConfig) (*peerResult, error) {
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		return nil, fmt.Errorf("%s not found", py)
	}
	script, err := findScript("scripts/peer_transformer.py")
	if err != nil {
		return nil, err
	}
	args := []string{script,
		"--layers", fmt.Sprint(cfg.Layers), "--d", fmt.Sprint(cfg.D), "--heads", fmt.Sprint(cfg.Heads),
		"--ff", fmt.Sprint(cfg.FF), "--dropout", fmt.Sprint(cfg.Dropout), "--batch", fmt.Sprint(cfg.Batch),
		"--tokens", fmt.Sprint(cfg.Tokens), "--single-tokens", fmt.Sprint(cfg.SingleTokens),
		"--threads", fmt.Sprint(runtime.GOMAXPROCS(0)), "--warmup", fmt.Sprint(cfg.Warmup), "--iters", fmt.Sprint(cfg.Iters),
		"--infer-iters", fmt.Sprint(cfg.InferIters)}
	cmd := exec.CommandContext(ctx, py, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := stderr.String()
		if bytes.Contains(stderr.Bytes(), []byte("No module named 'torch'")) {
			msg = "torch is not installed (Debian: apt-get install python3-torch)"
		}
		if len(msg) > 300 {
			msg = msg[len(msg)-300:]
		}
		return nil, fmt.Errorf("%s %s: %v: %s", py, script, err, msg)
	}
	var p peerResult
	if err := json.Unmarshal(bytes.TrimSpace(lastLine(out)), &p); err != nil {
		return nil, fmt.Errorf("peer output %q: %w", out, err)
	}
	return &p, nil
}

func lastLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

// findScript looks for rel in the working directory and its parents, so
// that the benchmark finds the repository's scripts from the root or from a
// package directory.
func findScript(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for i := 0; i < 6; i++ {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", fmt.Errorf("%s not found from the working directory (run from the repository)", rel)
}

// adam is a minimal Adam (PyTorch's defaults: betas 0.9, 0.999, eps 1e-8, no
// weight decay) for the benchmark and the tests; the training code has its
// own optimiser package.
type adam struct {
	params []*tensor.Tensor
	m, v   [][]float32
	lr     float64
	t      int
}

func newAdam(params []*tensor.Tensor, lr float64) *adam {
	a := &adam{params: params, lr: lr}
	for _, p := range params {
		a.m = append(a.m, make([]float32, p.Numel()))
		a.v = append(a.v, make([]float32, p.Numel()))
	}
	return a
}

// step applies one update from the parameters' gradients and zeroes them
// (PyTorch's step() then zero_grad(), in one pass over memory), split into
// chunks over GOMAXPROCS goroutines.
func (a *adam) step() {
	const b1, b2, eps = 0.9, 0.999, 1e-8
	a.t++
	c1 := 1 - math.Pow(b1, float64(a.t))
	c2 := 1 - math.Pow(b2, float64(a.t))
	stepSize := float32(a.lr / c1)
	invC2 := float32(1 / math.Sqrt(c2))
	const chunk = 1 << 16
	type job struct{ p, lo, hi int }
	jobs := make(chan job, 64)
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				p := a.params[j.p]
				g, m, v := p.Grad[j.lo:j.hi], a.m[j.p][j.lo:j.hi], a.v[j.p][j.lo:j.hi]
				w := p.Data[j.lo:j.hi]
				for i, gi := range g {
					g[i] = 0
					mi := b1*m[i] + (1-b1)*gi
					vi := b2*v[i] + (1-b2)*gi*gi
					m[i], v[i] = mi, vi
					w[i] -= stepSize * mi / (float32(math.Sqrt(float64(vi)))*invC2 + eps)
				}
			}
		}()
	}
	for pi, p := range a.params {
		if p.Grad == nil {
			continue
		}
		for lo := 0; lo < p.Numel(); lo += chunk {
			jobs <- job{pi, lo, min(lo+chunk, p.Numel())}
		}
	}
	close(jobs)
	wg.Wait()
}

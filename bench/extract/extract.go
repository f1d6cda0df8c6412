// Package extract is `xmr bench extract`: the speed of the detector that
// turns photos into region features (package detect: CenterNet,
// MobileNetV3 backbone, 512x512 input), in images per second, against the
// same network in PyTorch on the CPU (tools/peer_centernet.py, which reads
// the same two weight files) and, when Node and @tensorflow/tfjs are
// installed, TensorFlow.js's pure-JavaScript CPU backend
// (tools/centernet_tfjs.js), in the same run.
package extract

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/blas"
	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/tools"
)

// Benchmark is `xmr bench extract`.
var Benchmark = bench.Benchmark{
	Name:    "extract",
	Summary: "detector (CenterNet MobileNetV3, 512x512) images/s, vs the same network in PyTorch and TF.js on the CPU",
	Run:     run,
}

// EnvTFJS names the folder holding node_modules/@tensorflow/tfjs; default
// DefaultCacheDir()/tfjs.
const EnvTFJS = "XMR_TFJS_MODULES"

type peerResult struct {
	Version string  `json:"version"`
	Threads int     `json:"threads"`
	Images  int     `json:"images"`
	Seconds float64 `json:"seconds"`
	CPU     float64 `json:"cpu_seconds"`
	Backend string  `json:"backend"`
	TFJS    string  `json:"tfjs"`
	Start   float64 `json:"start"` // Unix time the timed images began
	End     float64 `json:"end"`
}

func run(ctx context.Context, opts bench.Options) error {
	if len(opts.Args) > 0 {
		return fmt.Errorf("extract: takes no arguments, got %q", opts.Args)
	}
	iters := 20
	if opts.Quick {
		iters = 2
	}
	dir, err := detect.Fetch(ctx, detect.DefaultCacheDir())
	if err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	d, err := detect.Load(dir)
	if err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	img := make([]float32, detect.InputSize*detect.InputSize*3)
	for i := range img {
		img[i] = float32(rng.IntN(256))
	}
	runOpts := detect.RunOptions{MinScore: 0.2, MaxDetections: 36}
	if _, err := d.Run(ctx, img, runOpts); err != nil { // warm-up
		return fmt.Errorf("extract: %w", err)
	}
	times := make([]float64, 0, iters)
	t0, c0 := time.Now(), bench.CPUSeconds()
	for range iters {
		if err := ctx.Err(); err != nil {
			return err
		}
		t := time.Now()
		out, err := d.Run(ctx, img, runOpts)
		if err != nil {
			return fmt.Errorf("extract: %w", err)
		}
		out.Release() // as xmr extract does once it has pooled the regions
		times = append(times, time.Since(t).Seconds())
	}
	wall, cpu := time.Since(t0).Seconds(), bench.CPUSeconds()-c0
	ips := float64(iters) / wall
	note := fmt.Sprintf("%d images 512x512, one at a time, detections + 4 feature maps; GOMAXPROCS=%d, %s; median %.0f ms/image, CPU %.0f ms/image",
		iters, runtime.GOMAXPROCS(0), blas.Describe(), bench.Median(times)*1e3, cpu/float64(iters)*1e3)
	workers := runtime.GOMAXPROCS(0)
	pips, pcpu, err := concurrent(ctx, d, img, runOpts, iters, workers)
	if err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	pnote := fmt.Sprintf("%d images 512x512, %d at a time (as xmr extract --workers %d runs them); CPU %.0f ms/image", iters, workers, workers, pcpu*1e3)

	r := bench.Result{Name: "extract", Metric: "detector throughput", Value: ips, Unit: "images/s", Note: note}
	rp := bench.Result{Name: "extract", Metric: fmt.Sprintf("detector throughput, %d images at a time", workers), Value: pips, Unit: "images/s", Note: pnote}
	if opts.NoPeer {
		r.Note += "; peers skipped (--no-peer)"
		rp.Note += "; peers skipped (--no-peer)"
		opts.Emit(r)
		opts.Emit(rp)
		return nil
	}
	work, cleanup, err := bench.WorkDir("", "xmr-bench-extract-*")
	if err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	defer cleanup()
	// PyTorch.
	if p, agree, err := runTorch(ctx, opts, d, dir, work, img, iters); err != nil {
		r.Note += "; PyTorch peer skipped: " + err.Error()
		opts.Emit(r)
	} else {
		rr := r.WithPeer("pytorch-"+p.Version, float64(p.Images)/p.Seconds, true)
		rr.Note += fmt.Sprintf("; peer: %d threads, its heatmap within %.1e (max|diff|/max) of ours", p.Threads, agree)
		opts.Emit(rr)
		if p.CPU > 0 {
			c := bench.Result{Name: "extract", Metric: "detector CPU time", Value: cpu / float64(iters) * 1e3, Unit: "ms/image",
				Note: "user+system time of the process per image, all threads (unaffected by time spent waiting for a CPU)"}
			opts.Emit(c.WithPeer("pytorch-"+p.Version, p.CPU/float64(p.Images)*1e3, false))
		}
		// Several images at once: the peer as that many single-threaded
		// processes, the way to run PyTorch for throughput on a CPU.
		if pp, err := runTorchProcs(ctx, opts, dir, iters, workers); err != nil {
			rp.Note += "; PyTorch peer skipped: " + err.Error()
			opts.Emit(rp)
		} else {
			rr := rp.WithPeer("pytorch-"+pp.Version, float64(pp.Images)/pp.Seconds, true)
			rr.Note += fmt.Sprintf("; peer: %d processes of 1 thread, timed together", workers)
			opts.Emit(rr)
		}
	}
	// TF.js.
	if p, err := runTFJS(ctx, dir, work, iters); err != nil {
		opts.Emit(bench.Result{Name: "extract", Metric: "detector throughput vs tfjs", Value: ips, Unit: "images/s", Note: "tfjs peer skipped: " + err.Error()})
	} else {
		rr := bench.Result{Name: "extract", Metric: "detector throughput vs tfjs", Value: ips, Unit: "images/s",
			Note: fmt.Sprintf("tfjs %s backend %s (pure JavaScript, single-threaded)", p.TFJS, p.Backend)}
		opts.Emit(rr.WithPeer("tfjs-"+p.TFJS+"-"+p.Backend, float64(p.Images)/p.Seconds, true))
		if p.CPU > 0 {
			c := bench.Result{Name: "extract", Metric: "detector CPU time vs tfjs", Value: cpu / float64(iters) * 1e3, Unit: "ms/image",
				Note: "user+system time of the process per image"}
			opts.Emit(c.WithPeer("tfjs-"+p.TFJS+"-"+p.Backend, p.CPU/float64(p.Images)*1e3, false))
		}
	}
	return nil
}

// runTorch runs the PyTorch peer with as many threads as GOMAXPROCS, and
// checks its heatmap for img against ours.
func runTorch(ctx context.Context, opts bench.Options, d *detect.Detector, dir, work string, img []float32, iters int) (*peerResult, float64, error) {
	in, kp := filepath.Join(work, "in.f32"), filepath.Join(work, "kp.f32")
	if err := writeF32(in, img); err != nil {
		return nil, 0, err
	}
	out, err := bench.RunPeer(ctx, opts, "peer_centernet.py", []string{"torch", "numpy"},
		"--model", dir, "--iters", fmt.Sprint(iters), "--threads", fmt.Sprint(runtime.GOMAXPROCS(0)), "--input", in, "--dump", kp)
	if err != nil {
		return nil, 0, err
	}
	var p peerResult
	if err := json.Unmarshal(bench.LastLine(out), &p); err != nil || p.Seconds <= 0 {
		return nil, 0, fmt.Errorf("peer output %q: %v", out, err)
	}
	theirs, err := readF32(kp)
	if err != nil {
		return nil, 0, err
	}
	ours, err := d.Heatmap(ctx, img)
	if err != nil {
		return nil, 0, err
	}
	if len(theirs) != len(ours) {
		return nil, 0, fmt.Errorf("peer heatmap has %d values, ours %d", len(theirs), len(ours))
	}
	var diff, top float64
	for i := range ours {
		diff = math.Max(diff, math.Abs(float64(ours[i]-theirs[i])))
		top = math.Max(top, math.Abs(float64(theirs[i])))
	}
	agree := diff / top
	if agree > 1e-3 {
		return nil, 0, fmt.Errorf("the peer computes a different heatmap (max|diff|/max %.1e)", agree)
	}
	return &p, agree, nil
}

// concurrent runs iters images through d, workers at a time, and returns
// the throughput (images/s) and the CPU time per image (seconds).
func concurrent(ctx context.Context, d *detect.Detector, img []float32, o detect.RunOptions, iters, workers int) (float64, float64, error) {
	next := make(chan struct{}, iters)
	for range iters {
		next <- struct{}{}
	}
	close(next)
	t0, c0 := time.Now(), bench.CPUSeconds()
	err := inParallel(workers, func(int) error {
		for range next {
			if err := ctx.Err(); err != nil {
				return err
			}
			out, err := d.Run(ctx, img, o)
			if err != nil {
				return err
			}
			out.Release()
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return float64(iters) / time.Since(t0).Seconds(), (bench.CPUSeconds() - c0) / float64(iters), nil
}

// runTorchProcs runs procs copies of the PyTorch peer at once, one thread
// each, which start timing together after their warm-ups; the result's
// Images is their total and Seconds the span from the first start to the
// last end.
func runTorchProcs(ctx context.Context, opts bench.Options, dir string, iters, procs int) (*peerResult, error) {
	barrier, err := os.MkdirTemp("", "xmr-bench-barrier-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(barrier)
	each := max(iters/procs, 1)
	// A peer that fails ends the others, which would wait at the barrier
	// for it for ever.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	outs := make([]*peerResult, procs)
	err = inParallel(procs, func(i int) error {
		out, err := bench.RunPeer(ctx, opts, "peer_centernet.py", []string{"torch", "numpy"},
			"--model", dir, "--iters", fmt.Sprint(each), "--threads", "1", "--barrier", barrier, "--procs", fmt.Sprint(procs))
		var p peerResult
		if err == nil {
			err = json.Unmarshal(bench.LastLine(out), &p)
		}
		if err == nil && (p.Seconds <= 0 || p.End <= p.Start) {
			err = fmt.Errorf("peer output %q has no timing", out)
		}
		if err != nil {
			cancel()
			return err
		}
		outs[i] = &p
		return nil
	})
	if err != nil {
		return nil, err
	}
	sum := &peerResult{Version: outs[0].Version, Threads: 1, Start: outs[0].Start, End: outs[0].End}
	for _, p := range outs {
		sum.Images += p.Images
		sum.CPU += p.CPU
		sum.Start, sum.End = math.Min(sum.Start, p.Start), math.Max(sum.End, p.End)
	}
	sum.Seconds = sum.End - sum.Start
	return sum, nil
}

// inParallel runs f(0) .. f(n-1) on n goroutines and returns the first
// error any of them returned, once all have ended.
func inParallel(n int, f func(i int) error) error {
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- f(i) }()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// runTFJS times tools/centernet_tfjs.js when node and the npm package are there.
func runTFJS(ctx context.Context, dir, work string, iters int) (*peerResult, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node is not installed")
	}
	modules := os.Getenv(EnvTFJS)
	if modules == "" {
		modules = filepath.Join(detect.DefaultCacheDir(), "tfjs")
	}
	if _, err := os.Stat(filepath.Join(modules, "node_modules", "@tensorflow", "tfjs")); err != nil {
		return nil, fmt.Errorf("@tensorflow/tfjs is not installed in %s ($%s)", modules, EnvTFJS)
	}
	script, err := tools.WriteScript(work, "centernet_tfjs.js")
	if err != nil {
		return nil, err
	}
	n := max(iters/4, 2) // it is much slower
	out, err := bench.Output(exec.CommandContext(ctx, node, script, "--modules", modules, "--model", dir, "--bench", fmt.Sprint(n)))
	if err != nil {
		return nil, err
	}
	var p peerResult
	if err := json.Unmarshal(bench.LastLine(out), &p); err != nil || p.Seconds <= 0 {
		return nil, fmt.Errorf("tfjs output %q: %v", out, err)
	}
	return &p, nil
}

func writeF32(path string, v []float32) error {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return os.WriteFile(path, b, 0o644)
}

func readF32(path string) ([]float32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

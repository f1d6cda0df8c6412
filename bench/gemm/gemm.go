// Package gemm is `xmr bench gemm`: float32 matrix products of the
// transformer's shapes through the path the models use
// (tensor.(*Tape).MatMul with a nil tape) and through blas.Sgemm, each
// against cblas_sgemm of OpenBLAS called directly in the same run, and the
// pure-Go fallbacks against the same peer.
package gemm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ebitengine/purego"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/blas"
	"github.com/xmr-project/xmr/tensor"
)

// Benchmark is `xmr bench gemm [MxKxN ...]`.
var Benchmark = bench.Benchmark{
	Name:    "gemm",
	Summary: "float32 GEMM (transformer shapes): tape.MatMul and blas.Sgemm vs raw cblas_sgemm, and the pure-Go fallbacks [MxKxN ...]",
	Run:     run,
}

// Shape is one product: (M, K) x (K, N).
type Shape struct{ M, K, N int }

func (s Shape) String() string { return fmt.Sprintf("%dx%dx%d", s.M, s.K, s.N) }

// flops is the number of floating-point operations of one product.
func (s Shape) flops() float64 { return 2 * float64(s.M) * float64(s.K) * float64(s.N) }

// Shapes are the default shapes, M x K x N: a square reference, then the
// transformer's: 36 regions x 2048 features, a 12-word caption at width
// 1024, a batch of 32 images x 36 regions at width 1024 and its 2048-wide
// region features.
var Shapes = []Shape{{1024, 1024, 1024}, {36, 2048, 2048}, {12, 1024, 1024}, {1152, 1024, 1024}, {1152, 2048, 1024}}

// ParseShape reads "MxKxN".
func ParseShape(s string) (Shape, error) {
	parts := strings.Split(s, "x")
	if len(parts) != 3 {
		return Shape{}, fmt.Errorf("shape %q: want MxKxN", s)
	}
	var d [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v <= 0 {
			return Shape{}, fmt.Errorf("shape %q: %q is not a positive integer", s, p)
		}
		d[i] = v
	}
	return Shape{d[0], d[1], d[2]}, nil
}

// rawSgemm is cblas_sgemm as exported by OpenBLAS, bound with no wrapper.
type rawSgemm func(order, transA, transB, m, n, k int32, alpha float32, a *float32, lda int32, b *float32, ldb int32, beta float32, c *float32, ldc int32)

// loadRaw opens OpenBLAS on its own (not through package blas) and binds
// cblas_sgemm.
func loadRaw() (rawSgemm, string, error) {
	var errs []error
	for _, name := range []string{"libopenblas.so.0", "libopenblas.so", "/usr/lib/x86_64-linux-gnu/libopenblas.so.0", "/usr/lib/aarch64-linux-gnu/libopenblas.so.0", "libopenblas.dylib"} {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sym, err := purego.Dlsym(h, "cblas_sgemm")
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		var f rawSgemm
		purego.RegisterFunc(&f, sym)
		return f, name, nil
	}
	return nil, "", fmt.Errorf("OpenBLAS not found: %w", errors.Join(errs...))
}

// variant is one way of computing C = A*B.
type variant struct {
	metric string
	run    func()
}

// run measures every shape (opts.Args may list others as MxKxN) and emits,
// per shape, GFLOP/s of tape.MatMul and blas.Sgemm with raw cblas_sgemm as
// the peer, timed by the wall clock with OpenBLAS's threads; then, unless
// opts.Quick, the same on one OpenBLAS thread timed by the thread's CPU
// clock (robust on a loaded machine); then each pure-Go GEMM with the same
// peer. Our calls and the raw call run interleaved, call by call; the best
// call of each counts.
func run(ctx context.Context, opts bench.Options) error {
	shapes := Shapes
	if len(opts.Args) > 0 {
		shapes = nil
		for _, a := range opts.Args {
			s, err := ParseShape(a)
			if err != nil {
				return err
			}
			shapes = append(shapes, s)
		}
	}
	// Time budgets per shape: ours and the peer share one, each fallback
	// has its own.
	budget, goBudget, minReps := 3*time.Second, 2*time.Second, 20
	if opts.Quick {
		budget, goBudget, minReps = 200*time.Millisecond, 0, 2
	}
	var raw rawSgemm
	var rawErr error
	peer, note := "cblas_sgemm", ""
	if opts.NoPeer {
		rawErr = errors.New("peer disabled by --no-peer")
	} else {
		var lib string
		raw, lib, rawErr = loadRaw()
		if rawErr == nil {
			peer = "cblas_sgemm (" + lib + ")"
		}
	}
	impl := blas.Current()
	ob, _ := impl.(*blas.OpenBLAS)
	if ob != nil {
		note = "ours: " + blas.Describe() + fmt.Sprintf("; peer: OpenBLAS's own %d threads", ob.NativeThreads())
	} else {
		note = "ours = " + blas.Describe()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range shapes {
		if err := ctx.Err(); err != nil {
			return err
		}
		a, b := randSlice(rng, s.M*s.K), randSlice(rng, s.K*s.N)
		ta, tb := tensor.FromData(a, s.M, s.K), tensor.FromData(b, s.K, s.N)
		cOurs, cRaw := make([]float32, s.M*s.N), make([]float32, s.M*s.N)
		var tp *tensor.Tape // nil: inference, as the models run it
		var tapeOut *tensor.Tensor
		ours := []variant{
			{"tape.MatMul", func() { tapeOut = tp.MatMul(ta, tb, false, false) }},
			{"blas.Sgemm", func() { blas.Sgemm(false, false, s.M, s.N, s.K, 1, a, s.K, b, s.N, 0, cOurs, s.N) }},
		}
		name := "gemm " + s.String()
		vs := ours
		if raw != nil {
			rawRun := func() {
				// The peer is cblas_sgemm as a user gets it: with
				// OpenBLAS's own threads (xmr runs it on one per call).
				if ob != nil && ob.Split() > 1 {
					ob.SetThreads(ob.NativeThreads())
					defer ob.SetThreads(1)
				}
				raw(101, 111, 111, int32(s.M), int32(s.N), int32(s.K), 1, &a[0], int32(s.K), &b[0], int32(s.N), 0, &cRaw[0], int32(s.N))
			}
			vs = append(vs, variant{"cblas_sgemm", rawRun})
		}
		best, reps := measure(vs, budget, minReps, wallClock)
		var rawGF float64
		if raw != nil {
			if d := maxRelDiff(tapeOut.Data, cRaw); d > 1e-4 {
				return fmt.Errorf("%s: tape.MatMul differs from cblas_sgemm by %.3g (relative)", name, d)
			}
			rawGF = s.flops() / best[len(ours)] / 1e9
		}
		emit := func(metric string, sec, peerGF float64, note string) {
			r := bench.Result{Name: name, Metric: metric, Value: s.flops() / sec / 1e9, Unit: "GFLOP/s", Note: note}
			if raw != nil {
				r = r.WithPeer(peer, peerGF, true)
			} else {
				r.Note += fmt.Sprintf("; no peer: %v", rawErr)
			}
			opts.Emit(r)
		}
		for i, v := range ours {
			emit(v.metric, best[i], rawGF, fmt.Sprintf("best of %d calls; %s", reps, note))
		}
		// The same comparison on one OpenBLAS thread timed by the calling
		// thread's CPU clock: time spent descheduled does not count, so the
		// ratio holds on a loaded machine.
		if ob, ok := impl.(*blas.OpenBLAS); ok && raw != nil && !opts.Quick && threadCPUAvailable() {
			cbest, creps := measureOneThread(ob, vs, budget/2, minReps)
			for i, v := range ours {
				emit(v.metric+" [1 thread, CPU time]", cbest[i], s.flops()/cbest[len(ours)]/1e9, fmt.Sprintf("best of %d calls", creps))
			}
		}
		for _, g := range fallbacks() {
			run := func() { g.impl.Sgemm(false, false, s.M, s.N, s.K, 1, a, s.K, b, s.N, 0, cOurs, s.N) }
			gbest, greps := measure([]variant{{g.name, run}}, goBudget, 1, wallClock)
			emit(g.name, gbest[0], rawGF, fmt.Sprintf("best of %d calls, %d goroutines", greps, runtime.GOMAXPROCS(0)))
		}
	}
	return nil
}

// measureOneThread runs measure with OpenBLAS on one thread, which then
// computes in the calling goroutine's thread, and times the calls by that
// thread's CPU clock.
func measureOneThread(ob *blas.OpenBLAS, vs []variant, budget time.Duration, minReps int) ([]float64, int) {
	threads := ob.Threads()
	ob.SetThreads(1)
	defer ob.SetThreads(threads)
	defer ob.SetSplit(ob.SetSplit(1))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return measure(vs, budget, minReps, threadCPU)
}

// wallClock returns seconds since an arbitrary origin.
func wallClock() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// fallback is a pure-Go GEMM to report.
type fallback struct {
	name string
	impl blas.Impl
}

func fallbacks() []fallback {
	return []fallback{{"go fallback (gonum)", blas.Go{}}}
}

// maxReps bounds the calls per variant.
const maxReps = 1000

// measure times the variants call by call on clock (in seconds),
// interleaved, rotating their order from round to round, for at least
// minReps rounds and until budget (wall time) has passed. Each variant's
// best call is its speed with the machine to itself, so that other load
// disturbs the comparison little. It returns each variant's best seconds
// per call and the number of rounds.
func measure(vs []variant, budget time.Duration, minReps int, clock func() float64) ([]float64, int) {
	best := make([]float64, len(vs))
	for i, v := range vs {
		v.run() // warm up: page in, start threads
		best[i] = math.Inf(1)
	}
	start := time.Now()
	r := 0
	for ; r < maxReps && (r < minReps || time.Since(start) < budget); r++ {
		for j := range vs {
			i := (j + r) % len(vs)
			t0 := clock()
			vs[i].run()
			best[i] = min(best[i], clock()-t0)
		}
	}
	return best, r
}

func randSlice(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.Float64()*2 - 1)
	}
	return x
}

// maxRelDiff is max |x-y| over max |y|.
func maxRelDiff(x, y []float32) float64 {
	var d, m float64
	for i := range x {
		d = max(d, math.Abs(float64(x[i]-y[i])))
		m = max(m, math.Abs(float64(y[i])))
	}
	if m == 0 {
		return d
	}
	return d / m
}

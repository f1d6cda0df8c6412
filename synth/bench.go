package synth

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/blas"
)

func init() {
	bench.Register(bench.Benchmark{
		Name:    "synth",
		Summary: "synthetic world generation: images/s with 256-d features and no PNG, then with PNG files",
		Run:     runBench,
	})
}

// SingleThreadBLAS makes OpenBLAS run each product on the calling thread
// and returns a function restoring the previous setting. Generation runs one
// product per chunk on every worker, so BLAS threads would only compete with
// the workers. The output does not depend on it.
func SingleThreadBLAS() (restore func()) {
	ob, ok := blas.Current().(*blas.OpenBLAS)
	if !ok || ob.Threads() <= 1 {
		return func() {}
	}
	prev := ob.Threads()
	ob.SetThreads(1)
	return func() { ob.SetThreads(prev) }
}

// runBench generates worlds in a temporary directory and reports images/s
// without and with PNG files.
func runBench(ctx context.Context, opts bench.Options) error {
	defer SingleThreadBLAS()()
	dir, err := os.MkdirTemp("", "xmr-synth-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	n, nPNG := 20000, 4000
	if opts.Quick {
		n, nPNG = 500, 200
	}
	for _, c := range []struct {
		metric string
		cfg    Config
	}{
		{"images/s", Config{N: n, Seed: 1, Dim: 256, NoImages: true}},
		{"png images/s", Config{N: nPNG, Seed: 1, Dim: 256}},
	} {
		start := time.Now()
		if _, err := Generate(ctx, dir, c.cfg); err != nil {
			return err
		}
		el := time.Since(start)
		opts.Emit(bench.Result{Name: "synth", Metric: c.metric, Value: float64(c.cfg.N) / el.Seconds(), Unit: "images/s",
			Note: fmt.Sprintf("n %d, dim 256, %d regions, %d workers, %s", c.cfg.N, 36, runtime.NumCPU(), el.Round(time.Millisecond))})
	}
	return nil
}

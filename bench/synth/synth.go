// Package synth is `xmr bench synth`: generation of package synth's world
// (imported here under the same name) in images per second, without and
// with PNG files.
package synth

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/synth"
)

// Benchmark is `xmr bench synth`.
var Benchmark = bench.Benchmark{
	Name:    "synth",
	Summary: "synthetic world generation: images/s with 256-d features and no PNG, then with PNG files",
	Run:     run,
}

// run generates worlds in a temporary directory and reports images/s
// without and with PNG files.
func run(ctx context.Context, opts bench.Options) error {
	defer synth.SingleThreadBLAS()()
	dir, err := os.MkdirTemp("", "xmr-synth-bench-")
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	defer os.RemoveAll(dir)
	n, nPNG := 20000, 4000
	if opts.Quick {
		n, nPNG = 500, 200
	}
	for _, c := range []struct {
		metric string
		cfg    synth.Config
	}{
		{"images/s", synth.Config{N: n, Seed: 1, Dim: 256, NoImages: true}},
		{"png images/s", synth.Config{N: nPNG, Seed: 1, Dim: 256}},
	} {
		start := time.Now()
		if _, err := synth.Generate(ctx, dir, c.cfg); err != nil {
			return err
		}
		el := time.Since(start)
		opts.Emit(bench.Result{Name: "synth", Metric: c.metric, Value: float64(c.cfg.N) / el.Seconds(), Unit: "images/s",
			Note: fmt.Sprintf("n %d, dim 256, %d regions, %d workers, %s", c.cfg.N, 36, runtime.NumCPU(), el.Round(time.Millisecond))})
	}
	return nil
}

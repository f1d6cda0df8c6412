package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/xmr-project/xmr/bench"
	benchextract "github.com/xmr-project/xmr/bench/extract"
	"github.com/xmr-project/xmr/bench/gemm"
	"github.com/xmr-project/xmr/bench/learn"
	"github.com/xmr-project/xmr/bench/rouge"
	"github.com/xmr-project/xmr/bench/seamtext"
	benchsearch "github.com/xmr-project/xmr/bench/search"
	benchserve "github.com/xmr-project/xmr/bench/serve"
	"github.com/xmr-project/xmr/bench/spice"
	"github.com/xmr-project/xmr/bench/synth"
	"github.com/xmr-project/xmr/bench/trainstep"
	"github.com/xmr-project/xmr/bench/transformer"
	benchweaviate "github.com/xmr-project/xmr/bench/weaviate"
	"github.com/xmr-project/xmr/outpath"
	"github.com/xmr-project/xmr/tools"
)

// benchmarks are the benchmarks `xmr bench` runs, in the order `xmr bench
// list` shows them.
var benchmarks = []bench.Benchmark{
	benchextract.Benchmark,
	gemm.Benchmark,
	learn.Benchmark,
	rouge.Benchmark,
	benchsearch.Benchmark,
	seamtext.Benchmark,
	benchserve.Benchmark,
	spice.Benchmark,
	synth.Benchmark,
	trainstep.Benchmark,
	transformer.Benchmark,
	benchweaviate.Benchmark,
}

// benchFlags are the flags of `xmr bench`.
type benchFlags struct {
	json   bool
	quick  bool
	noPeer bool
	python string
}

var benchFlagValues benchFlags

func init() {
	register(&command{
		name:    "bench",
		summary: "run a benchmark (speed, or learning on a data set) and print a table or JSON lines",
		usage:   "[flags] NAME [args]   (NAME \"list\" shows the benchmarks)",
		examples: `  xmr bench list
  xmr bench gemm
  xmr bench transformer --json
  xmr bench seam-text 25 100 500
  xmr bench learn data=../shared/data/flickr8k-mini budget=4m   # every model vs VSE++ in PyTorch
  xmr bench learn data=../shared/data/flickr8k-mini budget=2m train-images=90   # the same on 90 of the 181 train images
  xmr bench learn data=../shared/data/flickr8k-mini budget=2m repeats=3   # each model and the peer 3 times (seeds 1-3), mean rsum
  xmr bench transformer --python /usr/bin/python3
  xmr bench gemm --no-peer`,
		setFlags: func(fs *flag.FlagSet) {
			f := &benchFlagValues
			fs.BoolVar(&f.json, "json", false, "print one JSON object per result: name, metric, value, unit[, peer, peer_value, ratio]")
			fs.BoolVar(&f.quick, "quick", false, "fewer repetitions (for smoke tests)")
			fs.BoolVar(&f.noPeer, "no-peer", false, "do not run peers (raw OpenBLAS, PyTorch, FAISS)")
			fs.StringVar(&f.python, "python", "", "Python interpreter for the Python peers (default: $"+tools.EnvPython+", else the first python3 on $PATH that has the peer's modules)")
		},
		run: func(ctx context.Context, args []string) error {
			return runBench(ctx, args, benchFlagValues, stdout)
		},
	})
}

// runBench runs `xmr bench` with the positional arguments args, writing the
// results to w.
func runBench(ctx context.Context, args []string, f benchFlags, w io.Writer) error {
	args, err := hoistFlags(args, map[string]*bool{"json": &f.json, "quick": &f.quick, "no-peer": &f.noPeer}, map[string]*string{"python": &f.python})
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return usageErrorf("name a benchmark; \"xmr bench list\" shows them")
	}
	if args[0] == "list" {
		for _, b := range benchmarks {
			if _, err := fmt.Fprintf(w, "%-14s %s\n", b.Name, b.Summary); err != nil {
				return err
			}
		}
		return nil
	}
	b, ok := lookupBenchmark(args[0])
	if !ok {
		names := make([]string, len(benchmarks))
		for i, b := range benchmarks {
			names[i] = b.Name
		}
		return usageErrorf("unknown benchmark %q (have: %s)", args[0], strings.Join(names, ", "))
	}
	if err := checkBenchOutputs(b.Name, args[1:]); err != nil {
		return err
	}
	var results []bench.Result
	var emitErr error
	opts := bench.Options{Quick: f.quick, NoPeer: f.noPeer, Python: f.python, Args: args[1:]}
	opts.Emit = func(r bench.Result) {
		if f.json && emitErr == nil {
			emitErr = bench.WriteJSON(w, r)
		}
		results = append(results, r)
	}
	if err := b.Run(ctx, opts); err != nil {
		return fmt.Errorf("benchmark %s: %w", b.Name, err)
	}
	if emitErr != nil {
		return emitErr
	}
	if !f.json {
		return bench.WriteTable(w, results)
	}
	return nil
}

// benchInputArgs are the key=value arguments of benchmarks that name a
// file or directory the benchmark reads.
var benchInputArgs = []string{"world", "checkpoint", "config", "data", "server"}

// benchScratch lists, for each benchmark that takes a dir= scratch
// directory, what it writes in it (outpath.Output.Writes patterns); a
// benchmark not listed owns the whole directory.
var benchScratch = map[string][]string{
	"search":   {"exhaustive", "paper", "world", "scale"},
	"serve":    {"world", "index"},
	"weaviate": {"weaviate", "local.idx"},
}

// checkBenchOutputs applies checkOutputs to a benchmark's key=value
// arguments: its dir= scratch directory may not be, lie in, or write over
// any file or directory that another argument names as an input (world=,
// checkpoint=, ...), and must be a directory if it exists.
func checkBenchOutputs(name string, args []string) error {
	var ins []outpath.Input
	var out outpath.Output
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			continue
		}
		if k == "dir" {
			out = outpath.Output{Flag: "dir=", Path: v, Kind: outpath.Dir, Writes: benchScratch[name]}
			continue
		}
		if slices.Contains(benchInputArgs, k) {
			ins = append(ins, outpath.Input{Flag: k + "=", Path: v})
		}
	}
	return checkOutputs(ins, []outpath.Output{out})
}

// lookupBenchmark finds a benchmark by name.
func lookupBenchmark(name string) (bench.Benchmark, bool) {
	for _, b := range benchmarks {
		if b.Name == name {
			return b, true
		}
	}
	return bench.Benchmark{}, false
}

// hoistFlags lets flags follow positional arguments ("xmr bench gemm
// --json", "xmr bench transformer --python /usr/bin/python3"): it removes
// the boolean flags in bools and the string flags in strs (as --name VALUE
// or --name=VALUE, with one or two dashes) from args and sets them.
func hoistFlags(args []string, bools map[string]*bool, strs map[string]*string) ([]string, error) {
	out := args[:0:0]
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if !strings.HasPrefix(a, "-") {
			out = append(out, a)
			continue
		}
		if p, ok := bools[name]; ok && !hasValue {
			*p = true
			continue
		}
		if p, ok := strs[name]; ok {
			if !hasValue {
				if i+1 == len(args) {
					return nil, usageErrorf("flag needs an argument: %s", a)
				}
				i++
				value = args[i]
			}
			*p = value
			continue
		}
		out = append(out, a)
	}
	return out, nil
}

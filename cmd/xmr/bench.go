package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/xmr-project/xmr/bench"
)

var benchFlags struct {
	json   bool
	quick  bool
	noPeer bool
}

func init() {
	register(&command{
		name:    "bench",
		summary: "run a speed benchmark and print a table or JSON lines",
		usage:   "[flags] NAME [args]   (NAME \"list\" shows the benchmarks)",
		examples: `  xmr bench list
  xmr bench gemm
  xmr bench transformer --json
  xmr bench gemm --no-peer`,
		setFlags: func(fs *flag.FlagSet) {
			fs.BoolVar(&benchFlags.json, "json", false, "print one JSON object per result: name, metric, value, unit[, peer, peer_value, ratio]")
			fs.BoolVar(&benchFlags.quick, "quick", false, "fewer repetitions (for smoke tests)")
			fs.BoolVar(&benchFlags.noPeer, "no-peer", false, "do not run peers (raw OpenBLAS, PyTorch, FAISS)")
		},
		run: runBench,
	})
}

func runBench(ctx context.Context, args []string) error {
	args = hoistFlags(args, map[string]*bool{"--json": &benchFlags.json, "-json": &benchFlags.json, "--quick": &benchFlags.quick, "-quick": &benchFlags.quick, "--no-peer": &benchFlags.noPeer, "-no-peer": &benchFlags.noPeer})
	if len(args) == 0 {
		return usageErrorf("name a benchmark; \"xmr bench list\" shows them")
	}
	if args[0] == "list" {
		for _, b := range bench.All() {
			fmt.Fprintf(stdout, "%-14s %s\n", b.Name, b.Summary)
		}
		return nil
	}
	b, ok := bench.Lookup(args[0])
	if !ok {
		names := []string{}
		for _, b := range bench.All() {
			names = append(names, b.Name)
		}
		return usageErrorf("unknown benchmark %q (have: %s)", args[0], strings.Join(names, ", "))
	}
	var results []bench.Result
	opts := bench.Options{Quick: benchFlags.quick, NoPeer: benchFlags.noPeer, Args: args[1:]}
	opts.Emit = func(r bench.Result) {
		if benchFlags.json {
			bench.WriteJSON(stdout, r)
		}
		results = append(results, r)
	}
	if err := b.Run(ctx, opts); err != nil {
		return fmt.Errorf("benchmark %s: %w", b.Name, err)
	}
	if !benchFlags.json {
		return bench.WriteTable(stdout, results)
	}
	return nil
}

// hoistFlags lets boolean flags follow positional arguments ("xmr bench gemm
// --json"): it removes them from args and sets them.
func hoistFlags(args []string, bools map[string]*bool) []string {
	out := args[:0:0]
	for _, a := range args {
		if p, ok := bools[a]; ok {
			*p = true
			continue
		}
		out = append(out, a)
	}
	return out
}

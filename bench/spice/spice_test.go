package spice

import (
	"context"
	"testing"

	"github.com/xmr-project/xmr/bench"
)

// TestQuick runs the benchmark at its quick size.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the quick SPICE benchmark parses 2,500 captions; CI runs without -short")
	}
	var rs []bench.Result
	if err := Benchmark.Run(context.Background(), bench.Options{Quick: true, Emit: func(r bench.Result) { rs = append(rs, r) }}); err != nil {
		t.Fatal(err)
	}
	if len(rs) < 5 {
		t.Fatalf("%d results", len(rs))
	}
	for _, r := range rs {
		if r.Value <= 0 {
			t.Errorf("result %+v", r)
		}
	}
}

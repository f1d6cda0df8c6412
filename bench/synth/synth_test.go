package synth

import (
	"context"
	"testing"

	"github.com/xmr-project/xmr/bench"
)

// TestQuick runs the benchmark at its quick size.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the quick synth benchmark writes 700 images")
	}
	var rs []bench.Result
	if err := Benchmark.Run(context.Background(), bench.Options{Quick: true, Emit: func(r bench.Result) { rs = append(rs, r) }}); err != nil {
		t.Fatal(err)
	}
	want := []string{"images/s", "png images/s"}
	if len(rs) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(rs), len(want), rs)
	}
	for i, r := range rs {
		if r.Name != "synth" || r.Metric != want[i] || !(r.Value > 0) || r.Unit != "images/s" {
			t.Errorf("result %d: %+v", i, r)
		}
	}
}

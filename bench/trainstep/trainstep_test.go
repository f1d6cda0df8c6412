package trainstep

import (
	"context"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/bench"
)

// TestQuick times one step of the small TERAN config.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a step of teran-mrsw-small takes about a second")
	}
	var rs []bench.Result
	if err := Benchmark.Run(context.Background(), bench.Options{Quick: true, Emit: func(r bench.Result) { rs = append(rs, r) }}); err != nil {
		t.Fatal(err)
	}
	want := []string{"step time", "time per example", "peak memory"}
	if len(rs) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(rs), len(want), rs)
	}
	for i, r := range rs {
		if r.Name != "train-step teran-mrsw-small" || r.Metric != want[i] || !(r.Value > 0) {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	if err := Benchmark.Run(context.Background(), bench.Options{Args: []string{"no-such-config"}, Emit: func(bench.Result) {}}); err == nil || !strings.Contains(err.Error(), "no-such-config") {
		t.Errorf("an unknown config gave %v", err)
	}
}

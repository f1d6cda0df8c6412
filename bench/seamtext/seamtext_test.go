package seamtext

import (
	"context"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/bench"
)

// TestQuick times the small configs on captions of 25 words: one result
// per encoder, the SEAM ones compared with TERAN's.
func TestQuick(t *testing.T) {
	var rs []bench.Result
	if err := Benchmark.Run(context.Background(), bench.Options{Quick: true, Emit: func(r bench.Result) { rs = append(rs, r) }}); err != nil {
		t.Fatal(err)
	}
	want := []string{"seam-text SEAM-E", "seam-text SEAM-C", "seam-text SEAM-G", "seam-text TERAN"}
	if len(rs) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(rs), len(want), rs)
	}
	for i, r := range rs {
		if r.Name != want[i] || r.Metric != "100 x 25 words" || !(r.Value > 0) || (r.Peer == "") != (i == 3) {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	err := Benchmark.Run(context.Background(), bench.Options{Quick: true, Args: []string{"600"}, Emit: func(bench.Result) {}})
	if err == nil || !strings.Contains(err.Error(), "1 to 510") {
		t.Errorf("600 words gave %v", err)
	}
}

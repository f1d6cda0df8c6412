package search

import (
	"context"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/bench"
)

// TestScaleRun builds a small scale index, then searches it again with
// reuse=1: both report the same recall, pruning through the inverted file
// finds most of the exhaustive top 10, and the reused run needs no build
// and times fresh= queries.
func TestScaleRun(t *testing.T) {
	dir := t.TempDir()
	// 64 objects: each shown by about 200 of the 4,000 images, so that,
	// as in a large collection, the exhaustive top 10 are images showing
	// what the query names.
	args := []string{"scale=4000", "scale-dim=128", "objects=64", "queries=8", "candidates=200", "probes=1", "dir=" + dir}
	run1 := runScale(t, args...)
	run2 := runScale(t, append(args, "reuse=1", "fresh=5")...)
	name := "search/scale pruned 200 candidates 1 probes text"
	r1, ok1 := run1[name+" recall@10"]
	r2, ok2 := run2[name+" recall@10"]
	if !ok1 || !ok2 {
		t.Fatalf("no recall reported: %v / %v", run1, run2)
	}
	if r1 != r2 {
		t.Fatalf("recall %v when built, %v when reused", r1, r2)
	}
	if r1 < 0.95 {
		t.Fatalf("recall@10 %v through 200 of 4,000 candidates", r1)
	}
	// The image each query was made from is among the exhaustive top 10
	// and the pruned search's alike (objects shared by 200 images each:
	// a query's source shows all its objects, few others do).
	src, ok := run1["search/scale exhaustive float32 source recall@10"]
	if !ok || src < 0.75 || run1[name+" source recall@10"] < src-0.13 {
		t.Fatalf("source recall@10: exhaustive %v (reported: %v), pruned %v: want at least 0.75, and the pruned search to miss at most one of 8 more", src, ok, run1[name+" source recall@10"])
	}
	if run1["search/scale exhaustive float32 agreement"] != 1 {
		t.Fatalf("the index's exhaustive search disagrees with the in-memory truth: %v", run1)
	}
	if _, ok := run2["search/scale build throughput"]; ok {
		t.Fatal("reuse=1 built the index again")
	}
	// fresh=5: 5 more queries timed, a median and a 99th percentile.
	med, p99 := run2[name+" latency fresh queries"], run2[name+" latency fresh queries p99"]
	if med <= 0 || p99 < med {
		t.Fatalf("fresh=5: median %v ms, p99 %v ms", med, p99)
	}
	if _, ok := run1[name+" latency fresh queries"]; ok {
		t.Fatal("fresh queries timed without fresh=")
	}
	if _, err := parse(bench.Options{Args: []string{"probes=1,x"}}); err == nil || !strings.Contains(err.Error(), "probes") {
		t.Fatalf("probes=1,x: error %v", err)
	}
}

// runScale runs the benchmark with args and returns "name metric" -> value.
func runScale(t *testing.T, args ...string) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	opts := bench.Options{Quick: true, NoPeer: true, Args: args, Emit: func(r bench.Result) { got[r.Name+" "+r.Metric] = r.Value }}
	if err := run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	return got
}

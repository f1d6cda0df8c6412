package serve

import (
	"context"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/bench"
)

// TestQuick runs the load test briefly on a small index: every request
// succeeds, and each result is reported.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds an index and serves it for a second")
	}
	got := map[string]bench.Result{}
	err := Benchmark.Run(context.Background(), bench.Options{Quick: true, Args: []string{"dir=" + t.TempDir()}, Emit: func(r bench.Result) { got[r.Metric] = r }})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"latency p50, 1 client", "requests", "throughput", "latency p50", "latency p99", "rss before", "rss after", "heap live after"} {
		if r, ok := got[m]; !ok || !(r.Value > 0) {
			t.Errorf("%s: %+v", m, r)
		}
	}
	if r := got["errors"]; r.Value != 0 {
		t.Errorf("errors: %+v", r)
	}
	if p50, p99 := got["latency p50"].Value, got["latency p99"].Value; p50 > p99 {
		t.Errorf("p50 %v > p99 %v", p50, p99)
	}
	if !strings.Contains(got["requests"].Note, "100 images, 500 captions; 4 clients") {
		t.Errorf("note %q", got["requests"].Note)
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"images=50"}, "want at least 100"},
		{[]string{"clients=0"}, "clients, k and dim must be positive"},
		{[]string{"duration=soon"}, "want a duration"},
		{[]string{"nosuch=1"}, `unknown argument "nosuch"`},
		{[]string{"images"}, "want key=value"},
	} {
		if _, err := parse(bench.Options{Args: c.args}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
}

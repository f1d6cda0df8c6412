package extract

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/detect"
)

func TestRunQuick(t *testing.T) {
	dir := filepath.Join(detect.DefaultCacheDir(), "centernet-"+detect.Version)
	if detect.Verify(dir) != nil {
		if _, err := exec.LookPath("npm"); err != nil && os.Getenv("CI") != "true" {
			t.Skipf("the detector's weights are not cached and npm is missing: %v", err)
		}
	}
	var rs []bench.Result
	err := run(context.Background(), bench.Options{Quick: true, NoPeer: true, Emit: func(r bench.Result) { rs = append(rs, r) }})
	if err != nil {
		t.Fatal(err)
	}
	// One image at a time, then as many at once as there are CPUs.
	if len(rs) != 2 {
		t.Fatalf("%d results, want 2: %+v", len(rs), rs)
	}
	for _, r := range rs {
		if r.Unit != "images/s" || r.Value <= 0 || !strings.Contains(r.Note, "--no-peer") {
			t.Fatalf("result %+v", r)
		}
	}
	if !strings.Contains(rs[1].Metric, "at a time") {
		t.Fatalf("second result %q, want the concurrent throughput", rs[1].Metric)
	}
}

func TestRunArgs(t *testing.T) {
	err := run(context.Background(), bench.Options{Args: []string{"x=1"}, Emit: func(bench.Result) {}})
	if err == nil || !strings.Contains(err.Error(), "no arguments") {
		t.Fatalf("error %v", err)
	}
}

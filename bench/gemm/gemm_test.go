package gemm

import (
	"context"
	"testing"

	"github.com/xmr-project/xmr/bench"
)

func TestRunQuick(t *testing.T) {
	var rs []bench.Result
	opts := bench.Options{Quick: true, Args: []string{"33x17x65", "4x64x8"}, Emit: func(r bench.Result) { rs = append(rs, r) }}
	if err := Benchmark.Run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	metrics := map[string]int{}
	for _, r := range rs {
		metrics[r.Metric]++
		if !(r.Value > 0) || r.Unit != "GFLOP/s" {
			t.Errorf("result %+v", r)
		}
		if r.Peer != "" && !(r.Ratio > 0) {
			t.Errorf("result with a peer but no ratio: %+v", r)
		}
	}
	for _, m := range []string{"tape.MatMul", "blas.Sgemm"} {
		if metrics[m] != 2 {
			t.Errorf("metric %s reported %d times, want 2 (results %+v)", m, metrics[m], rs)
		}
	}
}

func TestParseShape(t *testing.T) {
	if s, err := ParseShape("36x2048x1024"); err != nil || s != (Shape{36, 2048, 1024}) {
		t.Fatalf("ParseShape: %v %v", s, err)
	}
	for _, bad := range []string{"3x4", "3x0x4", "axbxc", "1x2x3x4"} {
		if _, err := ParseShape(bad); err == nil {
			t.Errorf("ParseShape(%q) accepted", bad)
		}
	}
	if err := Benchmark.Run(context.Background(), bench.Options{Args: []string{"nope"}, Emit: func(bench.Result) {}}); err == nil {
		t.Error("Run accepted a bad shape")
	}
}

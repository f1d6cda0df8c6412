package transformer

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/tensor"
	"github.com/xmr-project/xmr/tools"
)

// BenchmarkTrainStep times one training step of the benchmark's model
// (go test -run '^$' -bench TrainStep -cpuprofile cpu.out ./bench/transformer/;
// -short: the quick sizes).
func BenchmarkTrainStep(b *testing.B) {
	cfg := configFor(testing.Short())
	enc, x, valid := setup(cfg)
	opt, err := newOptimizer(enc)
	if err != nil {
		b.Fatal(err)
	}
	tp := tensor.NewTape()
	c0 := bench.CPUSeconds()
	for i := 0; b.Loop(); i++ {
		tp.Reset()
		tp.Seed(1, uint64(i))
		y := enc.Forward(tp, x, valid)
		tp.Backward(tp.MeanAll(tp.Mul(y, y)))
		opt.StepAndZeroGrad()
	}
	b.ReportMetric(float64(cfg.Batch*b.N)/b.Elapsed().Seconds(), "examples/s")
	b.ReportMetric((bench.CPUSeconds()-c0)*1e3/float64(b.N), "cpu-ms/op")
}

// BenchmarkInfer times the no-grad forward of one 12-token sequence.
func BenchmarkInfer(b *testing.B) {
	cfg := configFor(testing.Short())
	enc, _, _ := setup(cfg)
	x := tensor.RandN(rand.New(rand.NewPCG(3, 4)), 1, cfg.SingleTokens, cfg.D)
	for b.Loop() {
		enc.Forward(nil, x, nil)
	}
}

// TestQuick runs the benchmark at its tiny size, without a peer and with
// an interpreter that cannot be found (the peer is then skipped, and the
// notes say why).
func TestQuick(t *testing.T) {
	cases := []struct {
		name     string
		opts     bench.Options
		wantNote string
	}{
		{"no peer", bench.Options{NoPeer: true}, "peer skipped (--no-peer)"},
		{"no python", bench.Options{Python: "/nonexistent/python3"}, "PyTorch peer skipped: no suitable Python interpreter: /nonexistent/python3 cannot import torch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var rs []bench.Result
			c.opts.Quick = true
			c.opts.Emit = func(r bench.Result) { rs = append(rs, r) }
			if err := Benchmark.Run(context.Background(), c.opts); err != nil {
				t.Fatal(err)
			}
			if len(rs) != 7 {
				t.Fatalf("%d results, want 7", len(rs))
			}
			for _, r := range rs {
				if !(r.Value > 0) || r.Peer != "" {
					t.Errorf("%s %s = %v (peer %q)", r.Name, r.Metric, r.Value, r.Peer)
				}
			}
			if !strings.Contains(rs[0].Note, c.wantNote) {
				t.Errorf("note %q lacks %q", rs[0].Note, c.wantNote)
			}
		})
	}
}

// TestQuickPyTorch runs the tiny sizes against the PyTorch peer, when an
// interpreter with torch is at hand.
func TestQuickPyTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the PyTorch peer takes a few seconds to start")
	}
	if _, err := tools.FindPython(context.Background(), "", "torch"); err != nil {
		t.Skipf("no PyTorch peer: %v", err)
	}
	var rs []bench.Result
	if err := Benchmark.Run(context.Background(), bench.Options{Quick: true, Emit: func(r bench.Result) { rs = append(rs, r) }}); err != nil {
		t.Fatal(err)
	}
	peers := 0
	for _, r := range rs {
		if r.Peer != "" {
			peers++
			if !strings.HasPrefix(r.Peer, "pytorch-") || !(r.PeerValue > 0) || !(r.Ratio > 0) {
				t.Errorf("result %+v", r)
			}
		}
	}
	if peers != 5 {
		t.Errorf("%d results with a peer, want 5: %+v", peers, rs)
	}
}

func TestBadArgument(t *testing.T) {
	err := Benchmark.Run(context.Background(), bench.Options{Quick: true, NoPeer: true, Args: []string{"threads=2"}, Emit: func(bench.Result) {}})
	if err == nil || !strings.Contains(err.Error(), "blas-threads=N") {
		t.Fatalf("got %v", err)
	}
}

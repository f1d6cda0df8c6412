package nn

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/tensor"
)

// benchEncoder builds the `xmr bench transformer` model and batch.
func benchEncoder(cfg transformerBenchConfig) (*TransformerEncoder, *tensor.Tensor, *tensor.Tensor) {
	rng := rand.New(rand.NewPCG(1, 2))
	enc := NewTransformerEncoder(rng, cfg.Layers, cfg.D, cfg.Heads, cfg.FF, cfg.Dropout, ReLU)
	x := tensor.RandN(rng, cfg.Batch, cfg.Tokens, cfg.D)
	lengths := make([]int, cfg.Batch)
	for b := range lengths {
		lengths[b] = cfg.Tokens - b%8
	}
	return enc, x, benchMask(cfg.Tokens, lengths)
}

// BenchmarkTrainStep times one training step of the benchmark model
// (go test -bench TrainStep -cpuprofile cpu.out ./nn/).
func BenchmarkTrainStep(b *testing.B) {
	cfg := benchConfig(testing.Short())
	enc, x, valid := benchEncoder(cfg)
	params := Tensors(enc.Params())
	opt := newAdam(params, 1e-4)
	tp := tensor.NewTape()
	c0 := bench.CPUSeconds()
	for i := 0; b.Loop(); i++ {
		tp.Reset()
		tp.Seed(1, uint64(i))
		y := enc.Forward(tp, x, valid)
		tp.Backward(tp.MeanAll(tp.Mul(y, y)))
		opt.step() // also zeroes the gradients
	}
	b.ReportMetric(float64(cfg.Batch*b.N)/b.Elapsed().Seconds(), "examples/s")
	b.ReportMetric((bench.CPUSeconds()-c0)*1e3/float64(b.N), "cpu-ms/op")
}

// BenchmarkInfer times the no-grad forward of one 12-token sequence.
func BenchmarkInfer(b *testing.B) {
	cfg := benchConfig(testing.Short())
	enc, _, _ := benchEncoder(cfg)
	x := tensor.RandN(rand.New(rand.NewPCG(3, 4)), 1, cfg.SingleTokens, cfg.D)
	for b.Loop() {
		enc.Forward(nil, x, nil)
	}
}

func TestTransformerBenchQuick(t *testing.T) {
	var rs []bench.Result
	err := runTransformerBench(context.Background(), bench.Options{Quick: true, NoPeer: true, Emit: func(r bench.Result) { rs = append(rs, r) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 7 {
		t.Fatalf("%d results", len(rs))
	}
	for _, r := range rs {
		if r.Value <= 0 {
			t.Errorf("%s %s = %v", r.Name, r.Metric, r.Value)
		}
	}
}

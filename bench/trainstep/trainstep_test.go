package trainstep

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/blas"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/optim"
	"github.com/xmr-project/xmr/tensor"
	"github.com/xmr-project/xmr/tools"
	"github.com/xmr-project/xmr/train"
)

// tinyConfig is TERAN MrSw at toy sizes: a step takes milliseconds, and the
// peer's model builds in a moment.
const tinyConfig = `
dataset: {name: synth, data: '', max-caption-tokens: 16}
text-model: {name: bert, pretrain: '', word-dim: 32, extraction-hidden-layer: 2, fine-tune: true, heads: 4, ff: 48, max-positions: 20, dropout: 0.1, vocab-size: 120}
image-model: {name: bottomup, feat-dim: 24, transformer-layers: 1, heads: 4, ff: 40, hidden: 28, dropout: 0.1, pos-encoding: concat-and-process}
model: {name: teran, embed-size: 16, layers: 1, heads: 4, ff: 36, shared-transformer: false, dropout: 0.1}
training: {lr: 0.0005, grad-clip: 2.0, max-violation: true, loss-type: alignment, alignment-mode: MrSw, margin: 0.2, bs: 6, epochs: 1, seed: 1}
`

// writeTiny writes tinyConfig, with its text from replaced by to, to a file
// and returns its path.
func writeTiny(t *testing.T, from, to string) string {
	t.Helper()
	if !strings.Contains(tinyConfig, from) {
		t.Fatalf("tinyConfig has no %q", from)
	}
	path := filepath.Join(t.TempDir(), "tiny.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(tinyConfig, from, to, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// collect runs the benchmark and returns its results.
func collect(t *testing.T, opts bench.Options) []bench.Result {
	t.Helper()
	var rs []bench.Result
	opts.Emit = func(r bench.Result) { rs = append(rs, r) }
	if err := Benchmark.Run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	want := []string{"step time", "time per example", "CPU time", "peak memory", "products alone"}
	if len(rs) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(rs), len(want), rs)
	}
	for i, r := range rs {
		if !strings.HasPrefix(r.Name, "train-step ") || r.Metric != want[i] || !(r.Value > 0) {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	return rs
}

// TestQuick times one step of the small TERAN config without a peer, and
// of the tiny one with an interpreter that cannot be found: the peer is
// skipped and the note says why.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a step of teran-mrsw-small takes about a second")
	}
	rs := collect(t, bench.Options{Quick: true, NoPeer: true})
	if rs[0].Name != "train-step teran-mrsw-small" || !strings.Contains(rs[0].Note, "peer skipped (--no-peer)") {
		t.Errorf("first result %+v", rs[0])
	}
	rs = collect(t, bench.Options{Quick: true, Args: []string{writeTiny(t, "", "")}, Python: "/nonexistent/python3"})
	if !strings.Contains(rs[0].Note, "PyTorch peer skipped: no suitable Python interpreter") || rs[0].Peer != "" {
		t.Errorf("first result %+v", rs[0])
	}
	if err := Benchmark.Run(context.Background(), bench.Options{Args: []string{"no-such-config"}, Emit: func(bench.Result) {}}); err == nil || !strings.Contains(err.Error(), "no-such-config") {
		t.Errorf("an unknown config gave %v", err)
	}
}

// TestPeerArgs checks which configs the peer models and that the sizes it
// is given are the config's.
func TestPeerArgs(t *testing.T) {
	cases := []struct {
		name, from, to string
		want           []string // flag, value pairs that must appear
		wantErr        bool
	}{
		{"tiny", "", "", []string{"--vocab", "120", "--word-dim", "32", "--bert-layers", "2", "--bert-ff", "48", "--feat-dim", "24",
			"--img-hidden", "28", "--embed", "16", "--ff", "36", "--batch", "6", "--shared", "0", "--max-violation", "1", "--slot0", "zero", "--threads", "2"}, false},
		{"warm-up of the hardest negatives", "seed: 1", "seed: 1, max-violation-after: 400", []string{"--max-violation", "0"}, false},
		{"shared final layers", "shared-transformer: false", "shared-transformer: true", []string{"--shared", "1"}, false},
		{"other pooling", "alignment-mode: MrSw", "alignment-mode: MwSr", nil, true},
		{"frozen BERT", "fine-tune: true", "fine-tune: false", nil, true},
		{"tern", "name: teran", "name: tern", nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := newSetup(writeTiny(t, c.from, c.to))
			if err != nil {
				t.Fatal(err)
			}
			args, err := peerArgs(s, 2, 3)
			if c.wantErr {
				if err == nil || !strings.Contains(err.Error(), "peer models TERAN") {
					t.Fatalf("got %v, %v; want the peer to refuse", args, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			flags := map[string]string{}
			for i := 0; i+1 < len(args); i += 2 {
				flags[args[i]] = args[i+1]
			}
			for i := 0; i < len(c.want); i += 2 {
				if flags[c.want[i]] != c.want[i+1] {
					t.Errorf("%s = %q, want %q (args %v)", c.want[i], flags[c.want[i]], c.want[i+1], args)
				}
			}
		})
	}
}

func TestCheckParams(t *testing.T) {
	cases := []struct {
		peer, ours int
		ok         bool
	}{
		{1000, 1000, true},
		{1001, 1000, true},
		{1002, 1000, false},
		{999, 1000, true},
		{900, 1000, false},
		{5, 0, false},
	}
	for _, c := range cases {
		if err := checkParams(c.peer, c.ours); (err == nil) != c.ok {
			t.Errorf("checkParams(%d, %d) = %v, want ok %v", c.peer, c.ours, err, c.ok)
		}
	}
	if got := threadCounts(1); len(got) != 1 || got[0] != 1 {
		t.Errorf("threadCounts(1) = %v", got)
	}
	if got := threadCounts(4); len(got) != 2 || got[0] != 1 || got[1] != 4 {
		t.Errorf("threadCounts(4) = %v", got)
	}
}

// TestQuickPyTorch runs the tiny config against the PyTorch peer, when an
// interpreter with torch is at hand: the peer's model must have xmr's
// parameters (else the peer is skipped and there is no ratio).
func TestQuickPyTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the PyTorch peer takes a few seconds to start")
	}
	if _, err := tools.FindPython(context.Background(), "", "torch"); err != nil {
		t.Skipf("no PyTorch peer: %v", err)
	}
	rs := collect(t, bench.Options{Quick: true, Args: []string{writeTiny(t, "", "")}})
	for _, r := range rs {
		if !strings.HasPrefix(r.Peer, "pytorch-") || !(r.PeerValue > 0) || !(r.Ratio > 0) {
			t.Errorf("result %+v (note %q)", r, rs[0].Note)
		}
	}
	if !strings.Contains(rs[0].Note, "at 1 thread(s)") || !strings.Contains(rs[0].Note, "alternating with xmr's") {
		t.Errorf("note %q lacks the one-thread peer's phase", rs[0].Note)
	}
	if last := rs[len(rs)-1]; !strings.Contains(last.Note, "alternating with the replays") {
		t.Errorf("products alone: note %q says nothing of the peer's steps beside the replays", last.Note)
	}
}

// TestRecordReplay records the products of a tiny step and replays them:
// the operands hold every product (blas.Sgemm panics otherwise), C stays
// finite however often they are replayed, the recording leaves the BLAS
// as it was, and a step's products are the same from step to step.
func TestRecordReplay(t *testing.T) {
	s, err := newSetup(writeTiny(t, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	before := blas.Current()
	p, err := record(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if blas.Current() != before {
		t.Fatalf("record left blas.Current() = %v, want %v", blas.Current(), before)
	}
	q, err := record(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.calls, q.calls) {
		t.Errorf("two steps' products differ: %d and %d products", len(p.calls), len(q.calls))
	}
	var flops float64
	betas := map[float32]int{}
	for _, c := range p.calls {
		flops += c.flops()
		betas[c.beta]++
	}
	// Forward products write (beta 0); weight gradients add up (beta 1).
	if !(flops > 0) || flops != p.flops || betas[0] == 0 || betas[1] == 0 {
		t.Errorf("%d products, %g FLOP (recorded %g), betas %v", len(p.calls), flops, p.flops, betas)
	}
	for range 20 {
		if w := p.replay(); !(w > 0) {
			t.Fatalf("replay took %v s", w)
		}
	}
	for i, v := range p.c {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("after 20 replays C[%d] = %v", i, v)
		}
	}
}

// benchSetup is the step of the paper's TERAN MrSw (-short:
// teran-mrsw-small) that the benchmarks below time.
func benchSetup(b *testing.B) *setup {
	name := "teran-mrsw"
	if testing.Short() {
		name = "teran-mrsw-small"
	}
	s, err := newSetup(name)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkStep times training steps of the paper's TERAN MrSw (-short:
// teran-mrsw-small), for profiles:
//
//	go test -run '^$' -bench Step -benchtime 3x -cpuprofile cpu.out ./bench/trainstep/
func BenchmarkStep(b *testing.B) {
	s := benchSetup(b)
	if err := s.step(0); err != nil {
		b.Fatal(err)
	}
	c0 := bench.CPUSeconds()
	for i := 1; b.Loop(); i++ {
		if err := s.step(i); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((bench.CPUSeconds()-c0)/float64(b.N), "cpu-s/op")
}

// BenchmarkParts times the parts of the step of BenchmarkStep one after the
// other, in train.Stepper.Step's order (the alignment objective of TERAN
// configs): the visual and the textual forward, the loss, backward (with
// BackwardAndReset, as the stepper), the clip and Adam; plus the garbage
// collector's CPU time and the page faults per step (the cost of
// allocation). It differs from the stepper in its Adam, one group at the
// config's lr where the stepper gives BERT a group of its own: the same
// arithmetic per element. clip=fused is train.Stepper's way (the
// gradients' norm, then Adam applies the clip as it reads them);
// clip=separate is ClipGradNorm then Adam, one more pass over the gradients.
func BenchmarkParts(b *testing.B) {
	s := benchSetup(b)
	m, tc := s.model, s.cfg.Training
	var params []*tensor.Tensor
	for _, p := range m.Params() {
		params = append(params, p.T)
	}
	opt, err := optim.NewAdam([]optim.Group{{Params: params, LR: tc.LR}}, optim.Config{Beta1: tc.Beta1})
	if err != nil {
		b.Fatal(err)
	}
	tp := tensor.NewTape()
	labels := [6]string{"img-fwd-s", "txt-fwd-s", "loss-s", "bwd-s", "clip-s", "adam-s"}
	iter := 0
	step := func(parts *[6]time.Duration, fused bool) {
		t := time.Now()
		lap := func(i int) {
			if parts != nil {
				parts[i] += time.Since(t)
			}
			t = time.Now()
		}
		tp.Seed(tc.Seed, uint64(iter))
		img := m.EncodeImages(tp, s.batch.Images)
		lap(0)
		txt := m.EncodeTexts(tp, s.batch.Texts)
		lap(1)
		loss := train.ContrastiveLoss(tp, model.Similarity(tp, img, txt, tc.AlignmentMode), tc.Margin, tc.MaxViolation && iter >= tc.MaxViolationAfter)
		lap(2)
		tp.BackwardAndReset(loss)
		lap(3)
		if fused {
			scale, _ := optim.ClipScale(params, tc.GradClip)
			lap(4)
			opt.StepAndZeroGradScaled(scale)
		} else {
			optim.ClipGradNorm(params, tc.GradClip)
			lap(4)
			opt.StepAndZeroGrad()
		}
		lap(5)
		iter++
	}
	step(nil, true) // warm-up
	for _, fused := range []bool{true, false} {
		mode := "clip=separate"
		if fused {
			mode = "clip=fused"
		}
		b.Run(mode, func(b *testing.B) {
			var parts [6]time.Duration
			gc0, cyc0 := gcStats()
			flt0 := bench.MinorFaults()
			for b.Loop() {
				step(&parts, fused)
			}
			for i, p := range parts {
				b.ReportMetric(p.Seconds()/float64(b.N), labels[i])
			}
			gc1, cyc1 := gcStats()
			b.ReportMetric((gc1-gc0)/float64(b.N), "gc-cpu-s")
			b.ReportMetric(float64(cyc1-cyc0)/float64(b.N), "gc-cycles")
			b.ReportMetric(float64(bench.MinorFaults()-flt0)/float64(b.N), "page-faults")
		})
	}
}

// gcStats returns the CPU time the garbage collector has used so far and
// the number of its cycles.
func gcStats() (cpu float64, cycles uint64) {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindFloat64 {
		cpu = s[0].Value.Float64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		cycles = s[1].Value.Uint64()
	}
	return cpu, cycles
}

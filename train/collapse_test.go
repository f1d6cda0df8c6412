package train

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/text"
)

func TestMeanCosine(t *testing.T) {
	cases := []struct {
		name string
		v    []float32
		dim  int
		want float64
	}{
		{"identical", []float32{1, 0, 1, 0, 1, 0}, 2, 1},
		{"orthogonal", []float32{1, 0, 0, 1}, 2, 0},
		{"opposite", []float32{0, 1, 0, -1}, 2, -1},
		{"mixed", []float32{1, 0, 0, 1, 1, 0}, 2, 1.0 / 3}, // pairs: 0, 1, 0
	}
	for _, c := range cases {
		if got := meanCosine(c.v, c.dim); math.Abs(got-c.want) > 1e-6 {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := meanCosine([]float32{1, 0}, 2); !math.IsNaN(got) {
		t.Errorf("one vector: %v, want NaN", got)
	}
	// Against the pairwise definition on random unit vectors.
	rng := rand.New(rand.NewPCG(1, 2))
	n, d := 20, 8
	v := make([]float32, n*d)
	for i := 0; i < n; i++ {
		var norm float64
		for j := 0; j < d; j++ {
			v[i*d+j] = float32(rng.NormFloat64())
			norm += float64(v[i*d+j] * v[i*d+j])
		}
		for j := 0; j < d; j++ {
			v[i*d+j] /= float32(math.Sqrt(norm))
		}
	}
	var sum float64
	for i := 0; i < n; i++ {
		for k := 0; k < n; k++ {
			if i != k {
				for j := 0; j < d; j++ {
					sum += float64(v[i*d+j] * v[k*d+j])
				}
			}
		}
	}
	if got, want := meanCosine(v, d), sum/float64(n*(n-1)); math.Abs(got-want) > 1e-5 {
		t.Errorf("random: %v, want %v", got, want)
	}
}

// TestChanceRSum checks the closed form against a simulation of random
// rankings.
func TestChanceRSum(t *testing.T) {
	if got := chanceRSum(1, 5); got != 600 {
		t.Errorf("one image: %v, want 600 (every recall 100%%)", got)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{30, 91} {
		const c, trials = 5, 4000
		hits := 0.0
		for range trials {
			perm := rng.Perm(n * c) // a random ranking of the captions for image 0
			best := n * c
			for rank, cap := range perm {
				if cap < c && rank < best {
					best = rank
				}
			}
			img := rng.IntN(n) // the rank of the right image for a caption
			for _, k := range []int{1, 5, 10} {
				if best < k {
					hits++
				}
				if img < k {
					hits++
				}
			}
		}
		sim := 100 * hits / trials
		if got := chanceRSum(n, c); math.Abs(got-sim) > 0.05*got {
			t.Errorf("%d images: %.1f, simulated %.1f", n, got, sim)
		}
	}
}

func TestCollapseCheck(t *testing.T) {
	const chance = 100.0
	alike := Record{Iter: 300, RSum: 98, ImgCos: 0.8, TxtCos: 0.99, LR: 1e-9}
	learning := Record{Iter: 300, RSum: 250, ImgCos: 0.5, TxtCos: 0.6}
	stuck := Record{Iter: 300, RSum: 101, ImgCos: 0.5, TxtCos: 0.6, Loss: 25}
	at := func(r Record, iter int) Record { r.Iter = iter; return r }
	cases := []struct {
		name    string
		history []Record
		stuck   float64
		warmup  int
		want    string // a part of the warning; "" for none
	}{
		{"three alike", []Record{at(alike, 100), at(alike, 200), at(alike, 300)}, 0, 50, "caption embeddings are all alike (mean cosine between different captions 0.990)"},
		{"only two", []Record{at(alike, 200), at(alike, 300)}, 0, 50, ""},
		{"during the warm-up", []Record{at(alike, 100), at(alike, 200), at(alike, 300)}, 0, 200, ""},
		{"learning again", []Record{at(alike, 100), at(alike, 200), at(learning, 300)}, 0, 50, ""},
		{"alike but recalling", []Record{at(alike, 100), at(alike, 200), {Iter: 300, RSum: 200, TxtCos: 0.99}}, 0, 50, ""},
		{"stuck loss", []Record{at(stuck, 100), at(stuck, 200), at(stuck, 300)}, 25.6, 50, "stuck near 25.6"},
		{"unstuck loss", []Record{at(stuck, 100), at(stuck, 200), at(stuck, 300)}, 0, 50, ""},
		// Above chance but stuck at the collapse value: scores on one value.
		{"stuck above chance", []Record{at(learning, 100), at(learning, 200), at(learning, 300)}, 25.6, 50, "scores have collapsed onto one value"},
	}
	for _, c := range cases {
		got := collapseCheck(c.history, chance, c.stuck, c.warmup)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestStuckLoss(t *testing.T) {
	cfg := Default()
	cfg.Training.Margin, cfg.Training.MaxViolation, cfg.Training.MaxViolationAfter = 0.2, true, 400
	cfg.Training.LossType = LossMatching
	hist := func(loss float64) []Record { return []Record{{Loss: loss}, {Loss: loss}, {Loss: loss}} }
	sum := 2 * 64 * 63 * 0.2
	cases := []struct {
		name string
		iter int
		h    []Record
		want float64
	}{
		{"sum form, stuck", 300, hist(sum), sum},
		{"sum form, learning", 300, hist(0.9 * sum), 0},
		{"hardest form, stuck", 500, hist(25.6), 25.6},
		{"too short", 500, hist(25.6)[:2], 0},
		{"sum form, far above", 300, hist(3 * sum), 0},
	}
	for _, c := range cases {
		if got := stuckLoss(cfg, c.iter, 64, c.h); math.Abs(got-c.want) > 1e-4 {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// InfoNCE collapses at log(batch); MEMBER's loss adds its caption
	// generation's (407.5 at iteration 932 of member-photos on Flickr8k,
	// which was flagged as stuck near 4.159).
	cfg.Training.Contrastive = ContrastiveInfoNCE
	if got := stuckLoss(cfg, 932, 64, hist(math.Log(64))); math.Abs(got-math.Log(64)) > 1e-9 {
		t.Errorf("infonce, stuck: %v, want %v", got, math.Log(64))
	}
	if got := stuckLoss(cfg, 932, 64, hist(407.5)); got != 0 {
		t.Errorf("infonce plus a caption loss of hundreds: %v, want 0 (not stuck)", got)
	}
}

func TestSinceBest(t *testing.T) {
	rs := func(v ...float64) []Record {
		var h []Record
		for _, x := range v {
			h = append(h, Record{RSum: x})
		}
		return h
	}
	cases := []struct {
		h    []Record
		want int
	}{
		{nil, 0}, {rs(5), 0}, {rs(1, 2, 3), 0}, {rs(3, 2, 1), 2}, {rs(1, 3, 3, 2), 2},
	}
	for _, c := range cases {
		if got := sinceBest(c.h); got != c.want {
			t.Errorf("sinceBest(%v) = %d, want %d", c.h, got, c.want)
		}
	}
}

// TestStepUnit checks that step-unit chooses what step-size counts.
func TestStepUnit(t *testing.T) {
	tok, err := model.NewTokenizer("words", text.NewVocab([]string{"<pad>", "<start>", "<end>", "<unk>", "a"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, unit := range []string{"epochs", "iterations"} {
		cfg := tinyConfig(t, "vsepp-small.yaml")
		cfg.TextModel.Hidden = cfg.Model.EmbedSize
		cfg.Training.Scheduler, cfg.Training.StepSize, cfg.Training.StepUnit, cfg.Training.Gamma, cfg.Training.WarmupPeriod = "steplr", 3, unit, 0.1, 0
		m, err := model.New(cfg.ModelConfig(), tok, 1)
		if err != nil {
			t.Fatal(err)
		}
		const itersPerEpoch = 10
		s, err := NewStepper(m, cfg.Training, itersPerEpoch)
		if err != nil {
			t.Fatal(err)
		}
		decayAt := 3 // iterations
		if unit == "epochs" {
			decayAt = 3 * itersPerEpoch
		}
		for _, it := range []int{decayAt - 1, decayAt} {
			want := cfg.Training.LR
			if it >= decayAt {
				want *= 0.1
			}
			if got := s.opt.Config().Schedule.Factor(it) * cfg.Training.LR; math.Abs(got-want) > 1e-12 {
				t.Errorf("%s: lr at iteration %d is %g, want %g", unit, it, got, want)
			}
		}
	}
}

// TestEarlyStop trains with a learning rate too small to change the
// ranking: the validation rsum never improves on the first, and patience 2
// ends the run after the third validation, keeping the best checkpoint.
func TestEarlyStop(t *testing.T) {
	cfg := tinyConfig(t, "tern-small.yaml")
	cfg.Training.LR, cfg.Training.Patience, cfg.Training.ValStep = 1e-12, 2, 5
	out := t.TempDir()
	res, err := Run(context.Background(), Options{Config: cfg, Data: data.Source{Path: testWorld(t)}, Out: out, MaxIters: 100, ValImages: 50})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Stopped, "early stop") || res.Iters != 15 {
		t.Fatalf("stopped after %d iterations: %q; want an early stop at 15", res.Iters, res.Stopped)
	}
	if _, f, err := model.Load(out); err != nil {
		t.Fatalf("best checkpoint: %v", err)
	} else {
		f.Close()
	}
	// A resumed run stays stopped.
	res, err = Run(context.Background(), Options{Config: cfg, Data: data.Source{Path: testWorld(t)}, Out: out, MaxIters: 100, ValImages: 50, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Iters != 15 || !strings.HasPrefix(res.Stopped, "early stop") {
		t.Errorf("resumed: %d iterations, %q", res.Iters, res.Stopped)
	}
}

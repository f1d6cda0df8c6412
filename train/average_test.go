package train

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/tensor"
)

// TestAverageUpdate follows one weight through a run of steps and checks
// the average against the recurrence computed in float64.
func TestAverageUpdate(t *testing.T) {
	for _, decay := range []float64{0.5, 0.9, 0.99} {
		w := tensor.FromData([]float32{1, -2}, 2)
		params := []*tensor.Tensor{w}
		a := newAverage([]string{"w"}, params, decay)
		if a.avg[0].Name != "ema.w" {
			t.Fatalf("average named %q, want ema.w", a.avg[0].Name)
		}
		want := []float64{1, -2}
		for step := 1; step <= 50; step++ {
			w.Data[0], w.Data[1] = float32(step), float32(math.Sin(float64(step)))
			d := math.Min(decay, float64(1+step)/float64(10+step))
			for j := range want {
				want[j] = d*want[j] + (1-d)*float64(w.Data[j])
			}
			a.update(params, step)
			for j := range want {
				if got := float64(a.avg[0].T.Data[j]); math.Abs(got-want[j]) > 1e-4*math.Max(1, math.Abs(want[j])) {
					t.Fatalf("decay %v, step %d, weight %d: average %v, want %v", decay, step, j, got, want[j])
				}
			}
		}
		if w.Data[0] != 50 {
			t.Fatalf("the update changed the weights: %v", w.Data)
		}
	}
}

// TestWithAverage checks that f sees the averaged weights, and that the
// weights are back after f, also when f fails.
func TestWithAverage(t *testing.T) {
	w := tensor.FromData([]float32{1, 2}, 2)
	s := &Stepper{params: []*tensor.Tensor{w}}
	if err := s.WithAverage(func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	s.avg = newAverage([]string{"w"}, s.params, 0.9)
	copy(w.Data, []float32{5, 6})
	boom := errors.New("boom")
	err := s.WithAverage(func() error {
		if w.Data[0] != 1 || w.Data[1] != 2 {
			t.Errorf("inside: weights %v, want the average [1 2]", w.Data)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want f's", err)
	}
	if w.Data[0] != 5 || w.Data[1] != 6 || s.avg.avg[0].T.Data[0] != 1 {
		t.Fatalf("after: weights %v average %v, want [5 6] and [1 2]", w.Data, s.avg.avg[0].T.Data)
	}
}

// TestRunSavesAverage trains with training.ema-decay and checks that the
// best checkpoint holds the averaged weights that last.safetensors keeps
// beside the weights training goes on from, and that the two differ.
func TestRunSavesAverage(t *testing.T) {
	dir := testWorld(t)
	cfg := tinyConfig(t, "teran-mwsr-small.yaml")
	cfg.Training.ValStep, cfg.Training.EMADecay = 10, 0.9
	out := t.TempDir()
	if _, err := Run(context.Background(), Options{Config: cfg, Data: data.Source{Path: dir}, Out: out, MaxIters: 10, ValImages: 50}); err != nil {
		t.Fatal(err)
	}
	best, fb, err := model.Load(filepath.Join(out, "best-rsum.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	last, fl, err := model.Load(filepath.Join(out, "last.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	differ := 0
	lp := last.Params()
	for i, p := range best.Params() {
		if !p.T.RequiresGrad() {
			continue
		}
		avg, _, err := fl.Tensor(averagePrefix + p.Name)
		if err != nil {
			t.Fatalf("last.safetensors: %v", err)
		}
		for j, v := range p.T.Data {
			if v != avg[j] {
				t.Fatalf("%s[%d]: %v in best-rsum, average %v in last", p.Name, j, v, avg[j])
			}
			if v != lp[i].T.Data[j] {
				differ++
			}
		}
	}
	if differ == 0 {
		t.Fatal("the averaged weights equal the trained weights after 10 steps")
	}
}

// BenchmarkAverageUpdate is the moving average's cost a step for the small
// TERAN's 4.2M weights (teran-mrsw-small).
func BenchmarkAverageUpdate(b *testing.B) {
	const n = 4_180_000
	params := []*tensor.Tensor{tensor.New(n)}
	a := newAverage([]string{"w"}, params, 0.95)
	b.SetBytes(3 * 4 * n) // read the weight and the average, write the average
	for i := 0; b.Loop(); i++ {
		a.update(params, i+1)
	}
}

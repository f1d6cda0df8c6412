package train

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/model"
)

// TestInterruptSaves cancels a run's context (as SIGINT does through
// cmd/xmr) after a step and during a validation: Run must finish the step,
// save last.safetensors for that iteration and return *Interrupted, and a
// resumed run must pick up there, validating first where the validation was
// cut short.
func TestInterruptSaves(t *testing.T) {
	dir := testWorld(t)
	cases := []struct {
		name     string
		cancelAt int
		valStep  int
	}{
		{"between validations", 3, 0},
		{"at a validation", 4, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := tinyConfig(t, "teran-mrsw-small.yaml")
			cfg.Training.ValStep = c.valStep
			out := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			testHookStep = func(iter int) {
				if iter == c.cancelAt {
					cancel()
				}
			}
			defer func() { testHookStep = nil }()
			_, err := Run(ctx, Options{Config: cfg, Data: data.Source{Path: dir}, Out: out, MaxIters: 8, ValImages: 50})
			var intr *Interrupted
			if !errors.As(err, &intr) || !errors.Is(err, context.Canceled) {
				t.Fatalf("Run: %v, want *Interrupted wrapping context.Canceled", err)
			}
			last := filepath.Join(out, "last.safetensors")
			if intr.Iter != c.cancelAt || intr.Checkpoint != last {
				t.Fatalf("interrupted at %d in %s, want %d in %s", intr.Iter, intr.Checkpoint, c.cancelAt, last)
			}
			_, f, err := model.Load(last)
			if err != nil {
				t.Fatal(err)
			}
			var st state
			err = json.Unmarshal([]byte(f.Metadata()[metaState]), &st)
			f.Close()
			if err != nil || st.Iter != c.cancelAt {
				t.Fatalf("saved state %+v, %v; want iteration %d", st, err, c.cancelAt)
			}
			testHookStep = nil
			res, err := Run(context.Background(), Options{Data: data.Source{Path: dir}, Out: out, MaxIters: 6, ValImages: 50, Resume: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.Iters != 6 {
				t.Fatalf("resumed to %d iterations, want 6", res.Iters)
			}
			hist := readHistory(t, out)
			if c.valStep > 0 && hist[0].Iter != c.cancelAt {
				t.Errorf("history %+v lacks the validation at iteration %d", hist, c.cancelAt)
			}
		})
	}
}

// TestCheckpointInterval saves last.safetensors by wall time between
// validations.
func TestCheckpointInterval(t *testing.T) {
	dir := testWorld(t)
	cfg := tinyConfig(t, "teran-mrsw-small.yaml")
	out := t.TempDir()
	saved := map[int]bool{}
	testHookStep = func(iter int) {
		if iter == 2 {
			time.Sleep(20 * time.Millisecond)
		}
		if iter == 3 {
			if _, f, err := model.Load(filepath.Join(out, "last.safetensors")); err == nil {
				var st state
				json.Unmarshal([]byte(f.Metadata()[metaState]), &st)
				f.Close()
				saved[st.Iter] = true
			}
		}
	}
	defer func() { testHookStep = nil }()
	if _, err := Run(context.Background(), Options{Config: cfg, Data: data.Source{Path: dir}, Out: out, MaxIters: 3, ValImages: 50, CheckpointInterval: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if !saved[2] {
		t.Fatalf("no time-based checkpoint of iteration 2 before iteration 3 (saved %v)", saved)
	}
}

package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/xmr-project/xmr/synth"
)

// TestDemoSchedule checks the training the demo announces: iterations,
// with the slow machine's time only for the default config (the one it is
// measured for) and only when it is worth saying, or a time budget.
func TestDemoSchedule(t *testing.T) {
	cases := []struct {
		iters  int
		budget time.Duration
		config string
		want   string
	}{
		{demoIters, 0, demoConfig, "for 600 iterations (about 1m10s on 2 cores of the Intel Xeon it was measured on; more or less on another CPU)"},
		{1000, 0, demoConfig, "for 1000 iterations (about 2m0s on 2 cores of the Intel Xeon"},
		{600, 0, "tern-small", "for 600 iterations"},
		{3, 0, demoConfig, "for 3 iterations"}, // under a second: no estimate
		{600, time.Minute, demoConfig, "for 600 iterations or 1m0s"},
		{0, 90 * time.Second, demoConfig, "for 1m30s"},
	}
	for _, c := range cases {
		got := demoSchedule(c.iters, c.budget, c.config)
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("demoSchedule(%d, %v, %q) = %q, want it to start with %q", c.iters, c.budget, c.config, got, c.want)
		}
		if (c.config != demoConfig || c.iters < 100) && strings.Contains(got, "Xeon") {
			t.Errorf("demoSchedule(%d, %v, %q) = %q: an estimate for a config it was not measured for", c.iters, c.budget, c.config, got)
		}
	}
}

// TestDemoWorldShape checks that the demo makes its world again when the
// one in its directory has other features than the demo's (a world from
// an earlier version of the demo), and reuses its own.
func TestDemoWorldShape(t *testing.T) {
	old := stdout
	stdout = io.Discard
	t.Cleanup(func() { stdout = old })
	dir := t.TempDir()
	ctx := context.Background()
	if _, err := synth.Generate(ctx, dir, synth.Config{N: 200, Seed: 1, Dim: 8, Regions: 6, Noise: 0.1}); err != nil {
		t.Fatal(err)
	}
	m, made, err := demoWorld(ctx, dir, 200, false)
	if err != nil {
		t.Fatal(err)
	}
	if !made || m.Dim != demoDim || m.Regions != demoRegions || !m.PNG {
		t.Fatalf("a world of 8-d features in 6 regions: made %v, now %d-d in %d regions, PNGs %v; want it made again with %d-d in %d regions and PNGs",
			made, m.Dim, m.Regions, m.PNG, demoDim, demoRegions)
	}
	if _, made, err := demoWorld(ctx, dir, 200, false); err != nil || made {
		t.Fatalf("the demo's own world: made again %v (%v), want it reused", made, err)
	}
}

// TestDemoBudget checks the main model's training time under --total-time:
// what is left once the steps before it and the reserve are taken, unless
// --time-budget is less, and at least demoMinTraining.
func TestDemoBudget(t *testing.T) {
	cases := []struct {
		budget, total, elapsed time.Duration
		want                   time.Duration
		note                   string
	}{
		{0, 0, 20 * time.Minute, 0, ""},
		{time.Minute, 0, 20 * time.Minute, time.Minute, ""},
		{0, 57 * time.Minute, 23*time.Minute + 400*time.Millisecond, 32 * time.Minute, "what --total-time 57m0s leaves after 23m0s of the steps before it and 2m0s kept"},
		{10 * time.Minute, 57 * time.Minute, 23 * time.Minute, 10 * time.Minute, ""},
		{40 * time.Minute, 57 * time.Minute, 23 * time.Minute, 32 * time.Minute, "what --total-time 57m0s leaves"},
		{0, 57 * time.Minute, 53 * time.Minute, demoMinTraining, "53m0s of --total-time 57m0s went to the steps before it: training for 5m0s all the same"},
		{time.Minute, 57 * time.Minute, 56 * time.Minute, time.Minute, "56m0s of --total-time 57m0s went to the steps before it: training for 1m0s"},
	}
	for _, c := range cases {
		got, note := demoBudget(c.budget, c.total, c.elapsed)
		if got != c.want || !strings.HasPrefix(note, c.note) || (c.note == "") != (note == "") {
			t.Errorf("demoBudget(%v, %v, %v) = %v, %q; want %v, %q", c.budget, c.total, c.elapsed, got, note, c.want, c.note)
		}
	}
}

package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xmr-project/xmr/synth"
)

// TestTrainCtrlC sends SIGINT to a training run: it must exit 130 after
// saving last.safetensors and print the command that continues it, and that
// command, run as printed, must finish the run.
func TestTrainCtrlC(t *testing.T) {
	dir := t.TempDir()
	world := filepath.Join(dir, "world")
	if _, err := synth.Generate(context.Background(), world, synth.Config{N: 200, Seed: 1, Dim: 16, Regions: 6, Noise: 0.1, NoImages: true, Dev: 50, Test: 50}); err != nil {
		t.Fatal(err)
	}
	cfg := writeTinyConfig(t, dir, "teran", "alignment")
	runDir := filepath.Join(dir, "run")
	// Keep the test process alive whatever happens to runMain's handler.
	guard := make(chan os.Signal, 1)
	signal.Notify(guard, syscall.SIGINT)
	defer signal.Stop(guard)

	type result struct {
		stdout, stderr string
		code           int
	}
	done := make(chan result, 1)
	go func() {
		o, e, c := run(t, "train", "--config", cfg, "--data", world, "--out", runDir, "--max-iters", "30", "--val-images", "50", "--checkpoint-iters", "1")
		done <- result{o, e, c}
	}()
	last := filepath.Join(runDir, "last.safetensors")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(last); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no last.safetensors after 2 minutes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != exitInterrupted {
		t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitInterrupted, r.stderr)
	}
	want := "xmr train --out " + runDir + " --resume --data " + world + " --max-iters 30 --val-images 50 --checkpoint-iters 1"
	for _, w := range []string{"interrupted after iteration", "saved " + last, "continue with:\n  " + want} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "context canceled") {
		t.Errorf("stderr says %q", "context canceled")
	}
	stdout, stderr, code := run(t, strings.Fields(want)[1:]...)
	if code != 0 || !strings.Contains(stdout, "stopped after 30 iterations") {
		t.Fatalf("%s: exit %d\n%s\n%s", want, code, stdout, stderr)
	}
}

func TestShellJoin(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"xmr", "train", "--data", "runs/a-b_c.d"}, "xmr train --data runs/a-b_c.d"},
		{[]string{"--data", "my data"}, "--data 'my data'"},
		{[]string{"--data", "feats/*.tsv"}, "--data 'feats/*.tsv'"},
		{[]string{"it's"}, `'it'\''s'`},
		{[]string{""}, "''"},
	}
	for _, c := range cases {
		if got := shellJoin(c.args); got != c.want {
			t.Errorf("shellJoin(%q) = %s, want %s", c.args, got, c.want)
		}
	}
}

// TestSynthCtrlC sends SIGINT to xmr synth: it must exit 130 saying that
// nothing was kept, and leave no file under a final name.
func TestSynthCtrlC(t *testing.T) {
	out := filepath.Join(t.TempDir(), "world")
	guard := make(chan os.Signal, 1)
	signal.Notify(guard, syscall.SIGINT)
	defer signal.Stop(guard)
	type result struct {
		stderr string
		code   int
	}
	done := make(chan result, 1)
	go func() {
		_, e, c := run(t, "synth", "-n", "20000", "--dim", "16", "--out", out)
		done <- result{e, c}
	}()
	// Wait until it writes its temporary files, then interrupt.
	deadline := time.Now().Add(time.Minute)
	for {
		entries, _ := os.ReadDir(out)
		if len(entries) > 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("synth wrote nothing in a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != exitInterrupted || !strings.Contains(r.stderr, "interrupted; nothing was written under a final name") {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		if e.Name() != "xmr.lock" && !strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left under a final name: %s", e.Name())
		}
	}
}

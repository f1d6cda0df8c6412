package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
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

// TestWatchInterrupt checks runMain's watcher: at the first signal (ctx
// cancelled) it calls stop once and prints the notice once; when the
// command finishes first it prints nothing, never calls stop, and is gone
// when finish returns.
func TestWatchInterrupt(t *testing.T) {
	for _, signalled := range []bool{true, false} {
		t.Run(fmt.Sprintf("signalled=%v", signalled), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stopped := make(chan struct{})
			stops := 0
			stop := func() {
				stops++
				close(stopped)
			}
			var out bytes.Buffer
			w := &lockedWriter{w: &out}
			finish := watchInterrupt(ctx, stop, w)
			if signalled {
				cancel()
				select {
				case <-stopped:
				case <-time.After(10 * time.Second):
					t.Fatal("stop not called 10 s after the signal")
				}
			}
			finish()
			cancel() // a signal after the command ended changes nothing
			want, wantStops := "", 0
			if signalled {
				want, wantStops = interruptNotice+"\n", 1
			}
			w.mu.Lock()
			got := out.String()
			w.mu.Unlock()
			if got != want || stops != wantStops {
				t.Fatalf("printed %q and called stop %d times; want %q and %d", got, stops, want, wantStops)
			}
		})
	}
}

// hangEnv asks the test binary to act as the process of
// TestSecondCtrlCKills (see TestHangHelper).
const hangEnv = "XMR_TEST_HANG"

// TestHangHelper is not a test: run as a child process of
// TestSecondCtrlCKills, it runs xmr with a command that, told to stop,
// goes on as a phase that does not check its context would.
func TestHangHelper(t *testing.T) {
	if os.Getenv(hangEnv) != "1" {
		t.Skip("the child process of TestSecondCtrlCKills")
	}
	register(&command{name: "hang", summary: "wait for a signal, then ignore it", run: func(ctx context.Context, _ []string) error {
		fmt.Fprintln(stdout, "ready")
		<-ctx.Done()
		fmt.Fprintln(stdout, "cancelled")
		time.Sleep(time.Minute)
		return ctx.Err()
	}})
	os.Exit(runMain([]string{"hang"}, os.Stdout, os.Stderr))
}

// TestSecondCtrlCKills runs xmr in a child process, with a command that
// goes on after the first SIGINT: the first must print the notice and leave
// the process running, the second must kill it by SIGINT at once.
func TestSecondCtrlCKills(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	// Handling SIGINT here makes it default, not ignored, in the child
	// even if this process was started with it ignored (as background jobs
	// of a shell are).
	guard := make(chan os.Signal, 1)
	signal.Notify(guard, syscall.SIGINT)
	defer signal.Stop(guard)

	cmd := exec.Command(exe, "-test.run=^TestHangHelper$")
	cmd.Env = append(os.Environ(), hangEnv+"=1")
	stdoutPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderrPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := func(r io.Reader) <-chan string {
		ch := make(chan string, 16)
		go func() {
			defer close(ch)
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				ch <- sc.Text()
			}
		}()
		return ch
	}
	outLines, errLines := lines(stdoutPipe), lines(stderrPipe)
	var stderr []string
	expect := func(ch <-chan string, want string) {
		t.Helper()
		timeout := time.After(time.Minute)
		for {
			select {
			case l, ok := <-ch:
				if !ok {
					t.Fatalf("output ended before %q; stderr:\n%s", want, strings.Join(stderr, "\n"))
				}
				if ch == errLines {
					stderr = append(stderr, l)
				}
				if l == want {
					return
				}
			case <-timeout:
				t.Fatalf("no %q in a minute; stderr:\n%s", want, strings.Join(stderr, "\n"))
			}
		}
	}
	expect(outLines, "ready")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	expect(errLines, interruptNotice)
	expect(outLines, "cancelled")

	exited := make(chan error, 1)
	go func() {
		for range outLines { // drain, so that Wait can finish
		}
		for range errLines {
		}
		exited <- cmd.Wait()
	}()
	select {
	case err := <-exited:
		t.Fatalf("the first SIGINT ended the process: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the second SIGINT did not end the process in 30 s")
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Fatalf("process ended with %v, want killed by SIGINT", cmd.ProcessState)
	}
}

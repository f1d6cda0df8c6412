package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xmr-project/xmr/synth"
)

// TestDemoNextCommandsRun makes a world with the demo's test splits (1000
// test images, 1200 in testall), trains a tiny model briefly, and runs every
// command the demo's closing hint prints: each must succeed.
func TestDemoNextCommandsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("evaluates 2,200 images")
	}
	dir := t.TempDir()
	world := filepath.Join(dir, "world")
	m, err := synth.Generate(context.Background(), world, synth.Config{N: 1500, Seed: 1, Dim: 16, Regions: 6, Noise: 0.1, NoImages: true, Dev: 100, Test: 1200})
	if err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(dir, "run")
	cfg := writeTinyConfig(t, dir, "teran", "alignment")
	if _, stderr, code := run(t, "train", "--config", cfg, "--data", world, "--out", runDir, "--max-iters", "2", "--val-images", "50"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	next := demoNext(filepath.Join(runDir, "best-rsum.safetensors"), world, m)
	if len(next) != 2 {
		t.Fatalf("hints %q, want the test split and all of testall", next)
	}
	for _, args := range next {
		if args[0] != "xmr" {
			t.Fatalf("hint %q", args)
		}
		stdout, stderr, code := run(t, args[1:]...)
		if code != 0 || !strings.Contains(stdout, "rsum") {
			t.Errorf("%s: exit %d\n%s\n%s", shellJoin(args), code, stdout, stderr)
		}
	}
}

// TestDemoNext lists the hints for other world sizes: the 1K protocol only
// with whole folds of 1000 images, 5K only with 5000.
func TestDemoNext(t *testing.T) {
	cases := []struct {
		testall int
		want    []string // the last arguments of each hint
	}{
		{1000, []string{"--split test"}},
		{1200, []string{"--split test", "--split testall"}},
		{2000, []string{"--split test", "--split testall", "--split testall --protocol 1k"}},
		{2500, []string{"--split test", "--split testall"}},
		{5000, []string{"--split test", "--split testall", "--split testall --protocol 1k", "--split testall --protocol 5k"}},
	}
	for _, c := range cases {
		m := &synth.Manifest{Splits: []synth.Split{{Name: "testall", Len: c.testall}, {Name: "test", Len: min(1000, c.testall), Of: "testall"}}}
		var got []string
		for _, args := range demoNext("b.safetensors", "w", m) {
			if !slices.Equal(args[:6], []string{"xmr", "eval", "--checkpoint", "b.safetensors", "--data", "w"}) {
				t.Fatalf("hint %q", args)
			}
			got = append(got, strings.Join(args[6:], " "))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("testall of %d: hints %q, want %q", c.testall, got, c.want)
		}
	}
}

// TestQueryResults checks that the grid shows the ground-truth image with
// its rank when it is not among the top results.
func TestQueryResults(t *testing.T) {
	scores := []float32{0.1, 0.9, 0.5, 0.3, 0.5}
	cases := []struct {
		truth int
		want  []queryResult
	}{
		{1, []queryResult{{1, 1, 0.9}, {2, 2, 0.5}}},
		{0, []queryResult{{1, 1, 0.9}, {2, 2, 0.5}, {0, 5, 0.1}}},
		{4, []queryResult{{1, 1, 0.9}, {2, 2, 0.5}, {4, 3, 0.5}}},
	}
	for _, c := range cases {
		if got := queryResults(scores, c.truth, 2); !slices.Equal(got, c.want) {
			t.Errorf("truth %d: %+v, want %+v", c.truth, got, c.want)
		}
	}
}

// TestDemo runs the demo on a small world with a tiny model: it makes the
// world (with PNGs), trains, evaluates, draws and indexes (--no-serve); a
// second run reuses all of it; a third serves the page until SIGTERM,
// answering a search on the way, and exits 0.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	dir := t.TempDir()
	demo := filepath.Join(dir, "demo")
	cfg := writeTinyConfig(t, dir, "teran", "alignment")
	args := []string{"demo", "--dir", demo, "--n", "300", "--config", cfg, "--max-iters", "10", "--time-budget", "0"}
	stdout, stderr, code := run(t, append(args, "--no-serve")...)
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"1/6 generating a synthetic world of 300 images with PNGs", "2/6 training", "10 iterations",
		"3/6 evaluating", "rsum", "word-region alignment accuracy", "4/6 drawing",
		"5/6 indexing the test split", "60 images and 300 captions",
		"xmr serve --index " + filepath.Join(demo, "index") + " --images " + filepath.Join(demo, "world", "images", "test"),
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("first run: stdout lacks %q:\n%s", want, stdout)
		}
	}
	for _, f := range []string{"alignment-1.png", "query-1.png", "run/best-rsum.safetensors", "index/manifest.json", "world/images/test/synth-0000000.png"} {
		if _, err := os.Stat(filepath.Join(demo, f)); err != nil {
			t.Errorf("the demo made no %s: %v", f, err)
		}
	}

	stdout, stderr, code = run(t, append(args, "--no-serve")...)
	if code != 0 {
		t.Fatalf("second demo: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"1/6 using the synthetic world", "2/6 using the model", "3/6 evaluating", "5/6 using the index in"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("second run: stdout lacks %q:\n%s", want, stdout)
		}
	}

	// Another config: the model is trained again (it used to be reused
	// whatever --config said), and so is the index; the first config's
	// model is not reused after that either.
	other := writeTinyConfig(t, dir, "tern", "matching")
	otherArgs := []string{"demo", "--dir", demo, "--n", "300", "--config", other, "--max-iters", "5", "--time-budget", "0", "--no-serve"}
	for i, c := range []struct {
		args []string
		want []string
	}{
		{otherArgs, []string{"2/6 training", "(tern)", "trained with another config; training again", "5/6 indexing the test split"}},
		{otherArgs, []string{"2/6 using the model", "5/6 using the index in"}},
		{append(args, "--no-serve"), []string{"2/6 training", "(teran)", "trained with another config; training again", "5/6 indexing the test split"}},
	} {
		stdout, stderr, code = run(t, c.args...)
		if code != 0 {
			t.Fatalf("config run %d: exit %d\n%s\n%s", i+1, code, stdout, stderr)
		}
		for _, want := range c.want {
			if !strings.Contains(stdout, want) {
				t.Errorf("config run %d: stdout lacks %q:\n%s", i+1, want, stdout)
			}
		}
	}

	// Serve: wait for the address, search, then SIGTERM.
	guard := make(chan os.Signal, 1)
	signal.Notify(guard, syscall.SIGTERM)
	defer signal.Stop(guard)
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- runMain(append(args, "--addr", "127.0.0.1:0"), &out, &errb) }()
	addr := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+/) \(Ctrl-C stops\)`)
	deadline := time.Now().Add(2 * time.Minute)
	var base string
	for base == "" {
		if m := addr.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("demo exited %d before serving\n%s\n%s", code, out.String(), errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no address after 2 minutes:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "6/6 serving the index") || !strings.Contains(out.String(), "try "+base+"#q=") {
		t.Errorf("stdout:\n%s", out.String())
	}
	resp, err := http.Post(base+"api/search/text", "application/json", strings.NewReader(`{"text": "a red circle", "k": 3}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Count(string(body), `"rank"`) != 3 || !strings.Contains(string(body), `"url":"/images/synth-`) {
		t.Fatalf("search: %d %s", resp.StatusCode, body)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("demo served and exited %d after SIGTERM\n%s", code, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the demo still serves 30 s after SIGTERM")
	}
	if !strings.Contains(errb.String(), "shutting down") {
		t.Errorf("stderr does not say it shut down:\n%s", errb.String())
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

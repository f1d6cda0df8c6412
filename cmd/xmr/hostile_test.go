package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xmr-project/xmr/npy"
)

// The cases of issue 27 (a hostile user's inputs) that are not about where
// outputs go: each must end in a clear error or the right result, never a
// hang or a panic.

// TestAlignWildBoxes gives xmr align boxes of 1e30, +Inf and far outside
// the image (the drawing looped for ever on them): each is refused, naming
// the boxes file and the box, before the model is loaded.
func TestAlignWildBoxes(t *testing.T) {
	dir := t.TempDir()
	feat := filepath.Join(dir, "f.npy")
	if err := npy.WriteFile(feat, []int{2, 4}, make([]float32, 8)); err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(dir, "ck.safetensors")
	os.WriteFile(ck, []byte("not a checkpoint"), 0o644)
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		name string
		box  [4]float32
		want string
	}{
		{"1e30", [4]float32{0, 0, 1e30, 1e30}, "box 1 is [0 0 1e+30 1e+30]"},
		{"+Inf", [4]float32{0, 0, inf, 10}, "box 1 is [0 0 +Inf 10]"},
		{"-Inf", [4]float32{-inf, 0, 10, 10}, "coordinate 0 (-Inf)"},
		{"far left", [4]float32{-500, 0, 10, 10}, "within [-200, 400]"},
		{"far below", [4]float32{0, 0, 10, 250}, "within [-100, 200]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			boxes := filepath.Join(dir, tc.name+".npy")
			if err := npy.WriteFile(boxes, []int{2, 4}, append([]float32{1, 2, 30, 40}, tc.box[:]...)); err != nil {
				t.Fatal(err)
			}
			_, stderr, code := run(t, "align", "--checkpoint", ck, "--features", feat, "--boxes", boxes,
				"--size", "200x100", "--text", "a dog", "--out", filepath.Join(dir, "a.png"))
			if code != 1 || !strings.Contains(stderr, boxes+": box 1") || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, want 1 and an error naming %s and %q:\n%s", code, boxes, tc.want, stderr)
			}
		})
	}
	// Boxes inside the image pass the check: the error is then the
	// checkpoint's.
	boxes := filepath.Join(dir, "good.npy")
	npy.WriteFile(boxes, []int{2, 4}, []float32{1, 2, 30, 40, -10, 0, 210, 100})
	_, stderr, code := run(t, "align", "--checkpoint", ck, "--features", feat, "--boxes", boxes,
		"--size", "200x100", "--text", "a dog", "--out", filepath.Join(dir, "a.png"))
	if code != 1 || strings.Contains(stderr, "box") || !strings.Contains(stderr, ck) {
		t.Fatalf("good boxes: exit %d, want 1 about the checkpoint:\n%s", code, stderr)
	}
}

// TestNoInterruptNoticeOnPanic runs a command that panics: the panic goes
// on up, and "interrupted" is not printed, since no signal came (the
// deferred stop of the signal context used to look like one).
func TestNoInterruptNoticeOnPanic(t *testing.T) {
	commands["panic-test"] = &command{name: "panic-test", run: func(context.Context, []string) error { panic("boom") }}
	defer delete(commands, "panic-test")
	var stderr bytes.Buffer
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the command's panic", r)
			}
		}()
		runMain([]string{"panic-test"}, new(bytes.Buffer), &stderr)
	}()
	time.Sleep(100 * time.Millisecond) // the old watcher printed from its goroutine
	if strings.Contains(stderr.String(), "interrupted") {
		t.Fatalf("stderr says interrupted though no signal came:\n%s", stderr.String())
	}
}

// TestWordNetErrorExitCode points $XMR_WORDNET at a directory with no
// dictionary: xmr relevance --metric spice fails with exit 1 (a runtime
// error naming XMR_WORDNET), not 2 (a usage error); an unknown metric is
// still a usage error.
func TestWordNetErrorExitCode(t *testing.T) {
	dir := t.TempDir()
	caps := filepath.Join(dir, "caps.txt")
	os.WriteFile(caps, []byte(strings.Repeat("a dog on the grass\n", 5)), 0o644)
	t.Setenv("XMR_WORDNET", filepath.Join(dir, "no-wordnet-here"))
	_, stderr, code := run(t, "relevance", "--metric", "spice", "--captions", caps, "--out", filepath.Join(dir, "rel.bin"))
	if code != 1 || !strings.Contains(stderr, "XMR_WORDNET") || strings.Contains(stderr, "-h\" for help") {
		t.Errorf("broken XMR_WORDNET: exit %d, want 1 and an error naming XMR_WORDNET:\n%s", code, stderr)
	}
	_, stderr, code = run(t, "relevance", "--metric", "bleu", "--captions", caps, "--out", filepath.Join(dir, "rel.bin"))
	if code != 2 || !strings.Contains(stderr, "known metrics are rouge-l, spice") {
		t.Errorf("unknown metric: exit %d, want 2:\n%s", code, stderr)
	}
}

// TestEvalSimsNonFinite gives xmr eval --sims matrices holding +Inf (all
// +Inf gave rsum 100) and -Inf: each is refused, naming the entry.
func TestEvalSimsNonFinite(t *testing.T) {
	dir := t.TempDir()
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		name string
		at   int
		v    float32
		want string
	}{
		{"one +Inf", 12, inf, "+Inf at [1, 2] (image 1, caption 2)"},
		{"-Inf", 3, -inf, "-Inf at [0, 3]"},
		{"all +Inf", -1, inf, "+Inf at [0, 0]"},
	} {
		v := make([]float32, 2*10)
		for i := range v {
			v[i] = float32(i%7) / 7
			if tc.at < 0 || i == tc.at {
				v[i] = tc.v
			}
		}
		path := filepath.Join(dir, tc.name+".npy")
		if err := npy.WriteFile(path, []int{2, 10}, v); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := run(t, "eval", "--sims", path)
		if code != 1 || !strings.Contains(stderr, tc.want) || strings.Contains(stdout, "rsum") {
			t.Errorf("%s: exit %d, want 1 and %q:\n%s%s", tc.name, code, tc.want, stdout, stderr)
		}
	}
}

// TestDataFileFIFO replaces one file of a data directory, or the best
// checkpoint of a run directory, by a FIFO that no process writes: xmr
// eval and xmr train fail at once, naming the file as not a regular file.
// open(2) of such a FIFO used to wait for a writer for ever, and SIGTERM
// did not stop it. (A flag naming a FIFO is package outpath's usage
// error.)
func TestDataFileFIFO(t *testing.T) {
	world, ckpt := evalWorld(t)
	for _, c := range []struct {
		cmd  string
		file string // in the copy of the world, or in a run directory "run/"
	}{
		{"eval", "test_caps.txt"},
		{"eval", "test_ims.npy"},
		{"eval", "test_boxes.npy"},
		{"eval", "test_ids.txt"},
		{"eval", "test_align.jsonl"},
		{"train", "train_caps.txt"},
		{"train", "dev_ims.npy"},
		{"eval", "run/best-rsum.safetensors"},
	} {
		t.Run(c.cmd+" "+c.file, func(t *testing.T) {
			dir := t.TempDir()
			data := filepath.Join(dir, "world")
			if err := os.CopyFS(data, os.DirFS(world)); err != nil {
				t.Fatal(err)
			}
			fifo, checkpoint := filepath.Join(data, c.file), ckpt
			if run, ok := strings.CutPrefix(c.file, "run/"); ok {
				checkpoint = filepath.Join(dir, "run")
				fifo = filepath.Join(checkpoint, run)
				if err := os.Mkdir(checkpoint, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			os.Remove(fifo)
			if err := syscall.Mkfifo(fifo, 0o644); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			args := []string{"eval", "--checkpoint", checkpoint, "--data", data, "--no-ndcg"}
			if c.cmd == "train" {
				cfg := writeTinyConfig(t, dir, "teran", "alignment")
				args = []string{"train", "--config", cfg, "--data", data, "--out", filepath.Join(dir, "run"), "--max-iters", "1"}
			}
			type result struct {
				stderr string
				code   int
			}
			done := make(chan result, 1)
			go func() {
				_, stderr, code := run(t, args...)
				done <- result{stderr, code}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(2 * time.Minute): // not a speed check: fail, do not hang
				t.Fatalf("xmr %s still runs after 2 minutes: waiting on the FIFO %s?", strings.Join(args, " "), fifo)
			}
			if r.code == 0 || !strings.Contains(r.stderr, fifo) || !strings.Contains(r.stderr, "not a regular file (a FIFO)") {
				t.Errorf("xmr %s: exit %d, stderr:\n%s\nwant a failure naming %s as not a regular file (a FIFO)", strings.Join(args, " "), r.code, r.stderr, fifo)
			}
		})
	}
}

package main

import (
	"strings"
	"testing"

	"github.com/xmr-project/xmr/blas"
)

// TestSlowGEMMWarning runs commands with the pure-Go GEMM in use (as
// XMR_BLAS=go or a machine without OpenBLAS leave it): a long command
// (train) logs one WARN line at its start, saying why, how much slower and
// how to install OpenBLAS; short ones (version, tokenize) do not. With
// OpenBLAS in use, train does not warn either.
func TestSlowGEMMWarning(t *testing.T) {
	start := blas.Current()
	defer blas.Use(start)
	blas.Use(blas.Go{})
	warns := func(stderr string) int { return strings.Count(stderr, "level=WARN msg=\"the pure-Go GEMM is in use") }

	_, stderr, code := run(t, "train") // a usage error, after the warning
	if code != 2 || warns(stderr) != 1 {
		t.Fatalf("train: exit %d, %d warnings, want 2 and 1:\n%s", code, warns(stderr), stderr)
	}
	line := stderr[strings.Index(stderr, "level=WARN"):]
	line = line[:strings.IndexByte(line, '\n')]
	why, _ := blas.Fallback() // "XMR_BLAS=go selects it", "the OpenBLAS library ... was not found", or Use's
	for _, want := range []string{"3-14x slower", "0.07-0.36x", `why="` + why + `"`, `install="sudo apt-get install -y libopenblas0"`} {
		if !strings.Contains(line, want) {
			t.Errorf("the warning lacks %q:\n%s", want, line)
		}
	}
	for _, args := range [][]string{{"version"}, {"tokenize", "unexpected"}, {"train", "-h"}} {
		_, stderr, _ := run(t, args...)
		if warns(stderr) != 0 {
			t.Errorf("%s warned:\n%s", strings.Join(args, " "), stderr)
		}
	}
	if _, ok := start.(*blas.OpenBLAS); ok {
		blas.Use(start)
		if _, stderr, _ := run(t, "train"); warns(stderr) != 0 {
			t.Errorf("train with OpenBLAS warned:\n%s", stderr)
		}
	}
}

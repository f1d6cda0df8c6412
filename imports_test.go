package xmr_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/xmr-project/xmr"

// boundaries are the import rules of the code base (see docs/design.md):
// the packages on the left must never depend, directly or through others,
// on the packages on the right. The search path (model and what it
// imports) never loads training machinery, dataset readers or metrics;
// benchmarks import libraries, never the reverse.
var boundaries = []struct {
	pkgs      []string
	forbidden []string
}{
	{
		pkgs:      []string{"model", "nn", "tensor", "text", "checkpoint", "blas"},
		forbidden: []string{"train", "optim", "data", "eval", "synth", "viz", "bench"},
	},
	{
		pkgs:      []string{"tensor", "blas"},
		forbidden: []string{"nn", "model"},
	},
	{
		pkgs:      []string{"data", "eval", "text", "synth"},
		forbidden: []string{"train"},
	},
	{
		pkgs:      []string{"npy", "mmap", "atomicfile", "progress"},
		forbidden: []string{"data", "eval", "model", "train", "tensor", "nn", "synth", "checkpoint"},
	},
}

// deps returns the module packages that pkg depends on (itself excluded),
// without the module prefix.
func deps(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "./"+pkg).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps ./%s: %v\n%s", pkg, err, ee.Stderr)
		}
		t.Fatalf("go list -deps ./%s: %v", pkg, err)
	}
	got := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		p, ok := strings.CutPrefix(sc.Text(), module+"/")
		if ok && p != pkg {
			got[p] = true
		}
	}
	return got
}

// forbids reports whether dep is one of the forbidden packages or below one.
func forbids(forbidden []string, dep string) bool {
	for _, f := range forbidden {
		if dep == f || strings.HasPrefix(dep, f+"/") {
			return true
		}
	}
	return false
}

func TestImportBoundaries(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	for _, b := range boundaries {
		for _, pkg := range b.pkgs {
			for dep := range deps(t, pkg) {
				if forbids(b.forbidden, dep) {
					t.Errorf("%s depends on %s (forbidden: %s)", pkg, dep, strings.Join(b.forbidden, ", "))
				}
			}
		}
	}
}

package xmr_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/xmr-project/xmr"

// boundaries are the import rules of the code base (docs/design.md): the
// packages on the left must never depend, directly or through others, on
// the packages on the right (or anything below them). The search path
// (model and what it imports) never loads training machinery, dataset
// readers or metrics.
var boundaries = []struct {
	pkgs      []string
	forbidden []string
}{
	{
		pkgs:      []string{"server", "index", "model", "nn", "tensor", "text", "checkpoint", "blas", "weaviate"},
		forbidden: []string{"train", "optim", "data", "eval", "synth", "viz"},
	},
	{
		// The local index and the server know Weaviate only through
		// index.Searcher: only the command (and the benchmarks) link it.
		pkgs:      []string{"server", "index", "model"},
		forbidden: []string{"weaviate"},
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
		// The detector is a model of pixels, beside nn and data: it reads
		// its weights with tfjs and multiplies with blas, and its upper
		// part runs on tensor's tape to be fine-tuned (detect.Net);
		// nothing of the image-text side; and nothing below the commands'
		// extraction imports it back.
		pkgs:      []string{"detect", "tfjs"},
		forbidden: []string{"model", "train", "data", "eval", "index", "server", "synth", "viz", "checkpoint", "extract", "nn"},
	},
	{
		pkgs:      []string{"tfjs"},
		forbidden: []string{"tensor"},
	},
	{
		// The fine-tuned part of the detector is the image side's: the
		// training loop and the commands use it; it knows nothing of the
		// models, the loop, the evaluation or the index.
		pkgs:      []string{"finetune"},
		forbidden: []string{"model", "train", "eval", "index", "server", "viz", "weaviate"},
	},
	{
		pkgs:      []string{"tensor", "nn", "blas", "model", "data", "index", "server", "checkpoint", "tfjs", "npy", "torchfile"},
		forbidden: []string{"detect"},
	},
	{
		pkgs:      []string{"npy", "mmap", "atomicfile", "outpath", "lockfile", "progress", "torchfile", "tfjs", "photomodel", "wordvec", "internal/npmpack"},
		forbidden: []string{"data", "eval", "model", "train", "tensor", "nn", "synth", "checkpoint"},
	},
}

// moduleDeps returns, for every package of the module, the module packages
// it depends on, all without the module prefix ("" is the root).
func moduleDeps(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, ok := strings.CutPrefix(f[0], module+"/")
		if !ok {
			continue
		}
		deps[pkg] = nil
		for _, d := range f[1:] {
			if d, ok := strings.CutPrefix(d, module+"/"); ok {
				deps[pkg] = append(deps[pkg], d)
			}
		}
	}
	return deps
}

// under reports whether pkg is one of roots or below one.
func under(roots []string, pkg string) bool {
	for _, r := range roots {
		if pkg == r || strings.HasPrefix(pkg, r+"/") {
			return true
		}
	}
	return false
}

func TestImportBoundaries(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	all := moduleDeps(t)
	if len(all) < 20 {
		t.Fatalf("go list found only %d packages: %v", len(all), all)
	}
	for _, b := range boundaries {
		for _, pkg := range b.pkgs {
			deps, ok := all[pkg]
			if !ok {
				t.Errorf("no package %s in the module", pkg)
			}
			for _, dep := range deps {
				if under(b.forbidden, dep) {
					t.Errorf("%s depends on %s (forbidden: %s)", pkg, dep, strings.Join(b.forbidden, ", "))
				}
			}
		}
	}
	// Benchmarks import what they measure; only the command imports them.
	for pkg, deps := range all {
		if under([]string{"bench", "cmd"}, pkg) {
			continue
		}
		for _, dep := range deps {
			if under([]string{"bench"}, dep) {
				t.Errorf("%s depends on %s: libraries must not import the benchmarks", pkg, dep)
			}
		}
	}
}

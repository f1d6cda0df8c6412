package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// fakePython writes dir/python3, a shell script that acts as an interpreter
// able to import exactly the modules in has, and that appends its own path
// to the file log at each call. sed is the path of sed(1).
func fakePython(t *testing.T, dir, log, sed string, has ...string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/bin/sh
echo "$0" >> %q
[ "$1" = "-c" ] || exit 2
for m in $(printf '%%s' "$2" | %q -e 's/^import //' -e 's/,/ /g'); do
	case " sys %s " in
	*" $m "*) ;;
	*) echo "Traceback (most recent call last):" >&2
	   echo "ModuleNotFoundError: No module named '$m'" >&2
	   exit 1 ;;
	esac
done
`, log, sed, strings.Join(has, " "))
	py := filepath.Join(dir, "python3")
	if err := os.WriteFile(py, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return py
}

func TestFindPython(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("fake interpreters are shell scripts")
	}
	sed, err := exec.LookPath("sed")
	if err != nil {
		t.Skip("no sed for the fake interpreters")
	}
	cases := []struct {
		name    string
		path    string // FindPython's path argument; "@bare", "@torch" name a fake
		env     string // XMR_PYTHON, the same way
		modules []string
		want    string // "@bare", "@torch", "@both"
		wantErr string // a substring of the error, which must wrap ErrNoPython
		calls   int    // interpreters run
	}{
		{name: "first with torch wins", modules: []string{"torch"}, want: "@torch", calls: 2},
		{name: "first with torch and numpy", modules: []string{"torch", "numpy"}, want: "@both", calls: 3},
		{name: "any python for no modules", want: "@bare", calls: 1},
		{name: "dotted module", modules: []string{"safetensors.numpy"}, wantErr: "No module named 'safetensors.numpy'", calls: 3},
		{name: "none has it", modules: []string{"jax"}, wantErr: "no python3 on $PATH can import jax", calls: 3},
		{name: "explicit path used", path: "@torch", modules: []string{"torch"}, want: "@torch", calls: 1},
		{name: "explicit path not replaced", path: "@bare", modules: []string{"torch"}, wantErr: "cannot import torch: ModuleNotFoundError: No module named 'torch'", calls: 1},
		{name: "explicit path missing", path: "/nonexistent/python3", modules: []string{"torch"}, wantErr: "/nonexistent/python3 cannot import torch", calls: 0},
		{name: "env used", env: "@both", modules: []string{"numpy"}, want: "@both", calls: 1},
		{name: "env not replaced", env: "@bare", modules: []string{"numpy"}, wantErr: "XMR_PYTHON=", calls: 1},
		{name: "path beats env", path: "@torch", env: "@bare", modules: []string{"torch"}, want: "@torch", calls: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			log := filepath.Join(root, "calls")
			fakes := map[string]string{
				"@bare":  fakePython(t, filepath.Join(root, "bare"), log, sed),
				"@torch": fakePython(t, filepath.Join(root, "torch"), log, sed, "torch"),
				"@both":  fakePython(t, filepath.Join(root, "both"), log, sed, "torch", "numpy"),
			}
			// A directory without python3, a relative one, an
			// executable-less python3 and a link to a directory already
			// listed: all skipped, none run.
			empty := filepath.Join(root, "empty")
			noexec := filepath.Join(root, "noexec")
			for _, d := range []string{empty, noexec} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(noexec, "python3"), []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(root, "link-to-bare")
			if err := os.Symlink(filepath.Join(root, "bare"), link); err != nil {
				t.Fatal(err)
			}
			dirs := []string{empty, "relative", noexec, filepath.Dir(fakes["@bare"]), link, filepath.Dir(fakes["@torch"]), filepath.Dir(fakes["@both"])}
			t.Setenv("PATH", strings.Join(dirs, string(os.PathListSeparator)))
			resolve := func(s string) string {
				if f, ok := fakes[s]; ok {
					return f
				}
				return s
			}
			t.Setenv(EnvPython, resolve(c.env))
			got, err := FindPython(context.Background(), resolve(c.path), c.modules...)
			if c.wantErr != "" {
				if err == nil || !errors.Is(err, ErrNoPython) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got %q, %v; want an ErrNoPython error containing %q", got, err, c.wantErr)
				}
			} else if err != nil || got != fakes[c.want] {
				t.Fatalf("got %q, %v; want %s (%s)", got, err, c.want, fakes[c.want])
			}
			b, _ := os.ReadFile(log)
			calls := strings.Fields(string(b))
			if len(calls) != c.calls {
				t.Errorf("ran %d interpreters %v, want %d", len(calls), calls, c.calls)
			}
		})
	}
}

func TestFindPythonBadModule(t *testing.T) {
	if _, err := FindPython(context.Background(), "", "torch; import os"); err == nil || errors.Is(err, ErrNoPython) {
		t.Fatalf("a bad module name gave %v", err)
	}
}

// localImport matches a Python import statement's module (from M import
// ..., or import M).
var localImport = regexp.MustCompile(`(?m)^[ \t]*(?:from[ \t]+(\w+)[ \t]+import|import[ \t]+(\w+))`)

// TestScripts writes every embedded script, each into a directory of its
// own, checks that every embedded module it imports was written beside it
// and, when an interpreter is at hand, that Python can parse it.
func TestScripts(t *testing.T) {
	names, err := fs.Glob(scripts, "*.py")
	if err != nil || len(names) < 2 {
		t.Fatalf("embedded scripts %v, %v", names, err)
	}
	py, pyErr := FindPython(context.Background(), "")
	imported := map[[2]string]bool{} // {script, module}
	for _, name := range names {
		dir := t.TempDir()
		path, err := WriteScript(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		src, err := scripts.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range localImport.FindAllSubmatch(src, -1) {
			mod := string(m[1]) + string(m[2]) + ".py"
			want, err := scripts.ReadFile(mod)
			if err != nil {
				continue // not one of ours: torch, numpy, the standard library
			}
			imported[[2]string{name, mod}] = true
			if got, err := os.ReadFile(filepath.Join(dir, mod)); err != nil {
				t.Errorf("%s imports %s, which WriteScript did not write beside it: %v", name, mod, err)
			} else if !bytes.Equal(got, want) {
				t.Errorf("%s imports %s, which WriteScript wrote beside it altered", name, mod)
			}
		}
		if pyErr != nil {
			continue
		}
		out, err := exec.Command(py, "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])", path).CombinedOutput()
		if err != nil {
			t.Errorf("%s does not parse: %v\n%s", name, err, out)
		}
	}
	for _, need := range [][2]string{{"peer_trainstep.py", "peerutil.py"}, {"peer_trainstep.py", "teran_torch.py"}, {"import_reference.py", "teran_torch.py"}} {
		if !imported[need] {
			t.Errorf("found no import of %s in %s", need[1], need[0])
		}
	}
	if pyErr != nil {
		t.Logf("scripts not parsed: %v", pyErr)
	}
	if _, err := WriteScript(t.TempDir(), "nosuch.py"); err == nil {
		t.Error("WriteScript wrote a script that is not embedded")
	}
}

// Package tools holds the Python scripts that run beside xmr, the peers of
// `xmr bench` (and centernet_tfjs.js, the TF.js reference of package
// detect, run with Node), embedded in the binary so that they are found
// from any working directory; and the one rule that picks a Python interpreter, for
// those scripts and for the tests that cross-check xmr against PyTorch and
// NumPy.
//
// The rule (FindPython): an interpreter given explicitly (a --python flag,
// else $XMR_PYTHON) is used if it can import what the caller needs, and is
// never replaced by another; otherwise every python3 on $PATH is tried in
// PATH order and the first that imports the modules wins.
package tools

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

//go:embed *.py *.js
var scripts embed.FS

// WriteScript writes the embedded script name (e.g. "peer_rouge.py") into
// dir and returns the file's path. Every Python script gets the modules the
// scripts share (sharedModules) written beside it, whether it imports them
// or not.
func WriteScript(dir, name string) (string, error) {
	if strings.HasSuffix(name, ".py") && !slices.Contains(sharedModules, name) {
		for _, m := range sharedModules {
			if _, err := WriteScript(dir, m); err != nil {
				return "", err
			}
		}
	}
	b, err := scripts.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("tools: no script %q: %w", name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", fmt.Errorf("tools: write script: %w", err)
	}
	return path, nil
}

// sharedModules are the Python modules that scripts import from their own
// directory: peerutil.py, the shared helpers (peak memory, writing
// safetensors), and teran_torch.py, TERAN's PyTorch modules and BERT
// (import_reference.py, peer_trainstep.py and mlm_pretrain.py build them).
var sharedModules = []string{"peerutil.py", "teran_torch.py"}

// EnvPython is the environment variable that names the Python interpreter
// when no path is given to FindPython.
const EnvPython = "XMR_PYTHON"

// ErrNoPython is wrapped by FindPython's error when no interpreter fits; the
// rest of the message says what was tried and why each was refused.
var ErrNoPython = errors.New("no suitable Python interpreter")

// moduleName is a dotted Python module name, as "import" takes it.
var moduleName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// FindPython returns a Python interpreter that can import every module in
// modules (none: any working interpreter):
//
//   - path, if it is not empty: a file, or a command name looked up in $PATH;
//   - else $XMR_PYTHON, if it is set and not empty;
//   - else the first python3 on $PATH, in PATH order, that imports them.
//
// An interpreter chosen by path or $XMR_PYTHON is checked, never replaced
// by another. The check runs `python -c "import MODULES"` under ctx. Errors
// when nothing fits wrap ErrNoPython.
func FindPython(ctx context.Context, path string, modules ...string) (string, error) {
	for _, m := range modules {
		if !moduleName.MatchString(m) {
			return "", fmt.Errorf("tools: %q is not a Python module name", m)
		}
	}
	need := "run"
	if len(modules) > 0 {
		need = "import " + strings.Join(modules, ", ")
	}
	explicit, from := path, ""
	if explicit == "" {
		explicit, from = os.Getenv(EnvPython), EnvPython+"="
	}
	if explicit != "" {
		py, err := exec.LookPath(explicit)
		if err == nil {
			err = canImport(ctx, py, modules)
		}
		if err != nil {
			return "", fmt.Errorf("%w: %s%s cannot %s: %v", ErrNoPython, from, explicit, need, err)
		}
		return py, nil
	}
	cands := pathPythons(os.Getenv("PATH"))
	if len(cands) == 0 {
		return "", fmt.Errorf("%w: no python3 on $PATH (set %s)", ErrNoPython, EnvPython)
	}
	var tried []string
	for _, py := range cands {
		err := canImport(ctx, py, modules)
		if err == nil {
			return py, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		tried = append(tried, fmt.Sprintf("%s: %v", py, err))
	}
	return "", fmt.Errorf("%w: no python3 on $PATH can %s (tried %s); set %s to one that can",
		ErrNoPython, need, strings.Join(tried, "; "), EnvPython)
}

// pathPythons lists the executable files named python3 in the directories
// of pathList, in order, each directory once (a directory and a symbolic
// link to it, such as /bin and /usr/bin on merged-/usr systems, count as
// one). Relative directories are skipped, as exec.LookPath refuses them.
func pathPythons(pathList string) []string {
	var out []string
	seen := map[string]bool{}
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		key := filepath.Clean(dir)
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			key = real
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		py := filepath.Join(dir, "python3")
		if fi, err := os.Stat(py); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			out = append(out, py)
		}
	}
	return out
}

// canImport runs py -c "import MODULES" and returns an error carrying the
// last line of its standard error if it fails.
func canImport(ctx context.Context, py string, modules []string) error {
	code := "import sys"
	if len(modules) > 0 {
		code = "import " + strings.Join(modules, ", ")
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, py, "-c", code)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if line := lastLine(stderr.Bytes()); line != "" {
			return errors.New(line)
		}
		return err
	}
	return nil
}

// lastLine returns the last non-empty line of b, trimmed.
func lastLine(b []byte) string {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return string(bytes.TrimSpace(b))
}

package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"

	"github.com/xmr-project/xmr/blas"
	"github.com/xmr-project/xmr/tools"
)

// RunPeer runs a Python peer: the script of package tools named script,
// written to a temporary directory, with args, under an interpreter that
// can import modules (opts.Python if set, else the one tools.FindPython
// finds). It returns what the script printed on standard output.
//
// When no interpreter fits, the error wraps tools.ErrNoPython and says what
// was tried; benchmarks then skip their peer and note the reason.
//
// The peer starts after xmr's OpenBLAS is loaded, so that it inherits the
// kernels xmr chose for this CPU (blas sets OPENBLAS_CORETYPE when the
// library's own choice falls short): both sides run the same kernels.
func RunPeer(ctx context.Context, opts Options, script string, modules []string, args ...string) ([]byte, error) {
	blas.Current()
	py, err := tools.FindPython(ctx, opts.Python, modules...)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "xmr-peer-*")
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w", script, err)
	}
	defer os.RemoveAll(dir)
	path, err := tools.WriteScript(dir, script)
	if err != nil {
		return nil, err
	}
	out, err := Output(exec.CommandContext(ctx, py, append([]string{path}, args...)...))
	if err != nil {
		return nil, fmt.Errorf("peer %s %s: %w", py, script, err)
	}
	return out, nil
}

// Output runs a peer's command and returns its standard output; when it
// fails, the error carries the end of what it wrote to standard error
// (its last 300 bytes: a traceback's last lines).
func Output(cmd *exec.Cmd) ([]byte, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := bytes.TrimSpace(stderr.Bytes())
		if len(msg) > 300 {
			msg = msg[len(msg)-300:]
		}
		return nil, fmt.Errorf("%w: %s", err, msg)
	}
	return out, nil
}

// LastLine returns the last non-empty line of a peer's output, where the
// peers print their JSON result.
func LastLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

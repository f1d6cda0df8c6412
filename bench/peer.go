package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
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
	cmd, dir, err := peerCommand(ctx, opts, script, modules, args)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out, err := Output(cmd)
	if err != nil {
		return nil, fmt.Errorf("peer %s %s: %w", cmd.Path, script, err)
	}
	return out, nil
}

// peerCommand returns the command that runs script with args under an
// interpreter that can import modules, and the temporary directory the
// script is written to, which the caller removes when the peer has ended.
func peerCommand(ctx context.Context, opts Options, script string, modules, args []string) (*exec.Cmd, string, error) {
	blas.Current()
	py, err := tools.FindPython(ctx, opts.Python, modules...)
	if err != nil {
		return nil, "", err
	}
	dir, err := os.MkdirTemp("", "xmr-peer-*")
	if err != nil {
		return nil, "", fmt.Errorf("peer %s: %w", script, err)
	}
	path, err := tools.WriteScript(dir, script)
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	return exec.CommandContext(ctx, py, append([]string{path}, args...)...), dir, nil
}

// Peer is a Python peer that stays running between measurements, so that
// they can alternate with xmr's own on the same machine at the same
// moment (a machine's speed drifts from minute to minute). It answers
// each request line on its standard input with one line on its standard
// output, and prints its summary when its input ends.
type Peer struct {
	script string
	dir    string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr bytes.Buffer
	err    error // why it ended early, once it has
}

// StartPeer starts script with args as RunPeer would run it, and returns
// once the script has printed its first line (it prints one when it is
// ready: after building its model, say), which ready holds. Close ends it.
func StartPeer(ctx context.Context, opts Options, script string, modules []string, args ...string) (p *Peer, ready []byte, err error) {
	cmd, dir, err := peerCommand(ctx, opts, script, modules, args)
	if err != nil {
		return nil, nil, err
	}
	p = &Peer{script: script, dir: dir, cmd: cmd}
	cmd.Stderr = &p.stderr
	if p.in, err = cmd.StdinPipe(); err == nil {
		var out io.Reader
		if out, err = cmd.StdoutPipe(); err == nil {
			p.out = bufio.NewReader(out)
			err = cmd.Start()
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("peer %s: %w", script, err)
	}
	if ready, err = p.readLine(); err != nil {
		p.Close()
		return nil, nil, err
	}
	return p, ready, nil
}

// Ask sends req (one line) and returns the peer's one-line answer.
func (p *Peer) Ask(req string) ([]byte, error) {
	if p.err != nil {
		return nil, p.err
	}
	if _, err := io.WriteString(p.in, req+"\n"); err != nil {
		return nil, p.failed(fmt.Errorf("writing %q: %w", req, err))
	}
	return p.readLine()
}

// readLine returns the peer's next line of output, without its newline.
func (p *Peer) readLine() ([]byte, error) {
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		return nil, p.failed(fmt.Errorf("reading its output: %w", err))
	}
	return bytes.TrimSpace(line), nil
}

// failed returns err with the peer's exit status and the end of its
// standard error once it has ended (it is killed if it has not).
func (p *Peer) failed(err error) error {
	if p.err != nil {
		return p.err
	}
	p.in.Close()
	if p.cmd.Process != nil {
		p.cmd.Process.Kill()
	}
	if werr := p.cmd.Wait(); werr != nil {
		err = fmt.Errorf("%w (%v)", err, werr)
	}
	os.RemoveAll(p.dir)
	p.err = fmt.Errorf("peer %s: %w%s", p.script, err, stderrTail(p.stderr.Bytes()))
	return p.err
}

// Close ends the peer's input, waits for it to exit and returns the rest
// of its output (its summary). After a failed Ask it returns that error.
func (p *Peer) Close() ([]byte, error) {
	if p.err != nil {
		return nil, p.err
	}
	p.in.Close()
	rest, rerr := io.ReadAll(p.out)
	err := p.cmd.Wait()
	os.RemoveAll(p.dir)
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w%s", p.script, err, stderrTail(p.stderr.Bytes()))
	}
	return rest, nil
}

// stderrTail is ": " and the last 300 bytes of what a peer wrote to
// standard error (a traceback's last lines), or "" when it wrote nothing.
func stderrTail(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return ""
	}
	if len(b) > 300 {
		b = b[len(b)-300:]
	}
	return ": " + string(b)
}

// Output runs a peer's command and returns its standard output; when it
// fails, the error carries the end of what it wrote to standard error
// (its last 300 bytes: a traceback's last lines).
func Output(cmd *exec.Cmd) ([]byte, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w%s", err, stderrTail(stderr.Bytes()))
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

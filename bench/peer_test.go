package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/tools"
)

// fakePython writes an executable shell script dir/name that stands for
// a Python interpreter: it accepts tools.FindPython's module check
// (-c ...) and otherwise runs body, with the peer script's path as $1.
func fakePython(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n[ \"$1\" = -c ] && exit 0\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunPeer(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("fake interpreters are shell scripts")
	}
	dir := t.TempDir()
	fake := func(name, body string) string { return fakePython(t, dir, name, body) }
	echo := fake("echo", "read -r first < \"$1\"; shift; echo \"$first|$*\"\n")
	fail := fake("fail", "echo 'Traceback: boom' >&2; exit 3\n")
	t.Setenv("PATH", dir) // no python3 there
	t.Setenv(tools.EnvPython, "")
	cases := []struct {
		name, python string
		want         string
		wantErr      string
		noPython     bool
	}{
		{name: "output", python: echo, want: "#!/usr/bin/env python3|--n 3"},
		{name: "script fails", python: fail, wantErr: "exit status 3: Traceback: boom"},
		{name: "no interpreter", wantErr: "no python3 on $PATH", noPython: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := RunPeer(context.Background(), Options{Python: c.python}, "peer_rouge.py", nil, "--n", "3")
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || errors.Is(err, tools.ErrNoPython) != c.noPython {
					t.Fatalf("got %q, %v; want an error containing %q (ErrNoPython: %v)", out, err, c.wantErr, c.noPython)
				}
				return
			}
			if err != nil || strings.TrimSpace(string(out)) != c.want {
				t.Fatalf("got %q, %v; want %q", out, err, c.want)
			}
		})
	}
}

// TestStartPeer runs fake long-lived peers: one that answers each request
// and prints a summary at the end of its input, one that dies before it is
// ready, and one that dies on a request.
func TestStartPeer(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("fake interpreters are shell scripts")
	}
	dir := t.TempDir()
	fake := func(name, body string) string { return fakePython(t, dir, name, body) }
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	t.Setenv(tools.EnvPython, "")
	ctx := context.Background()

	echo := fake("echo", "shift; echo \"ready $*\"\nn=0\nwhile read -r line; do n=$((n+1)); echo \"got $line\"; done\necho \"summary $n\"\n")
	p, ready, err := StartPeer(ctx, Options{Python: echo}, "peer_trainstep.py", nil, "--serve")
	if err != nil || string(ready) != "ready --serve" {
		t.Fatalf("StartPeer: %q, %v; want ready --serve", ready, err)
	}
	for _, req := range []string{"step", "step 2"} {
		if got, err := p.Ask(req); err != nil || string(got) != "got "+req {
			t.Fatalf("Ask(%q) = %q, %v", req, got, err)
		}
	}
	if rest, err := p.Close(); err != nil || strings.TrimSpace(string(rest)) != "summary 2" {
		t.Fatalf("Close = %q, %v; want summary 2", rest, err)
	}

	early := fake("early", "echo 'Traceback: no torch' >&2; exit 4\n")
	if p, _, err := StartPeer(ctx, Options{Python: early}, "peer_trainstep.py", nil); err == nil || !strings.Contains(err.Error(), "exit status 4") || !strings.Contains(err.Error(), "Traceback: no torch") {
		t.Fatalf("StartPeer of a peer that exits at once: %v, %v; want its status and its stderr", p, err)
	}

	dies := fake("dies", "echo ready\nread -r line\necho \"MemoryError on $line\" >&2\nexit 5\n")
	p, _, err = StartPeer(ctx, Options{Python: dies}, "peer_trainstep.py", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Ask("step")
	if err == nil || !strings.Contains(err.Error(), "exit status 5") || !strings.Contains(err.Error(), "MemoryError on step") {
		t.Fatalf("Ask of a peer that dies: %q, %v; want its status and its stderr", got, err)
	}
	if _, cerr := p.Close(); cerr == nil || cerr.Error() != err.Error() {
		t.Fatalf("Close after the peer died: %v; want Ask's error again", cerr)
	}
}

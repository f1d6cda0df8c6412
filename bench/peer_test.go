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

func TestRunPeer(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("fake interpreters are shell scripts")
	}
	dir := t.TempDir()
	fake := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n[ \"$1\" = -c ] && exit 0\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
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

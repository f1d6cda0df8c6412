package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/bench"
)

func TestBenchList(t *testing.T) {
	var out bytes.Buffer
	if err := runBench(context.Background(), []string{"list"}, benchFlags{}, &out); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			t.Fatalf("line %q has no summary", line)
		}
		names = append(names, f[0])
	}
	want := []string{"extract", "gemm", "learn", "rouge", "search", "seam-text", "serve", "spice", "synth", "train-step", "transformer", "weaviate"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("xmr bench list shows %v, want %v", names, want)
	}
}

// TestBenchRun runs the quick transformer benchmark through the command
// line, with flags after the name, and an interpreter that does not exist.
func TestBenchRun(t *testing.T) {
	var out bytes.Buffer
	args := []string{"transformer", "--quick", "--json", "--python", "/nonexistent/python3"}
	if err := runBench(context.Background(), args, benchFlags{}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 7 {
		t.Fatalf("%d JSON lines, want 7:\n%s", len(lines), out.String())
	}
	var r bench.Result
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
		t.Fatal(err)
	}
	if r.Name != "transformer/train" || r.Metric != "step time" || !strings.Contains(r.Note, "/nonexistent/python3 cannot import torch") {
		t.Errorf("first result %+v", r)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "name a benchmark"},
		{[]string{"nosuch"}, `unknown benchmark "nosuch" (have: extract, gemm, learn, rouge, search, seam-text, serve, spice, synth, train-step, transformer, weaviate)`},
		{[]string{"transformer", "--python"}, "flag needs an argument: --python"},
	}
	for _, c := range cases {
		err := runBench(context.Background(), c.args, benchFlags{}, &bytes.Buffer{})
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("xmr bench %q: got %v, want a usage error containing %q", c.args, err, c.want)
		}
	}
}

func TestHoistFlags(t *testing.T) {
	cases := []struct {
		args   []string
		rest   []string
		json   bool
		python string
	}{
		{[]string{"gemm", "--json"}, []string{"gemm"}, true, ""},
		{[]string{"gemm", "-json", "1x2x3"}, []string{"gemm", "1x2x3"}, true, ""},
		{[]string{"transformer", "--python", "/p/python3", "blas-threads=2"}, []string{"transformer", "blas-threads=2"}, false, "/p/python3"},
		{[]string{"transformer", "-python=py"}, []string{"transformer"}, false, "py"},
		{[]string{"x", "--other", "-"}, []string{"x", "--other", "-"}, false, ""},
	}
	for _, c := range cases {
		var js bool
		var py string
		rest, err := hoistFlags(c.args, map[string]*bool{"json": &js}, map[string]*string{"python": &py})
		if err != nil || !reflect.DeepEqual(rest, c.rest) || js != c.json || py != c.python {
			t.Errorf("hoistFlags(%q) = %q, json %v, python %q, %v; want %q, %v, %q", c.args, rest, js, py, err, c.rest, c.json, c.python)
		}
	}
}

// TestBenchScratchDir checks which dir= scratch directories a benchmark
// refuses: one that is, holds as something it writes, or lies inside an
// input; and not one that merely holds an input it leaves alone.
func TestBenchScratchDir(t *testing.T) {
	d := t.TempDir()
	world := filepath.Join(d, "world")
	ck := filepath.Join(d, "ck.safetensors")
	if err := os.Mkdir(world, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ck, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		args    []string
		refused string // the input it names, "" when accepted
	}{
		{"search dir=world", []string{"world=" + world, "checkpoint=" + ck, "dir=" + world}, "world="},
		{"search dir=checkpoint", []string{"world=" + world, "checkpoint=" + ck, "dir=" + ck}, "checkpoint="},
		{"search dir inside world", []string{"world=" + world, "checkpoint=" + ck, "dir=" + filepath.Join(world, "scratch")}, "world="},
		{"search writes dir/world", []string{"world=" + world, "checkpoint=" + ck, "dir=" + d}, "world="},
		{"serve writes dir/world", []string{"checkpoint=" + ck, "dir=" + d}, ""},
		{"search dir beside its inputs", []string{"world=" + world, "checkpoint=" + ck, "dir=" + filepath.Join(d, "scratch")}, ""},
		{"no dir", []string{"world=" + world, "checkpoint=" + ck}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name, _, _ := strings.Cut(c.name, " ")
			err := checkBenchOutputs(name, c.args)
			switch {
			case c.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.refused != "" && (err == nil || !strings.Contains(err.Error(), "dir= ") || !strings.Contains(err.Error(), c.refused+" ")):
				t.Errorf("got %v, want a refusal naming dir= and %s", err, c.refused)
			}
		})
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xmr-project/xmr/train"
)

// TestDemoReuse checks when the demo reuses the model in its run
// directory: only a model trained with the config and for the iterations
// asked for (the marker), or, in a demo directory from before the marker,
// a model of the same kind.
func TestDemoReuse(t *testing.T) {
	dir := t.TempDir()
	teran, err := train.LoadConfig(writeTinyConfig(t, dir, "teran", "alignment"))
	if err != nil {
		t.Fatal(err)
	}
	tern, err := train.LoadConfig(writeTinyConfig(t, dir, "tern", "matching"))
	if err != nil {
		t.Fatal(err)
	}
	changed, err := train.LoadConfig(writeTinyConfig(t, dir, "teran", "alignment"))
	if err != nil {
		t.Fatal(err)
	}
	changed.Model.Layers++
	cases := []struct {
		name   string
		best   bool   // a checkpoint in run
		stored string // run/config.yaml
		marker string
		cfg    train.Config
		reuse  bool
		why    string
	}{
		{"no model", false, "", "", teran, false, ""},
		{"marker matches", true, teran.Marshal(), demoMarker(teran, 600, 0, 0), teran, true, ""},
		{"marker differs", true, teran.Marshal(), demoMarker(teran, 600, 0, 0), tern, false, "trained with another config"},
		{"marker differs, same model", true, teran.Marshal(), demoMarker(changed, 600, 0, 0), teran, false, "trained with another config"},
		{"other iterations", true, teran.Marshal(), demoMarker(teran, 100, 0, 0), teran, false, "trained for another number of iterations or time"},
		{"a time budget", true, teran.Marshal(), demoMarker(teran, 600, time.Minute, 0), teran, false, "trained for another number of iterations or time"},
		{"a total time", true, teran.Marshal(), demoMarker(teran, 600, 0, time.Hour), teran, false, "trained for another number of iterations or time"},
		{"marker of before the schedule", true, teran.Marshal(), teran.Marshal(), teran, false, "trained for another number of iterations or time"},
		{"old demo, same model", true, teran.Marshal(), "", teran, true, ""},
		{"old demo, other model", true, teran.Marshal(), "", tern, false, "is teran, the config asks for tern"},
		{"old demo, no config", true, "", "", teran, false, "has no readable config"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := t.TempDir()
			run := filepath.Join(d, "run")
			if err := os.MkdirAll(run, 0o755); err != nil {
				t.Fatal(err)
			}
			write := func(path, s string) {
				if s == "" {
					return
				}
				if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			best := filepath.Join(run, "best-rsum.safetensors")
			if c.best {
				write(best, "weights")
			}
			write(filepath.Join(run, "config.yaml"), c.stored)
			marker := filepath.Join(d, demoConfigFile)
			write(marker, c.marker)
			reuse, why := demoReuse(best, marker, c.cfg, demoMarker(c.cfg, 600, 0, 0))
			if reuse != c.reuse || (c.why == "") != (why == "") || !strings.Contains(why, c.why) {
				t.Fatalf("demoReuse = %v, %q; want %v, %q", reuse, why, c.reuse, c.why)
			}
		})
	}
}

package train

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/lockfile"
)

// TestRunDirectoryGuards checks, before any data is read, that a run
// directory held by another run is refused with the holder's pid, and that
// a fresh run does not clobber another run's checkpoints without
// --overwrite.
func TestRunDirectoryGuards(t *testing.T) {
	missing := data.Source{Path: filepath.Join(t.TempDir(), "no-such-data")}
	cases := []struct {
		name    string
		prepare func(t *testing.T, dir string) func()
		opts    Options
		want    []string // in the error
		lockErr bool
	}{
		{"held by another run", func(t *testing.T, dir string) func() {
			l, err := lockfile.Acquire(dir, "run directory")
			if err != nil {
				t.Fatal(err)
			}
			return func() { l.Release() }
		}, Options{}, []string{"is in use by process", lockfile.Name}, true},
		{"resume held by another run", func(t *testing.T, dir string) func() {
			l, err := lockfile.Acquire(dir, "run directory")
			if err != nil {
				t.Fatal(err)
			}
			return func() { l.Release() }
		}, Options{Resume: true}, []string{"is in use by process"}, true},
		{"another run's checkpoints", func(t *testing.T, dir string) func() {
			os.WriteFile(filepath.Join(dir, "best-rsum.safetensors"), []byte("x"), 0o644)
			os.WriteFile(filepath.Join(dir, "last.safetensors"), []byte("x"), 0o644)
			return func() {}
		}, Options{}, []string{"holds the checkpoints of another run (last.safetensors, best-rsum.safetensors)", "--resume", "--overwrite"}, false},
		{"overwrite reaches the data", func(t *testing.T, dir string) func() {
			os.WriteFile(filepath.Join(dir, "last.safetensors"), []byte("x"), 0o644)
			return func() {}
		}, Options{Overwrite: true}, []string{"no-such-data"}, false},
		{"empty directory reaches the data", func(*testing.T, string) func() { return func() {} }, Options{}, []string{"no-such-data"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			defer c.prepare(t, dir)()
			o := c.opts
			o.Config, o.Data, o.Out = Default(), missing, dir
			_, err := Run(context.Background(), o)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if got := errors.Is(err, lockfile.ErrLocked); got != c.lockErr {
				t.Errorf("errors.Is(err, ErrLocked) = %v", got)
			}
		})
	}
	// The old checkpoints survive a refused or failed run.
	dir := t.TempDir()
	last := filepath.Join(dir, "last.safetensors")
	os.WriteFile(last, []byte("x"), 0o644)
	Run(context.Background(), Options{Config: Default(), Data: missing, Out: dir, Overwrite: true})
	if _, err := os.Stat(last); err != nil {
		t.Errorf("a run that failed on its data removed the old checkpoint: %v", err)
	}
}

// TestStaleTempsRemoved: the temporary files a killed run left beside its
// run files go when the directory is next opened; other files stay.
func TestStaleTempsRemoved(t *testing.T) {
	for _, resume := range []bool{true, false} {
		out := t.TempDir()
		stale := []string{".last.safetensors.tmp-123", ".best-rsum.safetensors.tmp-9", ".metrics.csv.tmp-7"}
		kept := []string{".notes.txt.tmp-1", "last.safetensors.tmp-2", "notes.txt"}
		for _, name := range append(append([]string{}, stale...), kept...) {
			if err := os.WriteFile(filepath.Join(out, name), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		lock, err := openRunDir(out, resume, false)
		if err != nil {
			t.Fatal(err)
		}
		lock.Release()
		for _, name := range stale {
			if _, err := os.Stat(filepath.Join(out, name)); !os.IsNotExist(err) {
				t.Errorf("resume=%v: %s is still there (%v)", resume, name, err)
			}
		}
		for _, name := range kept {
			if _, err := os.Stat(filepath.Join(out, name)); err != nil {
				t.Errorf("resume=%v: %s was removed: %v", resume, name, err)
			}
		}
	}
}

// Package dirstate records what tests compare before and after an
// operation that must leave a directory as it was: the path, size and
// modification time of every file under it.
package dirstate

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Snapshot returns, for every file and directory under dir, its size and
// modification time, keyed by its path relative to dir. Entries whose
// base name is in skip are left out (a lock file, which records the pid
// of the last process that took it).
func Snapshot(dir string, skip ...string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == dir {
			return nil
		}
		if slices.Contains(skip, d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		out[rel] = fmt.Sprintf("%d bytes, modified %s", info.Size(), info.ModTime().Format(time.RFC3339Nano))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", dir, err)
	}
	return out, nil
}

// Of is Snapshot for a test: an error fails t.
func Of(t testing.TB, dir string, skip ...string) map[string]string {
	t.Helper()
	s, err := Snapshot(dir, skip...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Same fails t with Diff's lines unless after equals before.
func Same(t testing.TB, what string, before, after map[string]string) {
	t.Helper()
	if d := Diff(before, after); d != "" {
		t.Errorf("%s changed the directory:\n%s", what, d)
	}
}

// Diff lists how after differs from before, one line per path, sorted;
// it is empty when they are equal.
func Diff(before, after map[string]string) string {
	var lines []string
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			lines = append(lines, p+": removed")
		case a != b:
			lines = append(lines, fmt.Sprintf("%s: %s, was %s", p, a, b))
		}
	}
	for p, a := range after {
		if _, ok := before[p]; !ok {
			lines = append(lines, p+": added ("+a+")")
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

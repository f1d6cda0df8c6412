package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/internal/dirstate"
	"github.com/xmr-project/xmr/lockfile"
)

// TestSynthRefusesExisting checks that xmr synth never replaces a world or
// dataset files in --out without --overwrite (it used to delete the
// previous world's images silently), and that the refused run leaves the
// directory as it was.
func TestSynthRefusesExisting(t *testing.T) {
	world := func(t *testing.T, dir string) {
		t.Helper()
		if _, e, c := run(t, "synth", "-n", "30", "--dim", "8", "--regions", "6", "--no-images", "--out", dir); c != 0 {
			t.Fatalf("synth: exit %d: %s", c, e)
		}
	}
	cases := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		args    []string
		code    int
		stderr  string
	}{
		{"empty directory", func(t *testing.T, dir string) {}, nil, 0, ""},
		{"a world", world, nil, 1, "holds a synthetic world (30 images, seed 1, 8-d features): --overwrite replaces it"},
		{"a world, --overwrite", world, []string{"--overwrite"}, 0, ""},
		{"a precomp split", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "test_caps.txt"), []byte("a caption\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, nil, 1, "holds test_caps.txt, which a world would replace"},
		{"an images folder", func(t *testing.T, dir string) {
			if err := os.MkdirAll(filepath.Join(dir, "images", "train"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, nil, 1, "holds images/train, which a world would replace"},
		{"other files", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, nil, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.prepare(t, dir)
			before := dirstate.Of(t, dir, lockfile.Name)
			args := append([]string{"synth", "-n", "40", "--seed", "2", "--dim", "8", "--regions", "6", "--no-images", "--out", dir}, c.args...)
			_, stderr, code := run(t, args...)
			if code != c.code || !strings.Contains(stderr, c.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d with %q", code, stderr, c.code, c.stderr)
			}
			if code != 0 {
				dirstate.Same(t, "a refused run", before, dirstate.Of(t, dir, lockfile.Name))
			}
		})
	}
}

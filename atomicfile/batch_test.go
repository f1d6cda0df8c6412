package atomicfile

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestBatch checks that a batch publishes its files together: nothing is
// in place before Commit, everything after it, and an aborted or failed
// batch leaves the directory as it was, without temporary files.
func TestBatch(t *testing.T) {
	write := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	cases := []struct {
		name   string
		run    func(ctx context.Context, b *Batch, dir string) error
		cancel bool
		want   map[string]string // the directory afterwards
	}{
		{"commit", func(ctx context.Context, b *Batch, dir string) error {
			if err := b.Add(ctx, filepath.Join(dir, "a"), write("new a")); err != nil {
				return err
			}
			if err := b.Add(ctx, filepath.Join(dir, "b"), write("new b")); err != nil {
				return err
			}
			if got := readDir(t, dir); got["a"] != "old a" || got["b"] != "" {
				t.Errorf("before Commit: %v", got)
			}
			return b.Commit()
		}, false, map[string]string{"a": "new a", "b": "new b"}},
		{"a write fails", func(ctx context.Context, b *Batch, dir string) error {
			if err := b.Add(ctx, filepath.Join(dir, "a"), write("new a")); err != nil {
				return err
			}
			return b.Add(ctx, filepath.Join(dir, "b"), func(io.Writer) error { return errors.New("disk on fire") })
		}, false, map[string]string{"a": "old a"}},
		{"cancelled", func(ctx context.Context, b *Batch, dir string) error {
			return b.Add(ctx, filepath.Join(dir, "a"), write("new a"))
		}, true, map[string]string{"a": "old a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "a"), []byte("old a"), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.cancel {
				cancel()
			}
			var b Batch
			err := c.run(ctx, &b, dir)
			if err != nil {
				b.Abort()
			}
			if c.cancel && !errors.Is(err, context.Canceled) {
				t.Errorf("error %v, want context.Canceled", err)
			}
			got := readDir(t, dir)
			if len(got) != len(c.want) {
				t.Errorf("directory %v, want %v", got, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q (directory %v)", k, got[k], v, got)
				}
			}
		})
	}
}

func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

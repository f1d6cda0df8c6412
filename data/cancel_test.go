package data

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/xmr-project/xmr/internal/countdown"
)

// cancelled returns a context that is already cancelled.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// loaders calls each data loader on the fixtures of sourceFixtures.
func loaders(t *testing.T) []struct {
	name string
	load func(ctx context.Context) (*Split, error)
} {
	precomp, bottomup, tsv := sourceFixtures(t)
	kBU := filepath.Join(bottomup, "dataset_flickr30k.json")
	kTSV := filepath.Join(tsv, "dataset_flickr30k.json")
	tsvFile := filepath.Join(tsv, "feats.tsv")
	sizes := filepath.Join(bottomup, "sizes.txt")
	collect := func(ctx context.Context) (*Split, error) {
		g, _, err := CollectTSV(ctx, []string{tsvFile}, []string{"5004", "5001"}, nil)
		if err != nil {
			return nil, err
		}
		return &Split{Images: g}, nil
	}
	return []struct {
		name string
		load func(ctx context.Context) (*Split, error)
	}{
		{"LoadPrecomp", func(ctx context.Context) (*Split, error) { return LoadPrecomp(ctx, precomp, "dev", nil) }},
		{"LoadPrecomp NoMmap", func(ctx context.Context) (*Split, error) {
			return LoadPrecomp(ctx, precomp, "dev", &PrecompOptions{NoMmap: true})
		}},
		{"LoadBottomUp", func(ctx context.Context) (*Split, error) {
			return LoadBottomUp(ctx, bottomup, kBU, "test", &BottomUpOptions{SizesFile: sizes, Workers: 2})
		}},
		{"LoadTSV", func(ctx context.Context) (*Split, error) { return LoadTSV(ctx, []string{tsvFile}, kTSV, "train", nil) }},
		{"CollectTSV", collect},
		{"Source precomp", func(ctx context.Context) (*Split, error) { return Source{Path: precomp}.Load(ctx, "test") }},
		{"Source bottomup", func(ctx context.Context) (*Split, error) {
			return Source{Path: bottomup, SizesFile: "sizes.txt"}.Load(ctx, "dev")
		}},
		{"Source tsv", func(ctx context.Context) (*Split, error) { return Source{Path: tsv}.Load(ctx, "test") }},
	}
}

// TestLoadCancelled calls each loader with a cancelled context: it must
// return no split and an error that is context.Canceled.
func TestLoadCancelled(t *testing.T) {
	for _, tc := range loaders(t) {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.load(cancelled())
			if s != nil || !errors.Is(err, context.Canceled) {
				t.Fatalf("got split %v, error %v; want no split and context.Canceled", s != nil, err)
			}
		})
	}
}

// TestLoadCancelledAtEachCheck cancels each loader at each of its checks
// of the context in turn: every run must fail with context.Canceled (and no
// other error) until the checks run out and the load succeeds.
func TestLoadCancelledAtEachCheck(t *testing.T) {
	for _, tc := range loaders(t) {
		t.Run(tc.name, func(t *testing.T) {
			for n := 0; ; n++ {
				s, err := tc.load(countdown.New(n))
				if err == nil {
					s.Close()
					if n < 2 {
						t.Fatalf("succeeded after %d checks of the context, want at least 2", n)
					}
					return
				}
				if s != nil || !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled at check %d: split %v, error %v; want context.Canceled", n, s != nil, err)
				}
				if n > 1000 {
					t.Fatal("still cancelled after 1000 checks")
				}
			}
		})
	}
}

// TestReadTSVCancelled stops ReadTSV after each record in turn.
func TestReadTSVCancelled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "feats.tsv")
	writeFile(t, path, encodeTSV(tsvRec("1", 2, 4), tsvRec("2", 1, 4), tsvRec("3", 3, 4)))
	for n := 0; n <= 5; n++ {
		var seen []string
		err := ReadTSV(countdown.New(n), path, func(r *TSVRecord) error {
			seen = append(seen, r.ImageID)
			return nil
		})
		// One check on entry, then one before each record and before the
		// end of the file.
		want := []string{"1", "2", "3"}[:max(0, min(n-1, 3))]
		if n == 5 {
			if err != nil {
				t.Fatal(err)
			}
		} else if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled at check %d: error %v, want context.Canceled", n, err)
		}
		if !slices.Equal(seen, want) {
			t.Errorf("cancelled at check %d: read %q, want %q", n, seen, want)
		}
	}
}

// TestWritePrecompCancelled cancels WritePrecomp at each of its checks in
// turn, over an empty directory and over an earlier split: every cancelled
// write must return context.Canceled and leave the directory exactly as it
// was (no file written, replaced or removed, no temporary file left).
func TestWritePrecompCancelled(t *testing.T) {
	old := testSplit("dev", 4, 3, 5, false, true)
	// The new split lacks the ids and the sizes, so that a complete write
	// also removes files.
	next := testSplit("dev", 6, 2, 5, false, false)
	next.ImageIDs, next.Sizes = nil, nil
	for _, tc := range []struct {
		name string
		prev *Split
	}{{"empty directory", nil}, {"over a split", old}} {
		t.Run(tc.name, func(t *testing.T) {
			for n := 0; ; n++ {
				dir := t.TempDir()
				if tc.prev != nil {
					if err := WritePrecomp(context.Background(), dir, tc.prev); err != nil {
						t.Fatal(err)
					}
				}
				before := dirContents(t, dir)
				err := WritePrecomp(countdown.New(n), dir, next)
				if err == nil {
					if n < 3 {
						t.Fatalf("succeeded after %d checks of the context", n)
					}
					got, err := LoadPrecomp(context.Background(), dir, "dev", nil)
					if err != nil {
						t.Fatal(err)
					}
					equalSplits(t, got, next)
					got.Close()
					return
				}
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled at check %d: %v, want context.Canceled", n, err)
				}
				if after := dirContents(t, dir); !equalContents(before, after) {
					t.Fatalf("cancelled at check %d: directory changed from %v to %v", n, keys(before), keys(after))
				}
				if n > 100 {
					t.Fatal("still cancelled after 100 checks")
				}
			}
		})
	}
}

// dirContents returns the files of dir and their contents.
func dirContents(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = b
	}
	return m
}

func equalContents(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestFiniteCheckParallel checks the chunked, parallel scan: it finds the
// first NaN or Inf wherever it lies (at chunk and range boundaries, with
// later ones in other ranges), and stops with the context's error.
func TestFiniteCheckParallel(t *testing.T) {
	n := 3*finiteChunk + 37
	f := make([]float32, n)
	nan, inf := float32(math.NaN()), float32(math.Inf(-1))
	for _, at := range []int{0, 1, 15, 16, finiteChunk - 1, finiteChunk, n/2 - 1, n / 2, 2*finiteChunk + 1, n - 1} {
		f[at] = nan
		if at+1 < n {
			f[n-1] = inf // a later hit, in the last range
		}
		j, err := parallelFirstNonFinite(context.Background(), f)
		if err != nil || j != at {
			t.Errorf("NaN at %d: found %d, %v", at, j, err)
		}
		f[at], f[n-1] = 0, 0
	}
	if j, err := parallelFirstNonFinite(context.Background(), f); j != -1 || err != nil {
		t.Errorf("all finite: found %d, %v", j, err)
	}
	if _, err := parallelFirstNonFinite(cancelled(), f); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
	g := &Regions{N: 1, R: 1, D: n, Feat: f}
	if err := checkFinite(countdown.New(1), g, true); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled during the check: %v, want context.Canceled", err)
	}
}

// TestCtxWriter checks that a ctxWriter passes large writes on in pieces
// and stops between them once its context is cancelled.
func TestCtxWriter(t *testing.T) {
	p := make([]byte, 2*ctxChunk+5) // never touched: no page is faulted in
	var got counter
	n, err := (&ctxWriter{ctx: countdown.New(2), w: &got}).Write(p)
	if n != 2*ctxChunk || got.n != n || got.calls != 2 || !errors.Is(err, context.Canceled) {
		t.Fatalf("wrote %d (%d passed on in %d writes), error %v; want %d in 2 and context.Canceled", n, got.n, got.calls, err, 2*ctxChunk)
	}
	got = counter{}
	if n, err := (&ctxWriter{ctx: context.Background(), w: &got}).Write(p); n != len(p) || err != nil || got.n != len(p) || got.calls != 3 {
		t.Fatalf("wrote %d of %d in %d writes: %v", n, len(p), got.calls, err)
	}
}

// counter counts the bytes written to it, and the writes.
type counter struct{ n, calls int }

func (c *counter) Write(p []byte) (int, error) {
	c.n += len(p)
	c.calls++
	return len(p), nil
}

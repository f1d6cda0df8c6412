package index

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/model"
)

// TestLive follows an index directory through an append, an overwrite
// and a corrupt publish: each call after a publish runs on the new
// generation, a call in flight keeps its generation open until it
// returns, and a generation that does not open leaves the previous one in
// service. A server on a plain Index kept answering from the generation
// it opened, and after a second build its catalogue rows were gone.
func TestLive(t *testing.T) {
	ctx, s, m, dir := liveSetup(t)
	build := func(lo, hi int, mode Mode) {
		t.Helper()
		if _, err := Build(ctx, dir, m, collectionOf(s, lo, hi), &BuildOptions{Mode: mode}); err != nil {
			t.Fatal(err)
		}
	}
	search := func(l *Live, want int) {
		t.Helper()
		res, err := l.SearchText(ctx, s.Captions[0], &SearchOptions{K: 100, Exact: true})
		if err != nil {
			t.Fatal(err)
		}
		if ni, _ := l.Len(); len(res) != want || ni != want {
			t.Fatalf("%d results, Len %d images; want %d", len(res), ni, want)
		}
	}
	build(0, 10, Create)
	l, err := OpenLive(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	search(l, 10)

	// A call in flight while an append publishes.
	held, err := l.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	build(10, 30, Append)
	search(l, 30)
	if held.ix.cat == nil {
		t.Fatal("the previous generation was closed under a call in flight")
	}
	if _, err := held.ix.SearchImage(ctx, s.ID(0), &SearchOptions{K: 3}); err != nil {
		t.Fatalf("the call in flight on the previous generation: %v", err)
	}
	l.release(held)
	if held.ix.cat != nil {
		t.Fatal("the previous generation stayed open after its last call")
	}

	build(40, 45, Overwrite)
	search(l, 5)
	if row, err := l.Image(ctx, s.ID(40)); err != nil || row.ID != s.ID(40) {
		t.Fatalf("Image(%s) of the new generation: %+v, %v", s.ID(40), row, err)
	}

	// A publish that does not open: the previous generation answers.
	if err := os.WriteFile(filepath.Join(dir, manifestFile), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	search(l, 5)
	search(l, 5)
	if l.reopened != 2 {
		t.Fatalf("%d generations opened after the first, want 2", l.reopened)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.SearchText(ctx, s.Captions[0], nil); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("a search after Close: %v", err)
	}
}

// TestLiveConcurrent searches from several goroutines while appends
// publish (run with -race): every search succeeds, and the last ones see
// the whole index.
func TestLiveConcurrent(t *testing.T) {
	ctx, s, m, dir := liveSetup(t)
	if _, err := Build(ctx, dir, m, collectionOf(s, 0, 10), nil); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLive(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := l.SearchText(ctx, s.Captions[i%50], &SearchOptions{K: 5}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for lo := 10; lo < 40; lo += 10 {
		if _, err := Build(ctx, dir, m, collectionOf(s, lo, lo+10), &BuildOptions{Mode: Append}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, err := l.SearchText(ctx, s.Captions[0], nil); err != nil {
		t.Fatal(err)
	}
	if ni, nc := l.Len(); ni != 40 || nc != 200 {
		t.Fatalf("Len = %d, %d after the appends, want 40, 200", ni, nc)
	}
}

// liveSetup makes every call check the manifest (for the test's
// duration) and returns the test split, a model and the index directory
// to build.
func liveSetup(t *testing.T) (context.Context, *data.Split, model.Model, string) {
	t.Helper()
	d := LiveCheckEvery
	t.Cleanup(func() { LiveCheckEvery = d })
	LiveCheckEvery = 0
	s := loadTest(t)
	return context.Background(), s, testModel(t, "teran", 3, s.Captions), filepath.Join(t.TempDir(), "live.idx")
}

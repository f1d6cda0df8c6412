package index

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
)

// lookupIndex builds an index of the first n test images with a small
// untrained TERAN.
func lookupIndex(t *testing.T, n int) (*Index, []CaptionRow) {
	t.Helper()
	s := loadTest(t)
	m := testModel(t, "teran", 6, s.Captions)
	dir := t.TempDir()
	c := collectionOf(s, 0, n)
	if _, err := Build(context.Background(), dir, m, c, nil); err != nil {
		t.Fatal(err)
	}
	ix, err := Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix, c.Captions
}

// TestLookups checks the catalogue look-ups by id and item number, and that
// unknown ids and items are ErrNotFound.
func TestLookups(t *testing.T) {
	ix, caps := lookupIndex(t, 10)
	ctx := context.Background()
	id := caps[7].ImageID
	row, err := ix.Image(ctx, id)
	if err != nil || row.ID != id || len(row.Boxes) == 0 {
		t.Fatalf("Image(%q) = %+v, %v", id, row, err)
	}
	items, err := ix.ImageCaptions(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var want []CaptionItem
	for k, c := range caps {
		if c.ImageID == id {
			want = append(want, CaptionItem{Item: k, Text: c.Text})
		}
	}
	if !slices.Equal(items, want) || len(want) == 0 {
		t.Fatalf("ImageCaptions(%q) = %+v, want %+v", id, items, want)
	}
	for _, k := range []int{0, 7, len(caps) - 1} {
		if cp, err := ix.Caption(ctx, k); err != nil || cp != caps[k] {
			t.Fatalf("Caption(%d) = %+v, %v; want %+v", k, cp, err, caps[k])
		}
	}
	for _, err := range []error{
		func() error { _, err := ix.Image(ctx, "nosuch"); return err }(),
		func() error { _, err := ix.ImageCaptions(ctx, "nosuch"); return err }(),
		func() error { _, err := ix.Caption(ctx, len(caps)); return err }(),
		func() error { _, err := ix.Caption(ctx, -1); return err }(),
		func() error { _, err := ix.SearchImage(ctx, "nosuch", nil); return err }(),
		func() error { _, err := ix.Align(ctx, "nosuch", "a red circle", nil); return err }(),
		func() error { _, err := ix.AlignCaption(ctx, id, len(caps), nil); return err }(),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("error %v, want ErrNotFound", err)
		}
	}
	for _, q := range []string{"", "   ", "\t\n", "\ufeff\u200b", "\u200b \u2060"} {
		_, err := ix.SearchText(ctx, q, nil)
		_, aerr := ix.Align(ctx, id, q, nil)
		if !errors.Is(err, ErrBadQuery) || !errors.Is(aerr, ErrBadQuery) {
			t.Errorf("query %q: errors %v and %v, want ErrBadQuery", q, err, aerr)
		}
	}
}

// TestAlignMatchesSearch holds Align and AlignCaption to the searches:
// the pair's score equals the search's (exact) score for that item, and
// the alignments equal the search's explanation.
func TestAlignMatchesSearch(t *testing.T) {
	ix, caps := lookupIndex(t, 20)
	ctx := context.Background()
	q := caps[11].Text
	res, err := ix.SearchText(ctx, q, &SearchOptions{K: 3, Explain: true, Exact: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		m, err := ix.Align(ctx, r.Image.ID, q, nil)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(float64(m.Score-r.Score)) > 1e-4 {
			t.Errorf("Align(%s) score %v, search %v", r.Image.ID, m.Score, r.Score)
		}
		if !equalAlignments(m.Alignments, r.Explain) {
			t.Errorf("Align(%s) = %+v, search explains %+v", r.Image.ID, m.Alignments, r.Explain)
		}
	}
	id := caps[4].ImageID
	cres, err := ix.SearchImage(ctx, id, &SearchOptions{K: 3, Explain: true, Exact: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range cres {
		m, err := ix.AlignCaption(ctx, id, r.Item, nil)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(float64(m.Score-r.Score)) > 1e-4 || !equalAlignments(m.Alignments, r.Explain) {
			t.Errorf("AlignCaption(%s, %d) = %v %+v, search %v %+v", id, r.Item, m.Score, m.Alignments, r.Score, r.Explain)
		}
		for _, a := range m.Alignments {
			if !strings.Contains(" "+r.Caption.Text+" ", " "+a.Word+" ") {
				t.Errorf("word %q is not in caption %q", a.Word, r.Caption.Text)
			}
		}
	}
}

func equalAlignments(a, b []Alignment) bool {
	return slices.EqualFunc(a, b, func(x, y Alignment) bool {
		return x.Word == y.Word && x.Region == y.Region && (x.Box == nil) == (y.Box == nil) &&
			(x.Box == nil || *x.Box == *y.Box) && math.Abs(float64(x.Cosine-y.Cosine)) < 1e-5
	})
}

// TestConcurrentSearches runs searches of both kinds and alignments from
// many goroutines at once (run with -race) and checks each result equals
// the one a lone search gives.
func TestConcurrentSearches(t *testing.T) {
	ix, caps := lookupIndex(t, 30)
	ctx := context.Background()
	type want struct {
		text, image []Result
	}
	queries := []int{0, 9, 33, 77, 120}
	wants := make([]want, len(queries))
	for k, c := range queries {
		var err error
		if wants[k].text, err = ix.SearchText(ctx, caps[c].Text, &SearchOptions{K: 5, Explain: true}); err != nil {
			t.Fatal(err)
		}
		if wants[k].image, err = ix.SearchImage(ctx, caps[c].ImageID, &SearchOptions{K: 5}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rep := range 4 {
				k := (g + rep) % len(queries)
				c := queries[k]
				text, err := ix.SearchText(ctx, caps[c].Text, &SearchOptions{K: 5, Explain: true})
				if err == nil && !sameResults(text, wants[k].text) {
					err = errors.New("text search differs from the lone search")
				}
				if err == nil {
					var image []Result
					image, err = ix.SearchImage(ctx, caps[c].ImageID, &SearchOptions{K: 5})
					if err == nil && !sameResults(image, wants[k].image) {
						err = errors.New("image search differs from the lone search")
					}
				}
				if err == nil {
					_, err = ix.Align(ctx, caps[c].ImageID, caps[c].Text, nil)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func sameResults(a, b []Result) bool {
	return slices.EqualFunc(a, b, func(x, y Result) bool {
		return x.Item == y.Item && x.Score == y.Score && equalAlignments(x.Explain, y.Explain)
	})
}

// TestSearchCancelled checks that a cancelled context stops searches,
// alignments and look-ups with the context's error.
func TestSearchCancelled(t *testing.T) {
	ix, caps := lookupIndex(t, 10)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, f := range map[string]func() error{
		"text":          func() error { _, err := ix.SearchText(ctx, caps[0].Text, nil); return err },
		"text exact":    func() error { _, err := ix.SearchText(ctx, caps[0].Text, &SearchOptions{Exact: true}); return err },
		"image":         func() error { _, err := ix.SearchImage(ctx, caps[0].ImageID, nil); return err },
		"align":         func() error { _, err := ix.Align(ctx, caps[0].ImageID, caps[0].Text, nil); return err },
		"image details": func() error { _, err := ix.Image(ctx, caps[0].ImageID); return err },
	} {
		if err := f(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: error %v, want context.Canceled", name, err)
		}
	}
}

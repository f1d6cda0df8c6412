package index

import (
	"testing"

	"github.com/xmr-project/xmr/model"
)

// TestLiveSearch checks that a Live index searches by an encoded query as
// its current generation does.
func TestLiveSearch(t *testing.T) {
	ctx, s, m, dir := liveSetup(t)
	if _, err := Build(ctx, dir, m, collectionOf(s, 0, 12), nil); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLive(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	q, err := model.EncodeImages(ctx, m, s.Images.Slice(3, 4), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Search(ctx, q, false, &SearchOptions{K: 5, Exact: true})
	if err != nil {
		t.Fatal(err)
	}
	want, err := l.SearchImage(ctx, s.ID(3), &SearchOptions{K: 5, Exact: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || len(want) != 5 {
		t.Fatalf("%d and %d results", len(got), len(want))
	}
	for i := range got {
		if got[i].Item != want[i].Item {
			t.Errorf("result %d: item %d, by id %d", i, got[i].Item, want[i].Item)
		}
	}
}

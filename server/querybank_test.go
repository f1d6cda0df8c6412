package server

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/xmr-project/xmr/index"
)

// TestFusionQueryBank: a fused index with a query bank says so in
// /api/info and in its text searches' answers (whose scores include each
// image's offset), not in its image searches'; a fusion without a bank
// says nothing of one.
func TestFusionQueryBank(t *testing.T) {
	f := testFixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	if err := index.WriteFusion(ctx, dir, []index.FusionMember{{Dir: f.dir, Weight: 1}, {Dir: f.dir, Weight: 0.5}}); err != nil {
		t.Fatal(err)
	}
	open := func() *index.Fusion {
		fu, err := index.OpenFusion(ctx, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fu.Close() })
		return fu
	}
	info := func(fu *index.Fusion) (infoResponse, searchResponse, searchResponse) {
		s, err := New(fu, &Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		ts := httptest.NewServer(s.Handler())
		t.Cleanup(ts.Close)
		_, _, body := do(t, ts.Client(), "GET", ts.URL+"/api/info", nil)
		_, tb := post(t, ts.Client(), ts.URL+"/api/search/text", map[string]any{"text": f.captions[3].Text, "k": 3})
		_, ib := post(t, ts.Client(), ts.URL+"/api/search/image", map[string]any{"image_id": f.ids[0], "k": 3})
		return decodeJSON[infoResponse](t, body), decodeJSON[searchResponse](t, tb), decodeJSON[searchResponse](t, ib)
	}
	if in, tr, _ := info(open()); in.QueryBank != nil || tr.QueryBank != nil || len(in.Fusion) != 2 {
		t.Fatalf("a fusion without a bank: info %+v, text search %+v", in, tr)
	}
	fu := open()
	var caps []string
	for _, c := range f.captions[:20] {
		caps = append(caps, c.Text)
	}
	enc, err := fu.EncodeBank(ctx, caps)
	if err != nil {
		t.Fatal(err)
	}
	if err := fu.SetQueryBank(ctx, enc, 2, nil); err != nil {
		t.Fatal(err)
	}
	in, tr, ir := info(open())
	want := queryBankJSON{Captions: 20, Beta: 2}
	if in.QueryBank == nil || *in.QueryBank != want || tr.QueryBank == nil || *tr.QueryBank != want {
		t.Fatalf("info's query bank %+v, the text search's %+v: want %+v", in.QueryBank, tr.QueryBank, want)
	}
	if ir.QueryBank != nil || len(ir.Results) == 0 {
		t.Fatalf("an image search of a fusion with a bank: %+v; want results and no query bank", ir)
	}
}

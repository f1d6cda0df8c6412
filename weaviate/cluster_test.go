package weaviate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/server"
	"github.com/xmr-project/xmr/synth"
	"github.com/xmr-project/xmr/synth/synthtest"
)

// world is the small synthetic world of the integration test: 200 test
// images of 6 regions, 1,000 captions, 16-d vectors.
var world = &synthtest.World{Prefix: "xmr-weaviate-world-", Config: synth.Config{N: 300, Seed: 7, Dim: 16, Regions: 6, Noise: 0.1, NoImages: true, Dev: 50, Test: 200}}

func TestMain(m *testing.M) {
	code := m.Run()
	world.Remove()
	os.Exit(code)
}

// serverBinary returns the weaviate-server binary; without one the test fails
// under CI (CI=true) and is skipped otherwise.
func serverBinary(t *testing.T) string {
	t.Helper()
	bin, err := FindServer()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %v", err)
		}
		t.Skipf("skipped: %v", err)
	}
	return bin
}

// testModel is an untrained small TERAN over the world's words: enough to
// hold the Weaviate-backed index to the local one.
func testModel(t *testing.T, captions []string) model.Model {
	t.Helper()
	cfg := model.Default()
	cfg.ImageModel = model.ImageConfig{Name: "bottomup", FeatDim: 16, TransformerLayers: 1, Heads: 2, FF: 16, Hidden: 16, PosEncoding: "concat-and-process"}
	cfg.TextModel = model.TextConfig{Name: "bert", WordDim: 16, ExtractionHiddenLayer: 1, FineTune: true, Heads: 2, FF: 16, MaxPositions: 64}
	cfg.Model = model.JointConfig{Name: "teran", EmbedSize: 16, Layers: 1, Heads: 2, FF: 16}
	tok, err := model.BuildTokenizer(cfg, captions)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, tok, 3)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// collectionOf turns a split into what an index is built from.
func collectionOf(s *data.Split) index.Collection {
	c := index.Collection{Images: s.Images}
	for i := 0; i < s.NumImages(); i++ {
		row := index.ImageRow{ID: s.ID(i), Width: 640, Height: 480}
		for r := 0; r < s.Images.NumRegions(i); r++ {
			b := s.Images.Box5(i, r)
			row.Boxes = append(row.Boxes, [4]float32{b[0], b[1], b[2], b[3]})
		}
		c.ImageRows = append(c.ImageRows, row)
		for _, cp := range s.CaptionsOf(i) {
			c.Captions = append(c.Captions, index.CaptionRow{Text: cp, ImageID: s.ID(i)})
		}
	}
	return c
}

// sameResults fails unless got ranks the same items as want, with the
// same scores (up to float32 rounding); items whose scores tie within
// the tolerance may swap places.
func sameResults(t *testing.T, what string, got, want []index.Result) {
	t.Helper()
	const tol = 1e-4
	if len(got) != len(want) {
		t.Fatalf("%s: %d results, the local index %d", what, len(got), len(want))
	}
	for r := range want {
		g, w := got[r], want[r]
		if math.Abs(float64(g.Score-w.Score)) > tol*max(1, math.Abs(float64(w.Score))) {
			t.Fatalf("%s: rank %d: score %v (item %d), the local index %v (item %d)", what, r+1, g.Score, g.Item, w.Score, w.Item)
		}
		if g.Item != w.Item {
			// Allowed only for a tie with the item the local index ranks here.
			tied := false
			for _, x := range want {
				if x.Item == g.Item && math.Abs(float64(x.Score-w.Score)) <= tol*max(1, math.Abs(float64(w.Score))) {
					tied = true
				}
			}
			if !tied {
				t.Fatalf("%s: rank %d: item %d (%v), the local index item %d (%v)\ngot  %s\nwant %s", what, r+1, g.Item, g.Score, w.Item, w.Score, brief(got), brief(want))
			}
		}
		if (g.Image == nil) != (w.Image == nil) || (g.Image != nil && g.Image.ID == "") {
			t.Fatalf("%s: rank %d: image row %+v, the local index %+v", what, r+1, g.Image, w.Image)
		}
	}
}

func brief(rs []index.Result) string {
	var b []string
	for _, r := range rs {
		b = append(b, fmt.Sprintf("%d:%.7f", r.Item, r.Score))
	}
	return fmt.Sprint(b)
}

// TestClusterMatchesLocalIndex is the integration test of issue 14: a
// 2-node Weaviate cluster on loopback, collections of 2 shards with
// replication factor 2, a synthetic world indexed in it and in a local
// index; text-to-image MrSw results must equal the local index's (top 10
// of every test query), the re-ranked scorings must equal them when
// every item is a candidate, a re-run must resume without duplicates,
// and with one node stopped the queries must still give the same results.
func TestClusterMatchesLocalIndex(t *testing.T) {
	bin := serverBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	start := time.Now()
	cl, err := StartCluster(ctx, ClusterOptions{Binary: bin, Nodes: 2, Dir: filepath.Join(tmp, "cluster")})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	t.Logf("2-node cluster up in %v", time.Since(start).Round(time.Millisecond))

	s, err := data.LoadPrecomp(context.Background(), world.Dir(t), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := testModel(t, s.Captions)
	coll := collectionOf(s)

	localDir := filepath.Join(tmp, "local.idx")
	if _, err := index.Build(ctx, localDir, m, coll, nil); err != nil {
		t.Fatal(err)
	}
	local, err := index.Open(context.Background(), localDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()

	dir := filepath.Join(tmp, "world.wv")
	cfg := Config{URL: cl.Nodes[0].URL, Collection: "World", Shards: 2, Replication: 2, BatchSize: 100}
	start = time.Now()
	st, err := Build(ctx, dir, m, coll, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("uploaded %d images and %d captions in %v", st.Images, st.Captions, time.Since(start).Round(time.Millisecond))
	checkLayout(t, ctx, cl.Nodes[0].URL, cfg)

	ix, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ni, nc := ix.Len(); ni != s.NumImages() || nc != len(coll.Captions) {
		t.Fatalf("Len = %d, %d", ni, nc)
	}
	queries := s.Captions[:40]
	want := make([][]index.Result, len(queries))
	for i, q := range queries {
		if want[i], err = local.SearchText(ctx, q, &index.SearchOptions{K: 10, Exact: true}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(ix *Index, when string) {
		for i, q := range queries {
			got, err := ix.SearchText(ctx, q, &index.SearchOptions{K: 10})
			if err != nil {
				t.Fatalf("%s: %q: %v", when, q, err)
			}
			sameResults(t, fmt.Sprintf("%s: text-to-image MrSw %q", when, q), got, want[i])
		}
	}
	check(ix, "2 nodes")
	checkServer(t, ix, queries[0], want[0])
	// A complete index is not uploaded again without Overwrite.
	if _, err := Build(ctx, dir, m, coll, cfg, nil); err == nil {
		t.Fatal("a second Build over a complete index succeeded without Overwrite")
	}
	// A killed upload: a build of another collection cancelled once the
	// manifest records the first run of captions; running it again
	// resumes (skipping the objects already there), and the collections
	// hold each object once.
	kdir := filepath.Join(tmp, "killed.wv")
	kcfg := cfg
	kcfg.Collection = "Killed"
	kctx, kcancel := context.WithCancel(ctx)
	go func() {
		defer kcancel()
		for kctx.Err() == nil {
			if m, err := readManifest(kdir); err == nil && m.CaptionsDone > 0 {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	if _, err := Build(kctx, kdir, m, coll, kcfg, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("the build to kill: %v, want it cancelled", err)
	}
	kman, err := readManifest(kdir)
	if err != nil || kman.Complete || kman.ImagesDone != s.NumImages() || kman.CaptionsDone == 0 || kman.CaptionsDone == len(coll.Captions) {
		t.Fatalf("the killed build's manifest: %+v, %v", kman, err)
	}
	if _, err := Open(ctx, kdir, nil); err == nil {
		t.Fatal("Open accepted an index whose upload is unfinished")
	}
	if _, err := Build(ctx, kdir, m, coll, kcfg, nil); err != nil {
		t.Fatal(err)
	}
	kix, err := Open(ctx, kdir, nil)
	if err != nil {
		t.Fatal(err)
	}
	check(kix, "resumed upload")
	c, _ := NewClient(cfg.URL)
	for _, x := range []struct {
		class string
		want  int
	}{{kcfg.ImagesCollection(), s.NumImages()}, {kcfg.CaptionsCollection(), len(coll.Captions)}} {
		if n, err := count(ctx, c, x.class); err != nil || n != x.want {
			t.Fatalf("collection %s holds %d objects (%v), want %d", x.class, n, err, x.want)
		}
	}

	checkReranked(t, ctx, ix, local, s)
	checkLookups(t, ctx, ix, local, s)

	// Stop the node of the manifest; ask the other one.
	cl.StopNode(0)
	if _, err := Open(ctx, dir, nil); err == nil {
		t.Fatal("Open succeeded with the manifest's server stopped")
	}
	// The other node may answer 503 to its readiness check for a moment
	// while it notices its peer gone (seen once under a loaded CI run):
	// ask again for up to 30 seconds.
	var ix2 *Index
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if ix2, err = Open(ctx, dir, &OpenOptions{URL: cl.Nodes[1].URL}); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	check(ix2, "node0 stopped")
	t.Logf("done in %v", time.Since(start).Round(time.Millisecond))
}

// checkServer checks that xmr serve's handler answers a text search from
// the Weaviate-backed index with the local index's results, explained.
func checkServer(t *testing.T, ix *Index, q string, want []index.Result) {
	t.Helper()
	srv, err := server.New(ix, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	body, _ := json.Marshal(map[string]any{"text": q, "k": 10, "explain": true})
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/api/search/text", bytes.NewReader(body)))
	var out struct {
		Results []struct {
			Item       int               `json:"item"`
			Score      float32           `json:"score"`
			Alignments []json.RawMessage `json:"alignments"`
		} `json:"results"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); rec.Code != 200 || err != nil || len(out.Results) != len(want) {
		t.Fatalf("POST /api/search/text: %d %s (%v)", rec.Code, rec.Body.String(), err)
	}
	for r, w := range want {
		if g := out.Results[r]; math.Abs(float64(g.Score-w.Score)) > 1e-4 || len(g.Alignments) == 0 {
			t.Fatalf("POST /api/search/text: rank %d: item %d score %v with %d alignments; the local index item %d score %v", r+1, g.Item, g.Score, len(g.Alignments), w.Item, w.Score)
		}
	}
}

// checkLayout checks that each collection has 2 shards, each held by both
// nodes.
func checkLayout(t *testing.T, ctx context.Context, url string, cfg Config) {
	t.Helper()
	c, _ := NewClient(url)
	var nodes struct {
		Nodes []struct {
			Name   string `json:"name"`
			Shards []struct {
				Class string `json:"class"`
				Name  string `json:"name"`
			} `json:"shards"`
		} `json:"nodes"`
	}
	if err := c.do(ctx, "GET", "/v1/nodes?output=verbose", nil, &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Nodes) != 2 {
		t.Fatalf("%d nodes, want 2", len(nodes.Nodes))
	}
	for _, nd := range nodes.Nodes {
		shards := map[string]int{}
		for _, sh := range nd.Shards {
			shards[sh.Class]++
		}
		for _, class := range []string{cfg.ImagesCollection(), cfg.CaptionsCollection()} {
			if shards[class] != 2 {
				t.Fatalf("node %s holds %d shards of %s, want 2 (2 shards, replication factor 2)", nd.Name, shards[class], class)
			}
		}
	}
}

// count returns the number of objects of a collection.
func count(ctx context.Context, c *Client, class string) (int, error) {
	var out struct {
		Aggregate map[string][]struct {
			Meta struct {
				Count int `json:"count"`
			} `json:"meta"`
		} `json:"Aggregate"`
	}
	if err := c.graphQL(ctx, fmt.Sprintf(`{Aggregate{%s{meta{count}}}}`, class), &out); err != nil {
		return 0, err
	}
	r := out.Aggregate[class]
	if len(r) != 1 {
		return 0, fmt.Errorf("aggregate of %s: %d rows", class, len(r))
	}
	return r[0].Meta.Count, nil
}

// checkReranked checks the re-ranked scorings: with every item a
// candidate (all objects read), they equal the local index's exhaustive
// results; with the default candidates (fetched by maxSim), each result's
// score is its exact score.
func checkReranked(t *testing.T, ctx context.Context, ix *Index, local *index.Index, s *data.Split) {
	t.Helper()
	ni, nc := ix.Len()
	for _, sc := range []model.Scoring{model.MwSr, model.Symm} {
		for _, q := range s.Captions[:10] {
			want, err := local.SearchText(ctx, q, &index.SearchOptions{K: 10, Exact: true, Scoring: sc})
			if err != nil {
				t.Fatal(err)
			}
			got, err := ix.SearchText(ctx, q, &index.SearchOptions{K: 10, Scoring: sc, Candidates: ni})
			if err != nil {
				t.Fatal(err)
			}
			sameResults(t, fmt.Sprintf("text-to-image %s %q", sc, q), got, want)
		}
	}
	for i := range 10 {
		id := s.ID(i)
		want, err := local.SearchImage(ctx, id, &index.SearchOptions{K: 10, Exact: true})
		if err != nil {
			t.Fatal(err)
		}
		got, err := ix.SearchImage(ctx, id, &index.SearchOptions{K: 10, Candidates: nc, Explain: true})
		if err != nil {
			t.Fatal(err)
		}
		sameResults(t, "image-to-text MrSw "+id, got, want)
		if got[0].Caption == nil || got[0].Caption.Text == "" || len(got[0].Explain) == 0 {
			t.Fatalf("image-to-text %s: first result %+v: want a caption and its alignments", id, got[0])
		}
		got, err = ix.SearchImage(ctx, id, &index.SearchOptions{K: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range got {
			m, err := local.AlignCaption(ctx, id, r.Item, nil)
			if err != nil || math.Abs(float64(m.Score-r.Score)) > 1e-4 {
				t.Fatalf("image-to-text %s, default candidates: caption %d scored %v, its exact score %v (%v)", id, r.Item, r.Score, m.Score, err)
			}
		}
	}
}

// checkLookups checks the look-ups and alignments against the local
// index's.
func checkLookups(t *testing.T, ctx context.Context, ix *Index, local *index.Index, s *data.Split) {
	t.Helper()
	id := s.ID(3)
	row, err := ix.Image(ctx, id)
	want, _ := local.Image(ctx, id)
	if err != nil || row.ID != id || len(row.Boxes) != len(want.Boxes) || row.Width != 640 {
		t.Fatalf("Image(%s) = %+v, %v; the local index %+v", id, row, err, want)
	}
	if _, err := ix.Image(ctx, "no-such-image"); !errors.Is(err, index.ErrNotFound) {
		t.Fatalf("Image of an unknown id: %v, want ErrNotFound", err)
	}
	caps, err := ix.ImageCaptions(ctx, id)
	wcaps, _ := local.ImageCaptions(ctx, id)
	if err != nil || fmt.Sprint(caps) != fmt.Sprint(wcaps) {
		t.Fatalf("ImageCaptions(%s) = %v, %v; the local index %v", id, caps, err, wcaps)
	}
	cp, err := ix.Caption(ctx, wcaps[0].Item)
	if err != nil || cp.Text != wcaps[0].Text || cp.ImageID != id {
		t.Fatalf("Caption(%d) = %+v, %v", wcaps[0].Item, cp, err)
	}
	if _, err := ix.Caption(ctx, 1<<20); !errors.Is(err, index.ErrNotFound) {
		t.Fatalf("Caption of an unknown item: %v, want ErrNotFound", err)
	}
	got, err := ix.Align(ctx, id, s.Captions[0], nil)
	wm, _ := local.Align(ctx, id, s.Captions[0], nil)
	if err != nil || math.Abs(float64(got.Score-wm.Score)) > 1e-4 || len(got.Alignments) != len(wm.Alignments) {
		t.Fatalf("Align = %+v, %v; the local index %+v", got, err, wm)
	}
	for i := range wm.Alignments {
		if got.Alignments[i].Word != wm.Alignments[i].Word || got.Alignments[i].Region != wm.Alignments[i].Region {
			t.Fatalf("Align: alignment %d = %+v, the local index %+v", i, got.Alignments[i], wm.Alignments[i])
		}
	}
	ac, err := ix.AlignCaption(ctx, id, wcaps[0].Item, nil)
	wac, _ := local.AlignCaption(ctx, id, wcaps[0].Item, nil)
	if err != nil || math.Abs(float64(ac.Score-wac.Score)) > 1e-4 {
		t.Fatalf("AlignCaption = %+v, %v; the local index %+v", ac, err, wac)
	}
}

package index

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/internal/countdown"
	"github.com/xmr-project/xmr/lockfile"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/synth"
	"github.com/xmr-project/xmr/synth/synthtest"
)

// world is the small synthetic world the tests share.
var world = &synthtest.World{Prefix: "xmr-index-world-", Config: synth.Config{N: 300, Seed: 5, Dim: 16, Regions: 6, Noise: 0.1, NoImages: true, Dev: 50, Test: 100}}

// testWorld returns the shared world's directory.
func testWorld(t testing.TB) string { return world.Dir(t) }

func TestMain(m *testing.M) {
	code := m.Run()
	world.Remove()
	os.Exit(code)
}

// testModel is an untrained small model of the given kind over the
// world's caption words: enough to hold the index to direct scoring.
func testModel(t testing.TB, name string, seed uint64, captions []string) model.Model {
	t.Helper()
	cfg := model.Default()
	cfg.ImageModel = model.ImageConfig{Name: "bottomup", FeatDim: 16, TransformerLayers: 1, Heads: 2, FF: 16, Hidden: 16, PosEncoding: "concat-and-process"}
	cfg.TextModel = model.TextConfig{Name: "bert", WordDim: 16, ExtractionHiddenLayer: 1, FineTune: true, Heads: 2, FF: 16, MaxPositions: 64}
	cfg.Model = model.JointConfig{Name: name, EmbedSize: 16, Layers: 1, Heads: 2, FF: 16}
	if name == "seam" { // global vectors only, scored by order embeddings
		cfg.Model = model.JointConfig{Name: "seam", EmbedSize: 16, Similarity: model.Order}
		cfg.ImageModel = model.ImageConfig{Name: "global", FeatDim: 16}
		cfg.TextModel = model.TextConfig{Name: "seam-c", EmbedDim: 8, Hops: 2, AttentionUnits: 4, Filters: 3, Hidden: 4}
	}
	if name == "vsepp" { // global vectors only, scored by the cosine
		cfg.Model = model.JointConfig{Name: "vsepp", EmbedSize: 16}
		cfg.ImageModel = model.ImageConfig{Name: "global", FeatDim: 16}
		cfg.TextModel = model.TextConfig{Name: "gru", EmbedDim: 8}
	}
	if name == "member" { // global vectors: [self, cross] side by side
		cfg.Model = model.JointConfig{Name: "member", EmbedSize: 16, Layers: 1, Heads: 2, FF: 16, Pool: "max", Fusion: "late",
			Responses: 5, UsageRatio: 1, Space: "comb", Combination: "similarity"}
	}
	tok, err := model.BuildTokenizer(cfg, captions)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, tok, seed)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// collectionOf turns images lo..hi-1 of a split into a Collection.
func collectionOf(s *data.Split, lo, hi int) Collection {
	v := s.Slice(lo, hi)
	c := Collection{Images: v.Images}
	for i := 0; i < v.NumImages(); i++ {
		row := ImageRow{ID: v.ID(i)}
		n := v.Images.NumRegions(i)
		for r := 0; r < n; r++ {
			b := v.Images.Box5(i, r)
			row.Boxes = append(row.Boxes, [4]float32{b[0], b[1], b[2], b[3]})
		}
		c.ImageRows = append(c.ImageRows, row)
		for _, cp := range v.CaptionsOf(i) {
			c.Captions = append(c.Captions, CaptionRow{Text: cp, ImageID: v.ID(i)})
		}
	}
	return c
}

func loadTest(t testing.TB) *data.Split {
	t.Helper()
	s, err := data.LoadPrecomp(context.Background(), testWorld(t), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// direct encodes the split without an index, in batches of batch items
// (an encoder's output depends on its batch to the last bit, through the
// shapes of its matrix products), and each caption alone, as a query is.
func direct(t *testing.T, m model.Model, s *data.Split, batch int) (imgs, txts *model.Embeddings) {
	t.Helper()
	ctx := context.Background()
	imgs, err := model.EncodeImages(ctx, m, s.Images, &model.EncodeOptions{BatchSize: batch})
	if err != nil {
		t.Fatal(err)
	}
	txts, err = model.EncodeTexts(ctx, m, s.Captions, &model.EncodeOptions{BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	return imgs, txts
}

// TestSearchMatchesDirectScoring builds an index in several segments and
// holds its text-to-image and image-to-text rankings and scores equal to
// scoring the encoded split directly (model.ScoreMatrix), for every
// scoring: exhaustively in float32 (Exact), and by default (int8 codes,
// the best 100 rescored in float32), which must find the same top 10 here.
func TestSearchMatchesDirectScoring(t *testing.T) {
	s := loadTest(t)
	for _, name := range model.Names() {
		t.Run(name, func(t *testing.T) {
			m := testModel(t, name, 3, s.Captions)
			dir := t.TempDir()
			st, err := Build(context.Background(), dir, m, collectionOf(s, 0, s.NumImages()), &BuildOptions{SegmentItems: 37})
			if err != nil {
				t.Fatal(err)
			}
			if st.Images != 100 || st.Captions != 500 || st.Segments != 3+14 {
				t.Fatalf("stats %+v", st)
			}
			ix, err := Open(context.Background(), dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ix.Close()
			imgs, txts := direct(t, m, s, 37)
			ctx := context.Background()
			type scoringCase struct {
				sc    model.Scoring
				exact bool
			}
			cases := []scoringCase{{"", true}, {"", false}, {model.Global, false}, {model.MrSw, true}, {model.MwSr, true}, {model.Symm, true}, {model.MrAvgw, true},
				{model.MwSr, false}, {model.Symm, false}, {model.MrAvgw, false}}
			if len(imgs.Vecs) == 0 { // global vectors only: SEAM, VSE++, MEMBER
				cases = []scoringCase{{"", true}, {"", false}, {model.Global, false}, {model.Global, true}}
			}
			if len(imgs.Vecs) == 0 {
				// An alignment scoring has nothing to pool: a clear
				// refusal (it used to score every item 0, or blame the
				// query's words).
				for _, sc := range []model.Scoring{model.MrSw, model.MwSr} {
					for _, exact := range []bool{false, true} {
						o := &SearchOptions{K: 5, Scoring: sc, Exact: exact}
						_, errText := ix.SearchText(ctx, s.Captions[0], o)
						_, errImage := ix.SearchImage(ctx, s.ID(0), o)
						_, errAlign := ix.AlignCaption(ctx, s.ID(0), 0, o)
						for _, err := range []error{errText, errImage, errAlign} {
							if !errors.Is(err, ErrBadQuery) || !strings.Contains(err.Error(), "has global vectors only") {
								t.Fatalf("%s (exact %v) on an index of global vectors: %v, want ErrBadQuery naming it", sc, exact, err)
							}
						}
					}
				}
			}
			for _, c := range cases {
				sc, exact := c.sc, c.exact
				want := sc
				if want == "" {
					want = m.Scoring()
				}
				for _, c := range []int{0, 7, 123, 499} {
					got, err := ix.SearchText(ctx, s.Captions[c], &SearchOptions{K: 10, Scoring: sc, Exact: exact})
					if err != nil {
						t.Fatal(err)
					}
					col, err := model.ScoreMatrix(ctx, imgs, txts.Slice(c, c+1), want)
					if err != nil {
						t.Fatal(err)
					}
					sameRanking(t, "text "+s.Captions[c]+" "+string(want), got, model.TopK(col, 10))
					for _, r := range got {
						if r.Image == nil || r.Image.ID != s.ID(r.Item) {
							t.Fatalf("result %d: image %+v, want id %s", r.Rank, r.Image, s.ID(r.Item))
						}
					}
				}
				for _, i := range []int{0, 42, 99} {
					got, err := ix.SearchImage(ctx, s.ID(i), &SearchOptions{K: 10, Scoring: sc, Exact: exact})
					if err != nil {
						t.Fatal(err)
					}
					row, err := model.ScoreMatrix(ctx, imgs.Slice(i, i+1), txts, want)
					if err != nil {
						t.Fatal(err)
					}
					sameRanking(t, "image "+s.ID(i)+" "+string(want), got, model.TopK(row, 10))
					for _, r := range got {
						if r.Caption == nil || r.Caption.Text != s.Captions[r.Item] || r.Caption.ImageID != s.ID(s.ImageOf(r.Item)) {
							t.Fatalf("result %d: caption %+v, want %q of %s", r.Rank, r.Caption, s.Captions[r.Item], s.ID(s.ImageOf(r.Item)))
						}
					}
				}
			}
		})
	}
}

// sameRanking checks that got ranks the items of want in the same order
// with the same scores, to float32 rounding: the index scores with the
// same functions on the same vectors, but in matrix products of other
// shapes (per segment), whose sums may round differently in the last bit.
// Two results may swap only when their scores tie to that rounding.
func sameRanking(t *testing.T, what string, got []Result, want []model.Hit) {
	t.Helper()
	const tol = 1e-5
	if len(got) != len(want) {
		t.Fatalf("%s: %d results, want %d", what, len(got), len(want))
	}
	score := map[int]float32{}
	for _, h := range want {
		score[h.Index] = h.Score
	}
	for k := range want {
		g, w := got[k], want[k]
		if g.Rank != k+1 {
			t.Fatalf("%s: result %d has rank %d", what, k+1, g.Rank)
		}
		if math.Abs(float64(g.Score-w.Score)) > tol {
			t.Fatalf("%s: result %d is item %d score %v, direct scoring gives item %d score %v", what, k+1, g.Item, g.Score, w.Index, w.Score)
		}
		if ds, ok := score[g.Item]; g.Item != w.Index && (!ok || math.Abs(float64(ds-g.Score)) > tol) {
			t.Fatalf("%s: result %d is item %d score %v, direct scoring ranks item %d there (score %v)", what, k+1, g.Item, g.Score, w.Index, w.Score)
		}
	}
}

// TestExplain checks that every explained word is a word of the query and
// its region a region of the image, with the box of that region.
func TestExplain(t *testing.T) {
	s := loadTest(t)
	m := testModel(t, "teran", 4, s.Captions)
	dir := t.TempDir()
	if _, err := Build(context.Background(), dir, m, collectionOf(s, 0, 20), nil); err != nil {
		t.Fatal(err)
	}
	ix, err := Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	q := s.Captions[3]
	res, err := ix.SearchText(context.Background(), q, &SearchOptions{K: 3, Explain: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if len(r.Explain) == 0 {
			t.Fatalf("result %d has no explanation", r.Rank)
		}
		for _, a := range r.Explain {
			if !strings.Contains(" "+q+" ", " "+a.Word+" ") || a.Region < 0 || a.Region >= len(r.Image.Boxes) || a.Box == nil || *a.Box != r.Image.Boxes[a.Region] {
				t.Fatalf("alignment %+v for query %q and image with %d regions", a, q, len(r.Image.Boxes))
			}
			if a.Cosine < -1.0001 || a.Cosine > 1.0001 {
				t.Fatalf("cosine %v", a.Cosine)
			}
		}
	}
}

// TestAppend builds an index in two steps and checks that it searches as
// the index built at once does; appending with another model, or images
// already in the index, is refused.
func TestAppend(t *testing.T) {
	s := loadTest(t)
	m := testModel(t, "teran", 5, s.Captions)
	ctx := context.Background()
	whole, parts := t.TempDir(), t.TempDir()
	if _, err := Build(ctx, whole, m, collectionOf(s, 0, 60), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(ctx, parts, m, collectionOf(s, 0, 25), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(ctx, parts, m, collectionOf(s, 25, 60), &BuildOptions{Mode: Append}); err != nil {
		t.Fatal(err)
	}
	a, err := Open(context.Background(), whole, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(context.Background(), parts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ni, nc := b.Len()
	if ni != 60 || nc != 300 || b.Manifest().Generation != 2 {
		t.Fatalf("appended index: %d images, %d captions, generation %d", ni, nc, b.Manifest().Generation)
	}
	for _, c := range []int{1, 140, 299} {
		ra, err := a.SearchText(ctx, s.Captions[c], nil)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := b.SearchText(ctx, s.Captions[c], nil)
		if err != nil {
			t.Fatal(err)
		}
		// The images were encoded in other batches: scores agree to
		// rounding.
		for k := range ra {
			if ra[k].Item != rb[k].Item || math.Abs(float64(ra[k].Score-rb[k].Score)) > 1e-5 || ra[k].Image.ID != rb[k].Image.ID {
				t.Fatalf("caption %d result %d: built at once %+v, appended %+v", c, k, ra[k], rb[k])
			}
		}
	}
	other := testModel(t, "teran", 6, s.Captions)
	if _, err := Build(ctx, parts, other, collectionOf(s, 60, 70), &BuildOptions{Mode: Append}); err == nil || !strings.Contains(err.Error(), "another model") {
		t.Fatalf("appending with another model: %v", err)
	}
	if _, err := Build(ctx, parts, m, collectionOf(s, 50, 70), &BuildOptions{Mode: Append}); err == nil || !strings.Contains(err.Error(), "already in the index") {
		t.Fatalf("appending images already indexed: %v", err)
	}
	if _, err := Build(ctx, parts, m, collectionOf(s, 60, 70), nil); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("creating over an index: %v", err)
	}
	// The refused builds left the index as it was.
	reopen, err := Open(context.Background(), parts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reopen.Close()
	if ni, nc := reopen.Len(); ni != 60 || nc != 300 {
		t.Fatalf("after refused builds: %d images, %d captions", ni, nc)
	}
}

// TestWriterLock checks that a second writer of one index directory is
// refused while the first is open, naming its process, and may start once
// the first has committed or aborted.
func TestWriterLock(t *testing.T) {
	s := loadTest(t)
	m := testModel(t, "teran", 7, s.Captions)
	ctx := context.Background()
	dir := t.TempDir()
	w, err := NewWriter(dir, m, Create)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(ctx, dir, m, collectionOf(s, 0, 10), &BuildOptions{Mode: Overwrite})
	if !errors.Is(err, lockfile.ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("process %d", os.Getpid())) {
		t.Fatalf("second writer: %v, want a lock error naming process %d", err, os.Getpid())
	}
	w.Abort()
	if _, err := Build(ctx, dir, m, collectionOf(s, 0, 10), nil); err != nil {
		t.Fatalf("after the first writer aborted: %v", err)
	}
	w, err = NewWriter(dir, m, Append)
	if err != nil {
		t.Fatalf("after a committed build: %v", err)
	}
	w.Abort()
}

// cancelAt is an ImageSource that cancels a context when image at is read,
// as Ctrl-C in the middle of a build does.
type cancelAt struct {
	model.ImageSource
	at     int
	cancel context.CancelFunc
}

func (c cancelAt) Image(i int) []float32 {
	if i == c.at {
		c.cancel()
	}
	return c.ImageSource.Image(i)
}

// TestBuildCancelled interrupts an overwrite in the middle of its images:
// Build returns the context's error, the published index is untouched and
// searchable, and the cancelled build's segments are gone.
func TestBuildCancelled(t *testing.T) {
	s := loadTest(t)
	m := testModel(t, "teran", 7, s.Captions)
	dir := t.TempDir()
	if _, err := Build(context.Background(), dir, m, collectionOf(s, 0, 10), nil); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := collectionOf(s, 0, 20)
	c.Images = cancelAt{c.Images, 12, cancel}
	_, err := Build(ctx, dir, m, c, &BuildOptions{Mode: Overwrite, SegmentItems: 4, Encode: &model.EncodeOptions{BatchSize: 2}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled build: %v, want context.Canceled", err)
	}
	after, _ := os.ReadDir(dir)
	if len(after) != len(before) {
		t.Fatalf("files before %d, after the cancelled build %d: %v", len(before), len(after), after)
	}
	ix, err := Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if ni, nc := ix.Len(); ni != 10 || nc != 50 {
		t.Fatalf("after the cancelled build: %d images, %d captions, want the 10 and 50 published", ni, nc)
	}
}

// dirState lists the files of dir with their sizes and modification times.
func dirState(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %d %v", e.Name(), fi.Size(), fi.ModTime().UnixNano()))
	}
	return out
}

// TestOpenCancelled opens an index of several segments with the context
// cancelled at each of Open's checks in turn (on entry, before each
// segment, before each preload, the catalogue's query): every open fails
// with context.Canceled and leaves the directory as it was, until the
// checks run out and the index opens.
func TestOpenCancelled(t *testing.T) {
	s := loadTest(t)
	m := testModel(t, "teran", 7, s.Captions)
	dir := t.TempDir()
	if _, err := Build(context.Background(), dir, m, collectionOf(s, 0, 12), &BuildOptions{SegmentItems: 20}); err != nil {
		t.Fatal(err)
	}
	man, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	segs := len(man.Images) + len(man.Captions) // 1 + 3
	before := dirState(t, dir)
	for _, tc := range []struct {
		name      string
		o         *OpenOptions
		minChecks int
	}{
		{"checksums", nil, 1 + segs},
		{"skip checksums", &OpenOptions{SkipChecksums: true}, 1 + segs},
		{"preload", &OpenOptions{Preload: true}, 1 + 2*segs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if ix, err := Open(context.Background(), dir, tc.o); err != nil {
				t.Fatal(err)
			} else {
				ix.Close()
			}
			for n := 0; ; n++ {
				ix, err := Open(countdown.New(n), dir, tc.o)
				if err == nil {
					ix.Close()
					if n < tc.minChecks {
						t.Fatalf("opened after %d checks of the context, want at least %d", n, tc.minChecks)
					}
					break
				}
				if ix != nil || !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled at check %d: index %v, error %v; want context.Canceled", n, ix != nil, err)
				}
				if n > 100 {
					t.Fatal("still cancelled after 100 checks")
				}
			}
			if after := dirState(t, dir); !slices.Equal(after, before) {
				t.Fatalf("directory changed:\n%q\n%q", before, after)
			}
		})
	}
	ix, err := Open(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ix.Close()
}

// TestWriterCancelled adds images and captions with the context cancelled
// on entry and after the quantizer's training: each add returns
// context.Canceled and writes no file, and the writer still commits what
// it was given before.
func TestWriterCancelled(t *testing.T) {
	s := loadTest(t)
	m := testModel(t, "teran", 7, s.Captions)
	c := collectionOf(s, 0, 6)
	ctx := context.Background()
	imgs, err := model.EncodeImages(ctx, m, c.Images, nil)
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, len(c.Captions))
	for i, cp := range c.Captions {
		texts[i] = cp.Text
	}
	txts, err := model.EncodeTexts(ctx, m, texts, nil)
	if err != nil {
		t.Fatal(err)
	}
	addImages := func(ctx context.Context, w *Writer) error { return w.AddImages(ctx, imgs, c.ImageRows) }
	addCaptions := func(ctx context.Context, w *Writer) error { return w.AddCaptions(ctx, txts, c.Captions) }
	for _, tc := range []struct {
		name string
		add  func(ctx context.Context, w *Writer) error
		n    int // checks that pass
	}{
		{"images cancelled", addImages, 0},
		{"images after training", addImages, 1},
		{"captions cancelled", addCaptions, 0},
		{"captions after training", addCaptions, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, err := NewWriter(dir, m, Create)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			before := dirState(t, dir)
			if err := tc.add(countdown.New(tc.n), w); !errors.Is(err, context.Canceled) {
				t.Fatalf("error %v, want context.Canceled", err)
			}
			if after := dirState(t, dir); !slices.Equal(after, before) {
				t.Fatalf("files written: %q, before %q", after, before)
			}
			// The writer goes on: the same add, then the other, commit.
			if err := addImages(ctx, w); err != nil {
				t.Fatal(err)
			}
			if err := addCaptions(ctx, w); err != nil {
				t.Fatal(err)
			}
			if err := w.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			ix, err := Open(ctx, dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ix.Close()
			if ni, nc := ix.Len(); ni != 6 || nc != 30 {
				t.Fatalf("committed %d images and %d captions, want 6 and 30", ni, nc)
			}
		})
	}
}

// TestUnpublishedBuildIsInvisible leaves a build unfinished (as a kill
// would: segments written, catalogue rows inserted, no manifest) and
// checks that the index still opens as before, and that the next build
// cleans up and succeeds.
func TestUnpublishedBuildIsInvisible(t *testing.T) {
	s := loadTest(t)
	m := testModel(t, "teran", 7, s.Captions)
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := Build(ctx, dir, m, collectionOf(s, 0, 10), nil); err != nil {
		t.Fatal(err)
	}
	man, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A killed append: segments and catalogue rows, but no new manifest.
	w, err := NewWriter(dir, m, Append)
	if err != nil {
		t.Fatal(err)
	}
	c := collectionOf(s, 10, 20)
	e, err := model.EncodeImages(ctx, m, c.Images, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddImages(context.Background(), e, c.ImageRows); err != nil {
		t.Fatal(err)
	}
	cat, err := openCatalogue(filepath.Join(dir, man.Catalogue), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.insert(ctx, w.imgs, nil, 10, 50, append(files(man.Images), append(files(man.Captions), newFiles(w.imgs, nil)...)...)); err != nil {
		t.Fatal(err)
	}
	cat.close()
	// (no Commit: the process died here, and the kernel dropped its lock)
	w.lock.Release()
	ix, err := Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ni, nc := ix.Len(); ni != 10 || nc != 50 {
		t.Fatalf("after a killed append: %d images, %d captions, want the 10 and 50 published", ni, nc)
	}
	ix.Close()
	if _, err := Build(ctx, dir, m, collectionOf(s, 10, 20), &BuildOptions{Mode: Append}); err != nil {
		t.Fatalf("append after a killed append: %v", err)
	}
	ix, err = Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if ni, nc := ix.Len(); ni != 20 || nc != 100 {
		t.Fatalf("after the append: %d images, %d captions", ni, nc)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 1+1+1+4+1 { // manifest, catalogue, model, 2 segments per build step, the lock
		t.Fatalf("files left after clean-up: %v", names)
	}
}

// smallIndex builds a TERAN index of the first 10 test images in a new
// directory, for tests that damage or forge its files, and returns the
// directory and its manifest.
func smallIndex(t *testing.T) (string, *Manifest) {
	t.Helper()
	s := loadTest(t)
	m := testModel(t, "teran", 8, s.Captions)
	dir := t.TempDir()
	if _, err := Build(context.Background(), dir, m, collectionOf(s, 0, 10), nil); err != nil {
		t.Fatal(err)
	}
	man, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, man
}

// TestCorruptIndex damages a built index in several ways; each gives a
// clear error naming the file and what is wrong.
func TestCorruptIndex(t *testing.T) {
	src, man := smallIndex(t)
	seg := man.Images[0].File
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   string
	}{
		{"flipped vector", func(t *testing.T, dir string) {
			h := headerOf(t, filepath.Join(dir, seg))
			flip(t, filepath.Join(dir, seg), h.Sections[secVectors].Offset+12)
		}, `section "vectors": checksum mismatch`},
		{"flipped header", func(t *testing.T, dir string) { flip(t, filepath.Join(dir, seg), segPrefix+5) }, "header checksum mismatch"},
		{"truncated", func(t *testing.T, dir string) {
			p := filepath.Join(dir, seg)
			st, _ := os.Stat(p)
			if err := os.Truncate(p, st.Size()-100); err != nil {
				t.Fatal(err)
			}
		}, "truncated or corrupt"},
		{"not a segment", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, seg), []byte(strings.Repeat("x", 200)), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "not an xmr index segment"},
		{"segment version", func(t *testing.T, dir string) {
			p := filepath.Join(dir, seg)
			b, _ := os.ReadFile(p)
			binary.LittleEndian.PutUint32(b[8:], 9)
			os.WriteFile(p, b, 0o644)
		}, "format version 9"},
		{"manifest version", func(t *testing.T, dir string) { editManifest(t, dir, func(m *Manifest) { m.Version = 7 }) }, "layout version 7"},
		{"manifest count", func(t *testing.T, dir string) { editManifest(t, dir, func(m *Manifest) { m.Images[0].Items = 11 }) }, "the manifest says 11"},
		{"missing segment", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, seg)) }, "no such file"},
		{"path in manifest", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) { m.Images[0].File = "../x.seg" })
		}, "not a plain name"},
		{"no manifest", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, manifestFile)) }, "not an xmr index"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, src, dir)
			c.damage(t, dir)
			ix, err := Open(context.Background(), dir, nil)
			if err == nil {
				ix.Close()
				t.Fatal("a damaged index opened")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want one mentioning %q", err, c.want)
			}
		})
	}
}

func headerOf(t *testing.T, path string) segmentHeader {
	t.Helper()
	s, err := openSegment(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	return s.header
}

func flip(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func editManifest(t *testing.T, dir string, edit func(*Manifest)) {
	t.Helper()
	m, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, manifestFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

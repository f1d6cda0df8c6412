package index

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/model"
)

// fusedScores is the fusion's definition, computed directly: each
// model's scores of the query over every item standardised with their
// mean and deviation over the FusionSample items spread over the
// collection (all of them when it is smaller), weighted and summed.
func fusedScores(cols [][]float32, weights []float32) []float32 {
	out := make([]float32, len(cols[0]))
	for m, c := range cols {
		var sample []float32
		for _, i := range Spread(len(c), FusionSample) {
			sample = append(sample, c[i])
		}
		mean, sd := moments(sample)
		for i, v := range c {
			out[i] += float32(float64(weights[m]) * (float64(v) - mean) / sd)
		}
	}
	return out
}

// testFusion builds in root the indexes of the first n images of s by an
// untrained TERAN ("regions") and an untrained VSE++ ("global"), in
// segments of seg items, and writes their fusion at weights; it returns
// the two models.
func testFusion(tb testing.TB, s *data.Split, root string, n, seg int, weights []float32) []model.Model {
	tb.Helper()
	ctx := context.Background()
	models := []model.Model{testModel(tb, "teran", 3, s.Captions), testModel(tb, "vsepp", 4, s.Captions)}
	var members []FusionMember
	for k, m := range models {
		name := []string{"regions", "global"}[k]
		if _, err := Build(ctx, filepath.Join(root, name), m, collectionOf(s, 0, n), &BuildOptions{SegmentItems: seg}); err != nil {
			tb.Fatal(err)
		}
		members = append(members, FusionMember{Dir: name, Weight: weights[k]})
	}
	if err := WriteFusion(ctx, root, members); err != nil {
		tb.Fatal(err)
	}
	return models
}

func TestFusionMatchesDirectFusion(t *testing.T) {
	s := loadTest(t)
	ctx := context.Background()
	root := t.TempDir()
	weights := []float32{1, 0.4}
	models := testFusion(t, s, root, s.NumImages(), 37, weights)
	if !IsFusion(root) || IsFusion(filepath.Join(root, "regions")) {
		t.Fatal("IsFusion: want true for the fusion only")
	}
	f, err := OpenFusion(ctx, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var imgs, txts []*model.Embeddings
	for _, m := range models {
		i, c := direct(t, m, s, 37)
		imgs, txts = append(imgs, i), append(txts, c)
	}

	// Text queries: 100 images, fewer than FusionDepth and FusionSample:
	// every image is scored by both members, the ranking is the direct
	// fusion's.
	for _, c := range []int{0, 7, 123, 499} {
		got, err := f.SearchText(ctx, s.Captions[c], &SearchOptions{K: 10, Explain: true})
		if err != nil {
			t.Fatal(err)
		}
		var cols [][]float32
		for m, mod := range models {
			col, err := model.ScoreMatrix(ctx, imgs[m], txts[m].Slice(c, c+1), mod.Scoring())
			if err != nil {
				t.Fatal(err)
			}
			cols = append(cols, col)
		}
		sameRanking(t, "fused text "+s.Captions[c], got, model.TopK(fusedScores(cols, weights), 10))
		if got[0].Image == nil || got[0].Image.ID != s.ID(got[0].Item) || len(got[0].Explain) == 0 {
			t.Fatalf("result 1: image %+v, %d alignments: want the catalogue row of %s and the first member's alignment", got[0].Image, len(got[0].Explain), s.ID(got[0].Item))
		}
	}

	// Image queries: 500 captions, each member ranks its best 100, and
	// 256 of them give each member's mean and deviation; the results'
	// scores are their direct fused scores, in order.
	for _, i := range []int{0, 42, 99} {
		got, err := f.SearchImage(ctx, s.ID(i), &SearchOptions{K: 10})
		if err != nil {
			t.Fatal(err)
		}
		var rows [][]float32
		for m, mod := range models {
			row, err := model.ScoreMatrix(ctx, imgs[m].Slice(i, i+1), txts[m], mod.Scoring())
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, row)
		}
		want := fusedScores(rows, weights)
		if len(got) != 10 {
			t.Fatalf("image %s: %d results, want 10", s.ID(i), len(got))
		}
		for r, res := range got {
			if d := math.Abs(float64(res.Score - want[res.Item])); d > 1e-3 {
				t.Errorf("image %s result %d (caption %d): score %v, direct fusion %v", s.ID(i), r+1, res.Item, res.Score, want[res.Item])
			}
			if r > 0 && res.Score > got[r-1].Score {
				t.Errorf("image %s: result %d scores above result %d", s.ID(i), r+1, r)
			}
			if res.Caption == nil || res.Caption.Text != s.Captions[res.Item] {
				t.Errorf("result %d: caption %+v, want %q", r+1, res.Caption, s.Captions[res.Item])
			}
		}
		// Every caption that one member puts first is among the fused
		// candidates; the best of the direct fusion is found here.
		if best := model.TopK(want, 1)[0].Index; got[0].Item != best {
			t.Errorf("image %s: fused first caption %d, direct fusion's %d", s.ID(i), got[0].Item, best)
		}
	}

	if _, err := f.SearchText(ctx, s.Captions[0], &SearchOptions{Scoring: model.MwSr}); !errors.Is(err, ErrBadQuery) {
		t.Errorf("a scoring chosen for a fusion: %v, want ErrBadQuery", err)
	}
	if ni, nc := f.Len(); ni != 100 || nc != 500 {
		t.Errorf("Len %d, %d", ni, nc)
	}
}

func TestFusionRefuses(t *testing.T) {
	s := loadTest(t)
	ctx := context.Background()
	root := t.TempDir()
	m := testModel(t, "vsepp", 4, s.Captions)
	for _, c := range []struct {
		dir    string
		lo, hi int
	}{{"a", 0, 100}, {"b", 0, 50}, {"c", 50, 100}, {"d", 0, 50}} {
		if _, err := Build(ctx, filepath.Join(root, c.dir), m, collectionOf(s, c.lo, c.hi), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		members []FusionMember
		want    string
	}{
		{"one member", []FusionMember{{"a", 1}}, "want at least 2"},
		{"other counts", []FusionMember{{"a", 1}, {"b", 1}}, "want the same collection"},
		{"other images", []FusionMember{{"b", 1}, {"c", 1}}, "want the same images in the same order"},
		{"zero weight", []FusionMember{{"b", 1}, {"d", 0}}, "want a finite number > 0"},
		{"no index", []FusionMember{{"b", 1}, {"nosuch", 1}}, "not an xmr index"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "f")
			for i := range tc.members {
				if !filepath.IsAbs(tc.members[i].Dir) {
					tc.members[i].Dir = filepath.Join(root, tc.members[i].Dir)
				}
			}
			err := WriteFusion(ctx, out, tc.members)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("WriteFusion: %v, want an error saying %q", err, tc.want)
			}
			if IsFusion(out) {
				t.Errorf("a refused fusion left %s", FusionFile)
			}
		})
	}
	for _, tc := range []struct{ name, content, want string }{
		{"not JSON", "{", "want the JSON that xmr fuse writes"},
		{"unknown field", `{"format":"xmr-fusion/1","members":[],"x":1}`, "unknown field"},
		{"format", `{"format":"xmr-fusion/9","members":[]}`, `want "xmr-fusion/1"`},
		{"weight", `{"format":"xmr-fusion/1","members":[{"dir":"` + filepath.Join(root, "b") + `","weight":1},{"dir":"` + filepath.Join(root, "d") + `","weight":-1}]}`, "weight -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, FusionFile), []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := OpenFusion(ctx, dir, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), FusionFile) {
				t.Fatalf("OpenFusion: %v, want an error naming %s and saying %q", err, FusionFile, tc.want)
			}
		})
	}
	if _, err := OpenFusion(ctx, t.TempDir(), nil); !errors.Is(err, ErrNotIndex) {
		t.Errorf("OpenFusion of an empty directory: %v, want ErrNotIndex", err)
	}
}

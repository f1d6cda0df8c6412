package index

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/npy"
)

// TestFusionQueryBank: SetQueryBank keeps each image's offset under a
// bank of captions, computed as the fusion scores (equal to the direct
// computation), records it so that a reopened fusion has it, and text
// searches then rank by the fused score less the offset; image searches
// are unchanged. A bank file that does not fit is refused on opening.
func TestFusionQueryBank(t *testing.T) {
	s := loadTest(t)
	ctx := context.Background()
	root := t.TempDir()
	weights := []float32{1, 0.4}
	models := testFusion(t, s, root, s.NumImages(), 37, weights)
	f, err := OpenFusion(ctx, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before, err := f.SearchImage(ctx, s.ID(7), &SearchOptions{K: 10})
	if err != nil {
		t.Fatal(err)
	}
	bank := s.Captions[300:340]
	const beta = 2
	last, total := 0, 0
	enc, err := f.EncodeBank(ctx, bank)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetQueryBank(ctx, enc[:1], beta, nil); err == nil || !strings.Contains(err.Error(), "1 members' encodings for 2 members") {
		t.Fatalf("one member's encodings: %v", err)
	}
	bad := *enc[1]
	bad.Dim = 7
	if err := f.SetQueryBank(ctx, []*model.Embeddings{enc[0], &bad}, beta, nil); err == nil || !strings.Contains(err.Error(), "member 2's encodings are 40 captions of 7-d vectors") {
		t.Fatalf("encodings of another width: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, QueryBankFile)); !os.IsNotExist(err) {
		t.Fatalf("a refused bank left %s: %v", QueryBankFile, err)
	}
	if err := f.SetQueryBank(ctx, enc, beta, func(done, n int) { last, total = done, n }); err != nil {
		t.Fatal(err)
	}
	if last != len(bank) || total != len(bank) {
		t.Errorf("progress last said %d of %d captions done, want %d of %d", last, total, len(bank), len(bank))
	}

	var imgs, txts []*model.Embeddings
	for _, m := range models {
		i, c := direct(t, m, s, 37)
		imgs, txts = append(imgs, i), append(txts, c)
	}
	column := func(c int) []float32 {
		var cols [][]float32
		for m, mod := range models {
			col, err := model.ScoreMatrix(ctx, imgs[m], txts[m].Slice(c, c+1), mod.Scoring())
			if err != nil {
				t.Fatal(err)
			}
			cols = append(cols, col)
		}
		return fusedScores(cols, weights)
	}
	acc := model.NewBankAccumulator(s.NumImages(), beta/1.4)
	for c := 300; c < 340; c++ {
		acc.Add(column(c))
	}
	want := acc.Offsets()
	a, err := npy.Read(filepath.Join(root, QueryBankFile))
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range want {
		if math.Abs(float64(a.Data[i]-v)) > 1e-3 {
			t.Fatalf("image %d's offset %v, direct %v", i, a.Data[i], v)
		}
	}

	g, err := OpenFusion(ctx, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if n, b := g.QueryBank(); n != len(bank) || b != beta {
		t.Errorf("reopened: a bank of %d captions at beta %v, want %d at %v", n, b, len(bank), beta)
	}
	for _, c := range []int{0, 123, 499} {
		sc := column(c)
		for i := range sc {
			sc[i] -= want[i]
		}
		got, err := g.SearchText(ctx, s.Captions[c], &SearchOptions{K: 10})
		if err != nil {
			t.Fatal(err)
		}
		sameRanking(t, "text with the bank "+s.Captions[c], got, model.TopK(sc, 10))
		for r, res := range got {
			if d := math.Abs(float64(res.Score - sc[res.Item])); d > 1e-3 {
				t.Errorf("caption %d result %d: score %v, want %v", c, r+1, res.Score, sc[res.Item])
			}
		}
	}
	after, err := g.SearchImage(ctx, s.ID(7), &SearchOptions{K: 10})
	if err != nil {
		t.Fatal(err)
	}
	for r := range before {
		if before[r].Item != after[r].Item || before[r].Score != after[r].Score {
			t.Fatalf("image search result %d: %d (%v), before the bank %d (%v)", r+1, after[r].Item, after[r].Score, before[r].Item, before[r].Score)
		}
	}

	for _, tc := range []struct {
		name  string
		write func(path string) error
		want  string
	}{
		{"missing", func(p string) error { return os.Remove(p) }, "no such file"},
		{"not a vector", func(p string) error { return npy.WriteFile(p, []int{50, 2}, make([]float32, 100)) }, "shape [50 2]: want (100,)"},
		{"NaN", func(p string) error {
			v := make([]float32, 100)
			v[5] = float32(math.NaN())
			return npy.WriteFile(p, []int{100}, v)
		}, "offset 5 is NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(root, QueryBankFile)
			saved, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(path, saved, 0o644)
			if err := tc.write(path); err != nil {
				t.Fatal(err)
			}
			if _, err := OpenFusion(ctx, root, nil); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), QueryBankFile) {
				t.Fatalf("OpenFusion: %v, want an error naming %s and saying %q", err, QueryBankFile, tc.want)
			}
		})
	}

	// Offsets for another number of images (the members appended to
	// since): the fusion opens without its bank, and text searches rank
	// by the fused scores alone.
	path := filepath.Join(root, QueryBankFile)
	if err := npy.WriteFile(path, []int{3}, []float32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	h, err := OpenFusion(ctx, root, nil)
	if err != nil {
		t.Fatalf("a stale bank: %v, want the fusion opened without it", err)
	}
	defer h.Close()
	if n, _ := h.QueryBank(); n != 0 {
		t.Fatalf("a stale bank: QueryBank says %d captions, want none", n)
	}
	got, err := h.SearchText(ctx, s.Captions[123], &SearchOptions{K: 10})
	if err != nil {
		t.Fatal(err)
	}
	sameRanking(t, "text with a stale bank", got, model.TopK(column(123), 10))
}

// TestSpread checks the indices spread over a range.
func TestSpread(t *testing.T) {
	for _, c := range []struct {
		n, m int
		want []int
	}{
		{10, 5, []int{0, 2, 4, 6, 8}},
		{3, 5, []int{0, 1, 2}},
		{7, 3, []int{0, 2, 4}},
		{4, 0, []int{}},
	} {
		if got := Spread(c.n, c.m); !slices.Equal(got, c.want) {
			t.Errorf("Spread(%d, %d) = %v, want %v", c.n, c.m, got, c.want)
		}
	}
}

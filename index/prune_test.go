package index

import (
	"context"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/xmr-project/xmr/model"
)

// segmentOf builds an in-memory segment of e (no file).
func segmentOf(e *model.Embeddings) *segment {
	d := e.Dim
	codes, scales := quantize(e.Vecs, d)
	gcodes, gscales := quantize(e.Global, d)
	return &segment{
		header: segmentHeader{Items: e.Len(), Vectors: len(e.Pos), Dim: d},
		emb:    e,
		codes:  &codeView{cd: codeDim(d), codes: codes, scales: scales, offsets: e.Offsets},
		global: &globalView{sketch: sketches(e.Global, d), words: sketchWords(d), cd: codeDim(d), codes: gcodes, scales: gscales},
	}
}

func TestSketches(t *testing.T) {
	s := sketches([]float32{1, -1, 0, 2, -3, 4, 5, -6, 7, 8, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, 1}, 66)
	if len(s) != 2 || s[0]&0x3ff != 0b1101101001 || s[1] != 0b10 {
		t.Fatalf("sketch %b %b", s[0]&0x3ff, s[1])
	}
}

// TestGlobalCandidates checks both stages: with more items than the first
// stage keeps, the kept items are exactly those of the smallest sketch
// distances, and the candidates are the best of those by global dot
// product.
func TestGlobalCandidates(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	const d, n = 64, 100
	a := randomEmbeddings(rng, 6000, 2, d)
	b := randomEmbeddings(rng, 5000, 2, d)
	segs := []*segment{segmentOf(a), segmentOf(b)}
	q := randomEmbeddings(rng, 1, 1, d).Global
	got := globalCandidates(segs, q, d, n)
	if len(got) != n {
		t.Fatalf("%d candidates, want %d", len(got), n)
	}
	// Brute force: distances of all 11000 items, the 4096 closest (ties
	// by item number), then the best 100 by int8 dot.
	qs := sketches(q, d)
	type item struct{ n, dist, seg, row int }
	var all []item
	k := 0
	for si, s := range segs {
		for r := 0; r < s.header.Items; r++ {
			h := bits.OnesCount64(s.global.sketch[r] ^ qs[0])
			all = append(all, item{k, h, si, r})
			k++
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].dist < all[j].dist })
	kept := all[:4096]
	qc, qsc := quantize(q, d)
	scores := make([]float32, len(kept))
	for i, it := range kept {
		gv := segs[it.seg].global
		var dot int32
		for x := 0; x < d; x++ {
			dot += int32(gv.codes[it.row*gv.cd+x]) * int32(qc[x])
		}
		scores[i] = gv.scales[it.row] * qsc[0] * float32(dot)
	}
	// The kept set must be the same (order of equal distances aside).
	var want []int
	for _, h := range model.TopK(scores, n) {
		want = append(want, kept[h.Index].n)
	}
	var gotN []int
	for _, c := range got {
		gotN = append(gotN, c.item)
		if c.seg != segs[0] && c.seg != segs[1] {
			t.Fatal("candidate without its segment")
		}
	}
	slices.Sort(want)
	slices.Sort(gotN)
	if !slices.Equal(gotN, want) {
		t.Fatalf("candidates differ from the brute-force selection:\n%v\n%v", gotN, want)
	}
}

// TestPrunedSearch searches with pruning: a global scoring returns the
// exact top items (the candidates are the best by global vector), and an
// alignment scoring returns only candidates, with exact scores.
func TestPrunedSearch(t *testing.T) {
	s := loadTest(t)
	m := testModel(t, "teran", 11, s.Captions)
	dir := t.TempDir()
	if _, err := Build(context.Background(), dir, m, collectionOf(s, 0, s.NumImages()), nil); err != nil {
		t.Fatal(err)
	}
	ix, err := Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	ctx := context.Background()
	q := s.Captions[17]
	exact, err := ix.SearchText(ctx, q, &SearchOptions{K: 5, Scoring: model.Global, Exact: true})
	if err != nil {
		t.Fatal(err)
	}
	pruned, err := ix.SearchText(ctx, q, &SearchOptions{K: 5, Scoring: model.Global, Candidates: 20})
	if err != nil {
		t.Fatal(err)
	}
	for i := range exact {
		if exact[i].Item != pruned[i].Item {
			t.Fatalf("global scoring with pruning: result %d is %d, exhaustive %d", i+1, pruned[i].Item, exact[i].Item)
		}
	}
	all, err := ix.SearchText(ctx, q, &SearchOptions{K: 100, Exact: true})
	if err != nil {
		t.Fatal(err)
	}
	exactScore := map[int]float32{}
	for _, r := range all {
		exactScore[r.Item] = r.Score
	}
	res, err := ix.SearchText(ctx, q, &SearchOptions{K: 10, Candidates: 30})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if d := r.Score - exactScore[r.Item]; d > 1e-5 || d < -1e-5 {
			t.Fatalf("pruned result %d: score %v, exact %v", r.Item, r.Score, exactScore[r.Item])
		}
	}
}

package eval

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
)

// tinySims is 3 images x 6 captions, 2 captions per image, with ties.
//
//	image 0 owns captions 0, 1; image 1 owns 2, 3; image 2 owns 4, 5.
var tinySims = &Matrix{Rows: 3, Cols: 6, Data: []float32{
	0.9, 0.5, 0.8, 0.2, 0.3, 0.0,
	0.8, 0.5, 0.4, 0.7, 0.5, 0.1,
	0.6, 0.2, 0.3, 0.4, 0.5, 0.6,
}}

// tinyRel is the 6 captions x 3 images relevance matrix for tinySims.
var tinyRel = &Matrix{Rows: 6, Cols: 3, Data: []float32{
	1.0, 0.5, 0.0,
	0.5, 0.0, 0.0,
	0.0, 1.0, 0.5,
	0.2, 1.0, 0.0,
	0.0, 0.0, 1.0,
	0.0, 0.3, 1.0,
}}

func TestRanksHandComputed(t *testing.T) {
	i2t, t2i, err := Ranks(tinySims, 2)
	if err != nil {
		t.Fatal(err)
	}
	// i2t, row by row:
	//   image 0: best own caption 0 (0.9), nothing higher         -> 0
	//   image 1: best own caption 3 (0.7), caption 0 (0.8) higher  -> 1
	//   image 2: best own caption 5 (0.6), caption 0 ties at 0.6
	//            with a smaller index, so it ranks first           -> 1
	wantI2T := []int{0, 1, 1}
	// t2i, column by column:
	//   caption 0: [.9 .8 .6], image 0 first                       -> 0
	//   caption 1: [.5 .5 .2], image 0 ties image 1, smaller index -> 0
	//   caption 2: [.8 .4 .3], image 0 beats image 1               -> 1
	//   caption 3: [.2 .7 .4]                                      -> 0
	//   caption 4: [.3 .5 .5], image 1 ties image 2 and wins       -> 1
	//   caption 5: [.0 .1 .6]                                      -> 0
	wantT2I := []int{0, 0, 1, 0, 1, 0}
	if !slices.Equal(i2t, wantI2T) {
		t.Errorf("i2t ranks = %v, want %v", i2t, wantI2T)
	}
	if !slices.Equal(t2i, wantT2I) {
		t.Errorf("t2i ranks = %v, want %v", t2i, wantT2I)
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		ranks []int
		want  Recall
	}{
		// [0 1 1]: one of three at rank 0; median 1 -> medr 2; mean 2/3.
		{[]int{0, 1, 1}, Recall{100.0 / 3, 100, 100, 2, 2.0/3 + 1}},
		// Even count: median of [0 0 0 0 1 1] = (0+0)/2 -> medr 1.
		{[]int{0, 0, 1, 0, 1, 0}, Recall{400.0 / 6, 100, 100, 1, 2.0/6 + 1}},
		// median (0+1)/2 = 0.5, floored -> medr 1.
		{[]int{1, 0}, Recall{50, 100, 100, 1, 1.5}},
		// [1 2 3 10]: median 2.5 -> medr 3; R@10 excludes rank 10.
		{[]int{10, 3, 1, 2}, Recall{0, 75, 75, 3, 5}},
		{[]int{4, 5, 9}, Recall{0, 100.0 / 3, 100, 6, 7}},
		{nil, Recall{}},
	}
	for _, tc := range tests {
		got := Summarize(tc.ranks)
		if !recallClose(got, tc.want) {
			t.Errorf("Summarize(%v) = %+v, want %+v", tc.ranks, got, tc.want)
		}
	}
}

func recallClose(a, b Recall) bool {
	c := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return c(a.R1, b.R1) && c(a.R5, b.R5) && c(a.R10, b.R10) && c(a.MedR, b.MedR) && c(a.MeanR, b.MeanR)
}

// g is the NDCG gain, and l2 the log2 discount, for the hand computations.
func g(x float64) float64  { return math.Exp2(x) - 1 }
func l2(r float64) float64 { return math.Log2(r) }

func TestEvaluateHandComputed(t *testing.T) {
	rep, err := Evaluate(tinySims, Options{CaptionsPerImage: 2, NDCGAt: 2, Relevances: []Relevance{{"r", tinyRel}}})
	if err != nil {
		t.Fatal(err)
	}
	wantI2T := Recall{100.0 / 3, 100, 100, 2, 2.0/3 + 1}
	wantT2I := Recall{400.0 / 6, 100, 100, 1, 2.0/6 + 1}
	if !recallClose(rep.I2T, wantI2T) || !recallClose(rep.T2I, wantT2I) {
		t.Errorf("recalls = %+v / %+v, want %+v / %+v", rep.I2T, rep.T2I, wantI2T, wantT2I)
	}
	if math.Abs(rep.RSum-500) > 1e-9 {
		t.Errorf("rsum = %v, want 500", rep.RSum)
	}
	// NDCG@2, text to image (relevances rel[c, :]; ranking by column c):
	//   c0: images 0,1 -> rel 1, .5 = ideal                         -> 1
	//   c1: images 0,1 (tie, 0 first) -> .5, 0 = ideal              -> 1
	//   c2: images 0,1 -> 0, 1; ideal 1, .5
	//   c3: images 1,2 -> 1, 0; ideal 1, .2
	//   c4: images 1,2 (tie, 1 first) -> 0, 1; ideal 1, 0
	//   c5: images 2,1 -> 1, .3 = ideal                             -> 1
	t2i := []float64{
		1, 1,
		(g(1) / l2(3)) / (g(1) + g(.5)/l2(3)),
		g(1) / (g(1) + g(.2)/l2(3)),
		(g(1) / l2(3)) / g(1),
		1,
	}
	// NDCG@2, image to text (relevances rel[:, i]; ranking by row i):
	//   i0: captions 0,2 -> 1, 0; column [1 .5 0 .2 0 0], ideal 1, .5
	//   i1: captions 0,3 -> .5, 1; column [.5 0 1 1 0 .3], ideal 1, 1
	//   i2: captions 0,5 (tie, 0 first) -> 0, 1; ideal 1, 1
	i2t := []float64{
		g(1) / (g(1) + g(.5)/l2(3)),
		(g(.5) + g(1)/l2(3)) / (g(1) + g(1)/l2(3)),
		(g(1) / l2(3)) / (g(1) + g(1)/l2(3)),
	}
	mean := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	got := rep.NDCG["r"]
	if math.Abs(got.T2I-mean(t2i)) > 1e-6 || math.Abs(got.I2T-mean(i2t)) > 1e-6 {
		t.Errorf("NDCG = %+v, want i2t %v t2i %v", got, mean(i2t), mean(t2i))
	}
}

func TestNDCGNonZeroI2T(t *testing.T) {
	// One caption per image. Image 0's relevance column is all zero, so its
	// i2t NDCG is 0 (IDCG = 0); image 1 retrieves its relevant caption.
	sims := &Matrix{Rows: 2, Cols: 2, Data: []float32{0.9, 0.1, 0.2, 0.8}}
	rel := &Matrix{Rows: 2, Cols: 2, Data: []float32{0, 0, 0, 1}}
	for _, tc := range []struct {
		nonZero  bool
		i2t, t2i float64
	}{
		{false, 0.5, 0.5},
		{true, 1, 0.5}, // i2t over non-zero only; t2i always over all
	} {
		rep, err := Evaluate(sims, Options{CaptionsPerImage: 1, NDCGAt: 1, NonZeroI2T: tc.nonZero, Relevances: []Relevance{{"r", rel}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := rep.NDCG["r"]; got.I2T != tc.i2t || got.T2I != tc.t2i {
			t.Errorf("NonZeroI2T=%v: NDCG = %+v, want i2t %v t2i %v", tc.nonZero, got, tc.i2t, tc.t2i)
		}
	}
}

// bruteRank ranks by a stable sort of descending scores.
func bruteOrder(v []float32) []int {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return v[idx[a]] > v[idx[b]] })
	return idx
}

func bruteNDCG(rel []float32, order []int, p int) float64 {
	k := min(p, len(order))
	dcg := 0.0
	for r, i := range order[:k] {
		dcg += gain(rel[i]) / math.Log2(float64(r+2))
	}
	ideal := slices.Clone(rel)
	sort.Slice(ideal, func(a, b int) bool { return ideal[a] > ideal[b] })
	idcg := 0.0
	for r, v := range ideal[:k] {
		idcg += gain(v) / math.Log2(float64(r+2))
	}
	if idcg == 0 {
		return 0
	}
	return dcg / idcg
}

func randomMatrix(r *rand.Rand, rows, cols, levels int) *Matrix {
	m := NewMatrix(rows, cols)
	for i := range m.Data {
		m.Data[i] = float32(r.IntN(levels)) / float32(levels)
	}
	return m
}

// TestRankFoldMatchesStableSort checks ranks, top-p and NDCG against a
// stable sort on random matrices with many ties.
func TestRankFoldMatchesStableSort(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct{ n, per, p, levels int }{
		{7, 5, 25, 4}, {40, 5, 25, 3}, {33, 2, 3, 1000}, {50, 5, 10, 2}, {64, 1, 5, 7},
	} {
		sims := randomMatrix(r, tc.n, tc.per*tc.n, tc.levels)
		rel := randomMatrix(r, tc.per*tc.n, tc.n, 3)
		fr := rankFold(sims.view(), sims.view(), []view{rel.view()}, tc.per, tc.p, 3)
		for i := 0; i < tc.n; i++ {
			row := sims.Row(i)
			order := bruteOrder(row)
			best := len(order)
			for pos, c := range order {
				if c/tc.per == i {
					best = min(best, pos)
				}
			}
			if fr.i2t[i] != best {
				t.Fatalf("%+v: i2t rank of image %d = %d, stable sort says %d", tc, i, fr.i2t[i], best)
			}
			col := make([]float32, tc.per*tc.n)
			for c := range col {
				col[c] = rel.At(c, i)
			}
			if want := bruteNDCG(col, order, tc.p); math.Abs(fr.i2tNDCG[0][i]-want) > 1e-12 {
				t.Fatalf("%+v: i2t NDCG of image %d = %v, brute force %v", tc, i, fr.i2tNDCG[0][i], want)
			}
		}
		for c := 0; c < tc.per*tc.n; c++ {
			col := make([]float32, tc.n)
			for i := range col {
				col[i] = sims.At(i, c)
			}
			order := bruteOrder(col)
			if want := slices.Index(order, c/tc.per); fr.t2i[c] != want {
				t.Fatalf("%+v: t2i rank of caption %d = %d, stable sort says %d", tc, c, fr.t2i[c], want)
			}
			if want := bruteNDCG(rel.Row(c), order, tc.p); math.Abs(fr.t2iNDCG[0][c]-want) > 1e-12 {
				t.Fatalf("%+v: t2i NDCG of caption %d = %v, brute force %v", tc, c, fr.t2iNDCG[0][c], want)
			}
		}
	}
}

// subMatrix copies a block of m.
func subMatrix(m *Matrix, r0, c0, rows, cols int) *Matrix {
	s := NewMatrix(rows, cols)
	for i := 0; i < rows; i++ {
		copy(s.Row(i), m.Data[(r0+i)*m.Cols+c0:(r0+i)*m.Cols+c0+cols])
	}
	return s
}

func TestProtocol1KFolds(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const fold, folds, per = 4, 3, 5
	n := fold * folds
	sims := randomMatrix(r, n, per*n, 50)
	rel := randomMatrix(r, per*n, n, 5)
	opts := Options{Protocol: Protocol1K, foldImages: fold, NDCGAt: 3, NonZeroI2T: true, Relevances: []Relevance{{"rouge-l", rel}}}
	rep, err := Evaluate(sims, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Folds) != folds {
		t.Fatalf("%d folds, want %d", len(rep.Folds), folds)
	}
	// Each fold is the evaluation of its diagonal block alone; the report
	// is their average.
	var sum Metrics
	for f := 0; f < folds; f++ {
		sub, err := Evaluate(subMatrix(sims, f*fold, f*per*fold, fold, per*fold), Options{
			NDCGAt: 3, NonZeroI2T: true,
			Relevances: []Relevance{{"rouge-l", subMatrix(rel, f*per*fold, f*fold, per*fold, fold)}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !metricsClose(rep.Folds[f], sub.Metrics) {
			t.Errorf("fold %d = %+v, evaluating its block alone gives %+v", f, rep.Folds[f], sub.Metrics)
		}
		sum.I2T.R1 += sub.I2T.R1 / folds
		sum.T2I.MedR += sub.T2I.MedR / folds
		sum.I2T.MeanR += sub.I2T.MeanR / folds
		sum.RSum += sub.RSum / folds
		s := sub.NDCG["rouge-l"]
		if sum.NDCG == nil {
			sum.NDCG = map[string]NDCGScore{}
		}
		a := sum.NDCG["rouge-l"]
		sum.NDCG["rouge-l"] = NDCGScore{a.I2T + s.I2T/folds, a.T2I + s.T2I/folds}
	}
	c := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	if !c(rep.I2T.R1, sum.I2T.R1) || !c(rep.T2I.MedR, sum.T2I.MedR) || !c(rep.I2T.MeanR, sum.I2T.MeanR) || !c(rep.RSum, sum.RSum) ||
		!c(rep.NDCG["rouge-l"].I2T, sum.NDCG["rouge-l"].I2T) || !c(rep.NDCG["rouge-l"].T2I, sum.NDCG["rouge-l"].T2I) {
		t.Errorf("1k report %+v is not the mean of the folds %+v", rep.Metrics, sum)
	}
}

func metricsClose(a, b Metrics) bool {
	if !recallClose(a.I2T, b.I2T) || !recallClose(a.T2I, b.T2I) || math.Abs(a.RSum-b.RSum) > 1e-9 || len(a.NDCG) != len(b.NDCG) {
		return false
	}
	for k, v := range a.NDCG {
		w := b.NDCG[k]
		if math.Abs(v.I2T-w.I2T) > 1e-12 || math.Abs(v.T2I-w.T2I) > 1e-12 {
			return false
		}
	}
	return true
}

func TestProtocolsDiffer(t *testing.T) {
	// Two folds of 2 images, 1 caption each. Within each fold the diagonal
	// wins, but the other fold's block scores higher: the 1k protocol sees
	// perfect retrieval, the whole matrix sees none at rank 0.
	sims := &Matrix{Rows: 4, Cols: 4, Data: []float32{
		0.5, 0.1, 0.9, 0.9,
		0.1, 0.5, 0.9, 0.9,
		0.9, 0.9, 0.5, 0.1,
		0.9, 0.9, 0.1, 0.5,
	}}
	k1, err := Evaluate(sims, Options{Protocol: Protocol1K, CaptionsPerImage: 1, foldImages: 2})
	if err != nil {
		t.Fatal(err)
	}
	all, err := Evaluate(sims, Options{Protocol: ProtocolAll, CaptionsPerImage: 1})
	if err != nil {
		t.Fatal(err)
	}
	if k1.I2T.R1 != 100 || k1.T2I.R1 != 100 || k1.RSum != 600 {
		t.Errorf("1k: %+v, want perfect recall", k1.Metrics)
	}
	if all.I2T.R1 != 0 || all.T2I.R1 != 0 || all.I2T.MedR != 3 {
		t.Errorf("all: %+v, want R@1 0 and medr 3", all.Metrics)
	}
}

func TestEvaluateErrors(t *testing.T) {
	ok := NewMatrix(3, 15)
	inf := float32(math.Inf(1))
	tests := []struct {
		name string
		sims *Matrix
		opts Options
		want string
	}{
		{"shape", NewMatrix(3, 14), Options{}, "shape (3, 14): 3 images need 15 captions"},
		{"transposed", NewMatrix(15, 3), Options{}, "looks transposed"},
		{"5k size", ok, Options{Protocol: Protocol5K}, "5k needs 5000 images, the matrix has 3"},
		{"1k size", ok, Options{Protocol: Protocol1K}, "the matrix has 3 images, not a multiple of 1000"},
		{"relevance shape", ok, Options{Relevances: []Relevance{{"rouge-l", NewMatrix(3, 15)}}}, "relevance rouge-l has shape (3, 15), want (15 captions, 3 images)"},
		{"relevance -1", ok, Options{Relevances: []Relevance{{"spice", &Matrix{15, 3, append(make([]float32, 44), -1)}}}}, "relevance spice has -1 at [14, 2]"},
		{"NaN", &Matrix{1, 5, []float32{0, 0, float32(math.NaN()), 0, 0}}, Options{}, "NaN at [0, 2]"},
		{"+Inf", &Matrix{1, 5, []float32{0, 0, 0, float32(math.Inf(1)), 0}}, Options{}, "+Inf at [0, 3]"},
		{"all +Inf", &Matrix{1, 5, []float32{inf, inf, inf, inf, inf}}, Options{}, "+Inf at [0, 0] (image 0, caption 0): want finite"},
		{"-Inf", &Matrix{1, 5, []float32{0, -inf, 0, 0, 0}}, Options{}, "-Inf at [0, 1]"},
		{"protocol", ok, Options{Protocol: "2k"}, "unknown protocol"},
	}
	for _, tc := range tests {
		_, err := Evaluate(tc.sims, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

func TestReportOutput(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	sims := randomMatrix(r, 6, 30, 100)
	rep, err := Evaluate(sims, Options{Protocol: Protocol1K, foldImages: 3, Relevances: []Relevance{
		{"spice", randomMatrix(r, 30, 6, 4)}, {"rouge-l", randomMatrix(r, 30, 6, 4)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var tab bytes.Buffer
	if err := rep.WriteTable(&tab); err != nil {
		t.Fatal(err)
	}
	out := tab.String()
	for _, s := range []string{"protocol 1k: 6 images, 30 captions, 2 folds of 3 images", "R@1", "medr", "rsum", "NDCG rouge-l", "NDCG spice", "fold 1", "fold 2", "mean"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
	if strings.Index(out, "NDCG rouge-l") > strings.Index(out, "NDCG spice") {
		t.Errorf("ROUGE-L should come before SPICE:\n%s", out)
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(js.String(), "\n"); n != 1 {
		t.Errorf("JSON has %d lines, want 1", n)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"protocol", "images", "captions", "i2t", "t2i", "rsum", "ndcg", "ndcg_p", "folds"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, js.String())
		}
	}
	if got := back["ndcg"].(map[string]any)["spice"].(map[string]any)["t2i"]; got != rep.NDCG["spice"].T2I {
		t.Errorf("JSON ndcg.spice.t2i = %v, want %v", got, rep.NDCG["spice"].T2I)
	}
}

func TestAlignmentAccuracy(t *testing.T) {
	// Caption A: 3 tokens x 3 regions. Token 0's best region is 2 (correct),
	// token 1's best is region 0 (wrong: correct is 1), token 2 is not
	// annotated.
	a := AlignItem{Regions: 3, Scores: []float32{
		0.1, 0.2, 0.9,
		0.8, 0.5, 0.1,
		0.3, 0.3, 0.3,
	}, Words: []AnnotatedWord{{0, []int{2}}, {1, []int{1}}, {2, nil}}}
	// Caption B: region 0 is masked out (padding), so token 0's best valid
	// region is 1 (correct); token 1 ties regions 1 and 2, the first wins
	// (correct is 2: wrong).
	b := AlignItem{Regions: 3, RegionMask: []bool{false, true, true}, Scores: []float32{
		9, 0.5, 0.4,
		0, 0.7, 0.7,
	}, Words: []AnnotatedWord{{0, []int{1, 2}}, {1, []int{2}}}}
	// Caption C: a NaN never wins.
	c := AlignItem{Regions: 2, Scores: []float32{float32(math.NaN()), 0.1}, Words: []AnnotatedWord{{0, []int{1}}}}
	tests := []struct {
		items []AlignItem
		acc   float64
		n     int
	}{
		{[]AlignItem{a}, 0.5, 2},
		{[]AlignItem{b}, 0.5, 2},
		{[]AlignItem{a, b, c}, 3.0 / 5, 5},
		{nil, 0, 0},
	}
	for i, tc := range tests {
		acc, n, err := AlignmentAccuracy(tc.items)
		if err != nil || acc != tc.acc || n != tc.n {
			t.Errorf("case %d: AlignmentAccuracy = %v, %d, %v; want %v, %d", i, acc, n, err, tc.acc, tc.n)
		}
	}
	bad := []AlignItem{
		{Regions: 2, Scores: []float32{1, 2, 3}},
		{Regions: 2, Scores: []float32{1, 2}, Words: []AnnotatedWord{{1, []int{0}}}},
		{Regions: 2, Scores: []float32{1, 2}, Words: []AnnotatedWord{{0, []int{2}}}},
		{Regions: 2, Scores: []float32{1, 2}, RegionMask: []bool{true}},
	}
	for i, it := range bad {
		if _, _, err := AlignmentAccuracy([]AlignItem{it}); err == nil {
			t.Errorf("bad item %d: want an error", i)
		}
	}
}

package eval

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xmr-project/xmr/eval/evaltest"
	"github.com/xmr-project/xmr/internal/countdown"
)

func TestRougeLHandChecked(t *testing.T) {
	tests := []struct {
		name string
		cand string
		refs []string
		want float64
	}{
		// LCS "a man a horse" = 4 of 5 both ways: P = R = 0.8, and F = P
		// when P = R.
		{"equal P and R", "a man riding a horse", []string{"a man rides a horse"}, 0.8},
		// LCS "a man on a horse" = 5: P = 5/5 = 1, R = 5/8.
		// F = 2.44 * 1 * 0.625 / (0.625 + 1.44) = 1.525 / 2.065.
		{"P > R", "a man on a horse", []string{"a man is riding on a brown horse"}, 1.525 / 2.065},
		// P and R are maximised separately: ref 1 gives P = 2/2 (R = 2/7),
		// ref 2 gives R = 1/1 (P = 1/2), so F = F(1, 1) = 1.
		{"separate maxima", "a dog", []string{"a dog runs fast on the grass", "dog"}, 1},
		{"no overlap", "red car", []string{"a blue bike", "green tree"}, 0},
		// Lower-cased, but punctuation stays: "dog." != "dog"; LCS 1 of 2
		// both ways.
		{"case and punctuation", "A Dog.", []string{"a dog"}, 0.5},
		// split(" ") keeps an empty token: [a, "", dog] vs [a, dog], LCS 2:
		// P = 2/3, R = 1; F = 2.44 * 2/3 / (1 + 1.44 * 2/3) = (4.88/3) / 1.96.
		{"double space", "a  dog", []string{"a dog"}, 4.88 / 3 / 1.96},
		// The caption itself among the references gives 1.
		{"self", "two cats on a sofa", []string{"a dog", "two cats on a sofa"}, 1},
		// Repeated words: LCS("a a b", "a b a b") = 3 ("a a b"): P = 1,
		// R = 3/4; F = 2.44 * 0.75 / (0.75 + 1.44) = 1.83 / 2.19.
		{"repeats", "a a b", []string{"a b a b"}, 1.83 / 2.19},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := RougeL(tc.cand, tc.refs)
			if math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("RougeL(%q, %q) = %.15f, want %.15f", tc.cand, tc.refs, got, tc.want)
			}
		})
	}
}

func TestLCSBitsMatchesDP(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for it := 0; it < 20000; it++ {
		alpha := 1 + r.IntN(8)
		if it%3 == 0 {
			alpha = 1 + r.IntN(100)
		}
		m := 1 + r.IntN(64)
		a := make([]int32, r.IntN(80))
		b := make([]int32, m)
		for i := range a {
			a[i] = int32(r.IntN(alpha))
		}
		match := map[int32]uint64{}
		for k := range b {
			b[k] = int32(r.IntN(alpha))
			match[b[k]] |= 1 << k
		}
		if got, want := lcsBits(a, match, m), must(lcsDP(context.Background(), a, b)); got != want {
			t.Fatalf("lcsBits(%v, %v) = %d, DP says %d", a, b, got, want)
		}
	}
}

// randomCaptions draws captions from a tiny vocabulary so that LCS values
// vary, with some long captions (more than 64 tokens, and groups that do not
// fit one word), empty tokens and upper case.
func randomCaptions(r *rand.Rand, n int) []string {
	vocab := []string{"a", "A", "dog", "cat", "on", "the", "mat", "red", "Red", "", "dog.", "sits", "runs"}
	caps := make([]string, n)
	for i := range caps {
		l := 1 + r.IntN(14)
		switch r.IntN(20) {
		case 0:
			l = 30 + r.IntN(30)
		case 1:
			l = 60 + r.IntN(20)
		}
		ws := make([]string, l)
		for k := range ws {
			ws[k] = vocab[r.IntN(len(vocab))]
		}
		caps[i] = strings.Join(ws, " ")
	}
	return caps
}

func TestRougeLScorerMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, per := range []int{1, 3, 5} {
		caps := randomCaptions(r, per*40)
		sc, err := RougeLMetric{}.Prepare(context.Background(), caps, per)
		if err != nil {
			t.Fatal(err)
		}
		rs := sc.(RowScorer)
		nImg := len(caps) / per
		rows := make([]float32, 7*nImg)
		for i0 := 0; i0 < len(caps); i0 += 7 {
			i1 := min(i0+7, len(caps))
			if err := rs.ScoreRows(context.Background(), i0, i1, rows[:(i1-i0)*nImg]); err != nil {
				t.Fatal(err)
			}
			for i := i0; i < i1; i++ {
				for j := 0; j < nImg; j++ {
					want := float32(RougeL(caps[i], caps[per*j:per*j+per]))
					if got := sc.Score(i, j); got != want {
						t.Fatalf("per %d: Score(%d, %d) = %v, reference %v\ncand %q\nrefs %q", per, i, j, got, want, caps[i], caps[per*j:per*j+per])
					}
					if got := rows[(i-i0)*nImg+j]; got != want {
						t.Fatalf("per %d: ScoreRows [%d, %d] = %v, reference %v", per, i, j, got, want)
					}
				}
			}
		}
	}
}

func TestRougeLPrepareErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := (RougeLMetric{}).Prepare(ctx, []string{"a", "b", "c"}, 2); err == nil {
		t.Error("3 captions with 2 per image: want an error")
	}
	if _, err := (RougeLMetric{}).Prepare(ctx, nil, 5); err == nil {
		t.Error("no captions: want an error")
	}
	if _, err := (RougeLMetric{}).Prepare(ctx, []string{"a"}, 0); err == nil {
		t.Error("0 per image: want an error")
	}
}

func BenchmarkRougeLScoreRows(b *testing.B) {
	caps := evaltest.Captions(1000, 5, 1)
	sc, err := RougeLMetric{}.Prepare(context.Background(), caps, 5)
	if err != nil {
		b.Fatal(err)
	}
	rs := sc.(RowScorer)
	const rows = 200
	out := make([]float32, rows*1000)
	b.ResetTimer()
	for b.Loop() {
		if err := rs.ScoreRows(context.Background(), 0, rows, out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(rows*1000), "ns/pair")
}

func BenchmarkRougeLScorePair(b *testing.B) {
	caps := evaltest.Captions(1000, 5, 1)
	sc, err := RougeLMetric{}.Prepare(context.Background(), caps, 5)
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		sc.Score(i%5000, (i*7)%1000)
		i++
	}
}

func BenchmarkRougeLReference(b *testing.B) {
	caps := evaltest.Captions(1000, 5, 1)
	i := 0
	for b.Loop() {
		j := (i * 7) % 1000
		RougeL(caps[i%5000], caps[5*j:5*j+5])
		i++
	}
}

func must(n int, err error) int {
	if err != nil {
		panic(err)
	}
	return n
}

// megabyteCaptions returns two images of five captions each, the first
// caption a line of about a megabyte (200,000 words): ROUGE-L of that
// caption against its own image fills a table of 4*10^10 cells, minutes of
// work without a check of the context inside one pair.
func megabyteCaptions() []string {
	words := []string{"a", "man", "dog", "red", "on", "the", "with", "ball", "runs", "in"}
	r := rand.New(rand.NewPCG(7, 7))
	var b strings.Builder
	for k := 0; k < 200_000; k++ {
		if k > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	caps := []string{b.String()}
	for len(caps) < 10 {
		caps = append(caps, "a man with a dog in the park")
	}
	return caps
}

// TestRougeLScoreRowsCancelInsidePair checks that ScoreRows stops inside
// the quadratic LCS of one pair of long captions: with the context done at
// its first, second or fifth check, it returns context.Canceled (without
// the checks inside the pair it would run for minutes).
func TestRougeLScoreRowsCancelInsidePair(t *testing.T) {
	caps := megabyteCaptions()
	sc, err := RougeLMetric{}.Prepare(context.Background(), caps, 5)
	if err != nil {
		t.Fatal(err)
	}
	rs := sc.(RowScorer)
	out := make([]float32, 2)
	for _, n := range []int{0, 1, 4} {
		if err := rs.ScoreRows(countdown.New(n), 0, 1, out); !errors.Is(err, context.Canceled) {
			t.Fatalf("context done at check %d: err = %v, want context.Canceled", n+1, err)
		}
	}
	// The short captions still score at once.
	if err := rs.ScoreRows(context.Background(), 5, 10, make([]float32, 10)); err != nil {
		t.Fatal(err)
	}
}

// TestComputeRelevanceCancelMegabyteCaption is "xmr relevance --metric
// rouge-l" interrupted on a caption file with a 1 MB line: it returns the
// context's error and writes no output (the partial file holds no row).
func TestComputeRelevanceCancelMegabyteCaption(t *testing.T) {
	caps := megabyteCaptions()
	out := filepath.Join(t.TempDir(), "rel.bin")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(50*time.Millisecond, cancel)
	err := ComputeRelevance(ctx, RougeLMetric{}, caps, 5, out, RelevanceOptions{Quiet: true, Workers: 2})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s exists after an interrupted run (stat: %v)", out, err)
	}
	if st, err := os.Stat(out + ".partial"); err != nil || st.Size() != 0 {
		t.Fatalf("partial file: %v, %v; want an empty one", st, err)
	}
}

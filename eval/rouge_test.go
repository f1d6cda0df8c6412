package eval

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/eval/evaltest"
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
		if got, want := lcsBits(a, match, m), lcsDP(a, b); got != want {
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
			rs.ScoreRows(i0, i1, rows[:(i1-i0)*nImg])
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
		rs.ScoreRows(0, rows, out)
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

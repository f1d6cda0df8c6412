package model

import (
	"math"
	"testing"
)

// TestBankOffset checks the streamed offsets against the formula computed
// directly, for temperatures where a naive sum of exponentials would
// overflow, and that a non-finite score is left out.
func TestBankOffset(t *testing.T) {
	for _, tc := range []struct {
		name   string
		scores []float32
		beta   float64
	}{
		{"small", []float32{0.1, -0.3, 0.7, 0.2}, 2},
		{"one", []float32{1.5}, 2},
		{"large", []float32{400, 390, 401, -50}, 3},
		{"cold", []float32{0.5, 0.25, -1}, 0.01},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hi := math.Inf(-1)
			for _, v := range tc.scores {
				hi = math.Max(hi, tc.beta*float64(v))
			}
			var s float64
			for _, v := range tc.scores {
				s += math.Exp(tc.beta*float64(v) - hi)
			}
			want := (hi + math.Log(s/float64(len(tc.scores)))) / tc.beta
			got := BankOffset(tc.scores, tc.beta)
			if math.Abs(float64(got)-want) > 1e-4*math.Max(1, math.Abs(want)) {
				t.Fatalf("BankOffset = %v, want %v", got, want)
			}
			withNaN := append([]float32{float32(math.NaN()), float32(math.Inf(1))}, tc.scores...)
			if g2 := BankOffset(withNaN, tc.beta); g2 != got {
				t.Fatalf("with non-finite scores: %v, want %v", g2, got)
			}
		})
	}
	// A cold bank (beta -> 0) gives the mean, a hot one the maximum.
	sc := []float32{1, 2, 6}
	if got := BankOffset(sc, 1e-6); math.Abs(float64(got)-3) > 1e-3 {
		t.Fatalf("beta 1e-6: %v, want the mean 3", got)
	}
	if got := BankOffset(sc, 1e3); math.Abs(float64(got)-6) > 1e-2 {
		t.Fatalf("beta 1e3: %v, want the maximum 6", got)
	}
}

// TestBankAccumulator checks items accumulated together, a query at a
// time, against each item's BankOffset, and the zero offset of an item
// that no query scored.
func TestBankAccumulator(t *testing.T) {
	queries := [][]float32{{0.9, 0.1, float32(math.NaN())}, {0.8, -0.2, float32(math.NaN())}, {1.1, 0.3, float32(math.NaN())}}
	a := NewBankAccumulator(3, DefaultBankBeta)
	for _, q := range queries {
		a.Add(q)
	}
	if a.Queries() != 3 {
		t.Fatalf("Queries = %d, want 3", a.Queries())
	}
	got := a.Offsets()
	for i := 0; i < 2; i++ {
		col := []float32{queries[0][i], queries[1][i], queries[2][i]}
		if want := BankOffset(col, DefaultBankBeta); math.Abs(float64(got[i]-want)) > 1e-6 {
			t.Fatalf("item %d: %v, want %v", i, got[i], want)
		}
	}
	if got[0] <= got[1] {
		t.Fatalf("the item every query scores higher has the lower offset: %v", got)
	}
	if got[2] != 0 {
		t.Fatalf("item scored by no query: offset %v, want 0", got[2])
	}
}

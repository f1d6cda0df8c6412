package model

import "math"

// DefaultBankBeta is the inverse temperature of a query bank's inverted
// softmax (BankOffset) in units of one standardised score: a fusion's
// scores, sums of its members' standardised scores times their weights,
// are divided by the weights' sum first. Measured on Flickr8k val with
// the built-in photo model (docs/photos.md, "A bank of queries").
const DefaultBankBeta = 2

// BankAccumulator computes the query-bank offsets of a set of items
// (BankOffset) one bank query at a time, in memory that grows with the
// items and not with the bank: a streamed log-sum-exp for each item.
type BankAccumulator struct {
	beta float64
	max  []float64
	sum  []float64
	cnt  []int32
	n    int
}

// NewBankAccumulator returns an accumulator for items items at inverse
// temperature beta (> 0).
func NewBankAccumulator(items int, beta float64) *BankAccumulator {
	a := &BankAccumulator{beta: beta, max: make([]float64, items), sum: make([]float64, items), cnt: make([]int32, items)}
	for i := range a.max {
		a.max[i] = math.Inf(-1)
	}
	return a
}

// Add takes one bank query's scores of every item, in item order.
// Non-finite scores are skipped.
func (a *BankAccumulator) Add(scores []float32) {
	for i, v := range scores {
		x := a.beta * float64(v)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		a.cnt[i]++
		switch m := a.max[i]; {
		case x <= m:
			a.sum[i] += math.Exp(x - m)
		default:
			a.sum[i] = a.sum[i]*math.Exp(m-x) + 1
			a.max[i] = x
		}
	}
	a.n++
}

// Queries is the number of bank queries added.
func (a *BankAccumulator) Queries() int { return a.n }

// Offsets returns each item's offset: (1/beta) log of the mean over the
// bank queries of exp(beta * score), a soft maximum of how well the item
// scores for queries that are not about it. An item with no finite score
// gets 0.
func (a *BankAccumulator) Offsets() []float32 {
	out := make([]float32, len(a.max))
	for i, m := range a.max {
		if a.cnt[i] > 0 {
			out[i] = float32((m + math.Log(a.sum[i]) - math.Log(float64(a.cnt[i]))) / a.beta)
		}
	}
	return out
}

// BankOffset returns one item's query-bank offset from its scores under a
// bank of queries (BankAccumulator.Offsets for one item). Subtracting it
// from the item's score for a query ranks by an inverted softmax (Smith
// et al. 2017; querybank normalisation, Bogolin et al. 2022): a "hub",
// an item that many queries score high whatever they say, is pushed down,
// and an item that few queries reach is lifted.
func BankOffset(scores []float32, beta float64) float32 {
	a := NewBankAccumulator(1, beta)
	one := make([]float32, 1)
	for _, v := range scores {
		one[0] = v
		a.Add(one)
	}
	return a.Offsets()[0]
}

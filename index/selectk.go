package index

import "math"

// topSet returns the indices of the k largest of scores (all of them when
// k >= len(scores)), in no particular order; among equal scores the lower
// index is larger, as model.TopK breaks ties, and a NaN counts as -Inf.
// It selects in expected linear time (quickselect), where model.TopK's
// heap, which also sorts, costs k log k: the pruned searches keep tens of
// thousands of items in a stage whose order the next stage ignores.
func topSet(scores []float32, k int) []int {
	n := len(scores)
	k = max(0, min(k, n))
	if k == n || k == 0 {
		idx := make([]int, k)
		for i := range idx {
			idx[i] = i
		}
		return idx
	}
	type item struct {
		s float32
		i int32
	}
	its := make([]item, n)
	for i, s := range scores {
		if s != s {
			s = float32(math.Inf(-1))
		}
		its[i] = item{s, int32(i)}
	}
	// before reports whether a ranks above b.
	before := func(a, b item) bool { return a.s > b.s || (a.s == b.s && a.i < b.i) }
	lo, hi := 0, n-1 // its[lo:hi+1] holds the k-th item; those left of lo rank above it
	seed := uint64(n)*0x9e3779b97f4a7c15 + uint64(k)
	for lo < hi {
		seed = seed*6364136223846793005 + 1442695040888963407
		p := lo + int((seed>>33)%uint64(hi-lo+1))
		its[p], its[hi] = its[hi], its[p]
		pivot := its[hi]
		store := lo
		for i := lo; i < hi; i++ {
			if before(its[i], pivot) {
				its[i], its[store] = its[store], its[i]
				store++
			}
		}
		its[store], its[hi] = its[hi], its[store]
		if store == k-1 {
			break
		} else if store < k-1 {
			lo = store + 1
		} else {
			hi = store - 1
		}
	}
	out := make([]int, k)
	for j := range out {
		out[j] = int(its[j].i)
	}
	return out
}

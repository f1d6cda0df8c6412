package index

import (
	"math/bits"
	"runtime"
	"sync"

	"github.com/xmr-project/xmr/model"
)

// This file holds candidate pruning for large collections: a first stage
// that never touches the region or word vectors. Each item's global vector
// is kept twice in its segment: as a sketch (its sign bits: 32 bytes at
// d = 256) and as int8 codes. A search ranks every item by the Hamming
// distance of its sketch to the query's, rescores the closest with the
// int8 global codes, and scores only the best of those with the
// fine-grained alignment (int8 codes, then float32 for the final ranking).
// How much recall each number of candidates costs is measured by
// xmr bench search and recorded in docs/benchmarks.md, "search".

// sketchWords returns the number of 64-bit words of a sketch of d bits.
func sketchWords(d int) int { return (d + 63) / 64 }

// sketches returns the sign bits of n vectors of d (bit k of vector i set
// when element k is positive), sketchWords(d) words each.
func sketches(vecs []float32, d int) []uint64 {
	n, w := len(vecs)/d, sketchWords(d)
	out := make([]uint64, n*w)
	for i := 0; i < n; i++ {
		for k, x := range vecs[i*d : (i+1)*d] {
			if x > 0 {
				out[i*w+k/64] |= 1 << (k % 64)
			}
		}
	}
	return out
}

// globalView is the compressed form of a segment's global vectors.
type globalView struct {
	sketch []uint64 // items x words
	words  int
	cd     int
	codes  []int8    // items x cd
	scales []float32 // per item
}

// candidate is an item of a search's first stage: its number among the
// items of the searched segments and its segment and row.
type candidate struct {
	item, row int
	seg       *segment
}

// globalCandidates returns the n items of segs whose global vectors are
// closest to g: the sketches of all items select the closest 8n (at least
// 4096) by Hamming distance, whose int8 global codes then rank them by
// dot product. Ties keep the lower item number first.
func globalCandidates(segs []*segment, g []float32, d, n int) []candidate {
	qs := sketches(g, d)
	total := 0
	for _, s := range segs {
		total += s.header.Items
	}
	keep := min(total, max(8*n, 4096))
	// Hamming distances (0..d) of every item, then a counting selection of
	// the closest keep.
	dist := make([]uint16, total)
	var wg sync.WaitGroup
	base := 0
	for _, s := range segs {
		gv, lo := s.global, base
		items := s.header.Items
		workers := runtime.GOMAXPROCS(0)
		per := (items + workers - 1) / workers
		for w := 0; w < workers; w++ {
			a, b := w*per, min((w+1)*per, items)
			if a >= b {
				break
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := a; i < b; i++ {
					row := gv.sketch[i*gv.words : (i+1)*gv.words]
					var h int
					for k, x := range row {
						h += bits.OnesCount64(x ^ qs[k])
					}
					dist[lo+i] = uint16(h)
				}
			}()
		}
		base += items
	}
	wg.Wait()
	hist := make([]int, d+2)
	for _, h := range dist {
		hist[h]++
	}
	cut, below := 0, 0 // items with distance < cut are all kept
	for cut <= d && below+hist[cut] <= keep {
		below += hist[cut]
		cut++
	}
	atCut := keep - below // how many of distance == cut to keep
	var first []candidate
	item := 0
	for _, s := range segs {
		for r := 0; r < s.header.Items; r, item = r+1, item+1 {
			h := int(dist[item])
			if h < cut || (h == cut && atCut > 0) {
				if h == cut {
					atCut--
				}
				first = append(first, candidate{item: item, row: r, seg: s})
			}
		}
	}
	// Second stage: int8 dot products of the global vectors.
	codes, scales := quantize(g, d)
	qc := codes[:d]
	scores := make([]float32, len(first))
	for i, c := range first {
		gv := c.seg.global
		row := gv.codes[c.row*gv.cd : c.row*gv.cd+d]
		var s int32
		for k, x := range row {
			s += int32(x) * int32(qc[k])
		}
		scores[i] = gv.scales[c.row] * scales[0] * float32(s)
	}
	top := model.TopK(scores, n)
	out := make([]candidate, len(top))
	for i, h := range top {
		out[i] = first[h.Index]
	}
	return out
}

// decode returns global vector i from its int8 code.
func (g *globalView) decode(i, d int) []float32 {
	out := make([]float32, d)
	sc := g.scales[i]
	for k, c := range g.codes[i*g.cd : i*g.cd+d] {
		out[k] = sc * float32(c)
	}
	return out
}

package index

import (
	"context"
	"fmt"
	"slices"

	"github.com/xmr-project/xmr/model"
)

// This file holds the first stage of a pruned fine-grained search: an
// inverted file over the region or word vectors, as IVF indexes, XTR and
// PLAID find candidates for late interaction.
//
// A Writer trains one quantizer per modality on the first batch it writes
// (spherical k-means on a sample: cells of unit-length centroids) and
// every segment it writes files its vectors under it: each vector goes to
// its best cell, found through groups of cells (the centroids clustered
// again) so that a vector is compared with the cells of its best few
// groups, not all of them. A segment keeps the centroids and, cell by
// cell, its vectors' numbers and items.
//
// A query scores its vectors against the centroids of each quantizer once
// and probes each query vector's best cells. The vectors filed there (a
// region of an object lies in the object's cell) are scored on their int8
// codes, and each item met is rated by the alignment of the query with
// those of its vectors alone: a lower bound of its score that is exact
// when each query vector's best match lies in a probed cell. Only the best
// items by that rating are scored on all their codes.

// ivfView is a segment's inverted file: the cells' centroids (unit
// length; id names them) and, for each cell c, the numbers of its vectors
// vecs[off[c]:off[c+1]] (ascending) and their items.
type ivfView struct {
	cells     int
	id        quantizerID
	centroids []float32 // cells x dim
	off       []int64   // cells + 1
	vecs      []int32   // every vector once, cell by cell
	items     []int32   // the item of each entry of vecs
}

// quantizerID names the centroids of an inverted file, which the segments
// of one index share: their count and their section's CRC-32C. A query
// probes each quantizer's cells once.
type quantizerID struct {
	crc   uint32
	cells int
}

// check reports lists that are out of order or name vectors or items
// outside a segment with these offsets: a corrupt file that the
// checksums, when skipped, did not catch.
func (v *ivfView) check(offsets []int) error {
	nv := offsets[len(offsets)-1]
	if v.off[0] != 0 || v.off[v.cells] != int64(len(v.vecs)) || len(v.vecs) != nv {
		return fmt.Errorf("section %q: lists span [%d, %d) of %d entries for %d vectors", secIVFOffsets, v.off[0], v.off[v.cells], len(v.vecs), nv)
	}
	for c := 0; c < v.cells; c++ {
		if v.off[c+1] < v.off[c] {
			return fmt.Errorf("section %q: list %d ends before it starts", secIVFOffsets, c)
		}
		prev := int32(-1)
		for k := v.off[c]; k < v.off[c+1]; k++ {
			x, it := v.vecs[k], v.items[k]
			if x <= prev || int(x) >= nv {
				return fmt.Errorf("section %q: list %d holds vector %d after %d; vectors must ascend below %d", secIVFVectors, c, x, prev, nv)
			}
			if it < 0 || int(it) >= len(offsets)-1 || int(x) < offsets[it] || int(x) >= offsets[it+1] {
				return fmt.Errorf("section %q: vector %d is not of item %d", secIVFItems, x, it)
			}
			prev = x
		}
	}
	// Every vector once: the lists hold as many entries as vectors, so a
	// vector listed twice (under two cells) leaves another unlisted, and
	// a search that prunes by the lists never meets it.
	seen := make([]uint64, (nv+63)/64)
	for _, x := range v.vecs {
		if seen[x/64]&(1<<(x%64)) != 0 {
			return fmt.Errorf("section %q: vector %d is listed twice, so another is in no list: corrupt or forged file", secIVFVectors, x)
		}
		seen[x/64] |= 1 << (x % 64)
	}
	return nil
}

// AutoProbes is the default number of cells a pruned search probes per
// query vector.
const AutoProbes = 1

// ivfCandidates returns the n items of segs (all with an inverted file)
// rated best for q: the items with a vector in the q.probes best cells of
// some query vector, rated by the alignment of the query with those
// vectors (their int8 codes). Ties keep the lower item number first.
func ivfCandidates(ctx context.Context, segs []*segment, q *query, n int) ([]candidate, error) {
	d, probes := q.d, q.probes
	nq := len(q.vecs) / d
	pf, pq := q.floats, q.codes
	probed := map[quantizerID][]int{} // the probed cells of each quantizer, ascending
	for _, seg := range segs {
		v := seg.ivf
		if _, ok := probed[v.id]; ok {
			continue
		}
		table := make([]float32, v.cells*nq) // cell x query vector
		var tmp []float32
		dotsInto(v.centroids, d, pf, table, &tmp)
		col := make([]float32, v.cells)
		on := make([]bool, v.cells)
		for w := range nq {
			for c := range col {
				col[c] = table[c*nq+w]
			}
			for _, h := range model.TopK(col, min(probes, v.cells)) {
				on[h.Index] = true
			}
		}
		var cells []int
		for c, ok := range on {
			if ok {
				cells = append(cells, c)
			}
		}
		probed[v.id] = cells
	}
	res := make([]rated, len(segs))
	err := eachSegment(ctx, segs, func(si int, seg *segment) {
		res[si].items, res[si].scores = rateProbed(seg, probed[seg.ivf.id], pq, q.s, q.text)
	})
	if err != nil {
		return nil, err
	}
	all, who := flatten(segs, res)
	top := model.TopK(all, min(n, len(all)))
	out := make([]candidate, len(top))
	for i, h := range top {
		out[i] = who(h.Index)
	}
	return out, nil
}

// allIVF reports whether every segment has an inverted file.
func allIVF(segs []*segment) bool {
	for _, s := range segs {
		if s.ivf == nil {
			return false
		}
	}
	return true
}

// rateProbed scores the query q against the vectors of seg filed in cells
// and returns the items met (ascending) and their rating: the pooled
// alignment of q with those of their vectors.
func rateProbed(seg *segment, cells []int, q *packedQuery, s model.Scoring, queryIsText bool) ([]int32, []float32) {
	v, c := seg.ivf, seg.codes
	nq, cd := q.n, c.cd
	total := 0
	for _, cell := range cells {
		total += int(v.off[cell+1] - v.off[cell])
	}
	type entry struct{ item, at int32 }
	ents := make([]entry, 0, total)
	sims := make([]float32, 0, total*nq)
	const chunk = 128
	buf := make([]int8, chunk*cd)
	scales := make([]float32, chunk)
	var dots []int32
	for _, cell := range cells {
		for lo := v.off[cell]; lo < v.off[cell+1]; lo += chunk {
			hi := min(lo+chunk, v.off[cell+1])
			rows := int(hi - lo)
			for r := range rows {
				x := int(v.vecs[lo+int64(r)])
				copy(buf[r*cd:(r+1)*cd], c.codes[x*cd:(x+1)*cd])
				scales[r] = c.scales[x]
				ents = append(ents, entry{item: v.items[lo+int64(r)], at: int32(len(ents))})
			}
			at := len(sims)
			sims = sims[:at+rows*nq]
			int8Sims(buf[:rows*cd], scales[:rows], cd, q, &dots, sims[at:])
		}
	}
	slices.SortFunc(ents, func(a, b entry) int { return int(a.item - b.item) })
	var items []int32
	var scores []float32
	var rows []float32
	for i := 0; i < len(ents); {
		j := i
		rows = rows[:0]
		for ; j < len(ents) && ents[j].item == ents[i].item; j++ {
			rows = append(rows, sims[int(ents[j].at)*nq:int(ents[j].at+1)*nq]...)
		}
		items = append(items, ents[i].item)
		scores = append(scores, pool(rows, j-i, nq, s, queryIsText))
		i = j
	}
	return items, scores
}

// rated is the items of one segment that a pruned search met (ascending)
// and their ratings.
type rated struct {
	items  []int32
	scores []float32
}

// flatten returns the ratings of the rated items of every segment (res[i]
// of segs[i]) end to end, and who, the candidate at a place among them
// (item numbers running on from one segment to the next). Candidates are
// made only for the places asked for: a search at ten million images
// rates hundreds of thousands of items, and a slice of them all was 7 MB
// of fresh memory a query, which this machine's page faults made a
// stall of up to 100 ms.
func flatten(segs []*segment, res []rated) (all []float32, who func(h int) candidate) {
	total := 0
	for _, r := range res {
		total += len(r.items)
	}
	all = make([]float32, 0, total)
	starts := make([]int, len(segs)+1) // where each segment's ratings start in all
	bases := make([]int, len(segs))    // each segment's first item number
	base := 0
	for si, seg := range segs {
		starts[si], bases[si] = len(all), base
		all = append(all, res[si].scores...)
		base += seg.header.Items
	}
	starts[len(segs)] = len(all)
	who = func(h int) candidate {
		at, _ := slices.BinarySearch(starts, h+1)
		si := at - 1 // the last segment starting at or before h
		it := int(res[si].items[h-starts[si]])
		return candidate{item: bases[si] + it, row: it, seg: segs[si]}
	}
	return all, who
}

package spice

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// Scorer answers SPICE between every prepared caption and every image's
// merged reference graph. It is safe for concurrent use.
//
// Layout: every distinct candidate tuple of the corpus (a tuple of lemma ids,
// one per variant when a candidate element merged synonyms) has a tuple id.
// Caption i keeps its tuple ids sorted. Image j keeps, sorted, the ids of
// every corpus tuple that matches one of its reference tuples (the synonym
// expansion, restricted to tuples that occur), each with the reference
// tuples it matches. Score(i, j) merges the two short lists; the tuples
// found form a small bipartite graph whose maximum matching is the number of
// matched tuples.
type Scorer struct {
	v     *vocab
	cand  []*igraph // per caption
	ref   []*igraph // per image
	nCand []uint32  // tuples per caption
	nRef  []uint32  // tuples per image

	capStart []uint32 // caption i's keys are capKeys[capStart[i]:capStart[i+1]]
	capKeys  []uint32 // tuple ids, sorted per caption
	capOwner []uint32 // candidate tuple index of each key

	imgStart []uint32 // image j's keys are imgKeys[imgStart[j]:imgStart[j+1]]
	imgKeys  []uint32 // tuple ids, sorted per image
	refStart []uint32 // key k matches reference tuples refs[refStart[k]:refStart[k+1]]
	refs     []uint32

	capVariants []bool // caption i has a tuple with several ids

	// Inverted index for ScoreRows: the image keys holding tuple id t are
	// post[postStart[t]:postStart[t+1]].
	postStart []uint32
	post      []posting
	maxRef    int // largest nRef
}

// posting locates one image key: image j and the key's global index.
type posting struct{ img, key uint32 }

// NumCaptions returns the number of prepared captions.
func (s *Scorer) NumCaptions() int { return len(s.nCand) }

// NumImages returns the number of images.
func (s *Scorer) NumImages() int { return len(s.nRef) }

// CaptionGraph returns the scene graph of caption i.
func (s *Scorer) CaptionGraph(i int) *Graph { return s.cand[i].export() }

// ImageGraph returns the merged scene graph of image j's captions.
func (s *Scorer) ImageGraph(j int) *Graph { return s.ref[j].export() }

// tuple ids pack (kind, a, b, c) with 20 bits per element.
const (
	idBits = 20
	maxIDs = 1 << idBits
)

func packTuple(kind tupleKind, a, b, c int32) uint64 {
	return uint64(kind)<<(3*idBits) | uint64(a)<<(2*idBits) | uint64(b)<<idBits | uint64(c)
}

// PrepareScorer parses captions (perImage consecutive captions per image)
// once, in parallel over all cores, and builds the Scorer.
func (m *Metric) PrepareScorer(ctx context.Context, captions []string, perImage int) (*Scorer, error) {
	if perImage <= 0 {
		return nil, fmt.Errorf("spice: perImage %d, want > 0", perImage)
	}
	if len(captions)%perImage != 0 {
		return nil, fmt.Errorf("spice: %d captions is not a multiple of %d per image", len(captions), perImage)
	}
	nCap, nImg := len(captions), len(captions)/perImage

	// 1. Parse every caption.
	raw := make([][]rawTuple, nCap)
	if err := parallel(ctx, nCap, func(i int) { raw[i] = parseCaption(m.lex, captions[i]) }); err != nil {
		return nil, err
	}

	// 2. Number the lemmas.
	v := newVocab(m.db)
	ids := make([][]idTuple, nCap)
	for i, r := range raw {
		ids[i] = toIDs(v, r)
		raw[i] = nil
	}
	for r := range v.words {
		if len(v.words[r]) >= maxIDs {
			return nil, errors.New("spice: vocabulary too large")
		}
	}

	// 3. Scene graphs: one per caption, one merged per image.
	s := &Scorer{v: v, cand: make([]*igraph, nCap), ref: make([]*igraph, nImg)}
	if err := parallel(ctx, nCap, func(i int) { s.cand[i] = buildGraph(v, ids[i]) }); err != nil {
		return nil, err
	}
	if err := parallel(ctx, nImg, func(j int) { s.ref[j] = buildGraph(v, ids[j*perImage:(j+1)*perImage]...) }); err != nil {
		return nil, err
	}
	ids = nil

	// 4. Tuple ids of the candidates, with their variants.
	dict := map[uint64]uint32{}
	s.nCand = make([]uint32, nCap)
	s.capStart = make([]uint32, nCap+1)
	s.capVariants = make([]bool, nCap)
	type keyOwner struct{ key, owner uint32 }
	var buf []keyOwner
	for i, g := range s.cand {
		ts := g.tuples()
		s.nCand[i] = uint32(len(ts))
		buf = buf[:0]
		for k := range ts {
			t := &ts[k]
			n := 0
			forVariants(t, func(a, b, c int32) {
				key := packTuple(t.kind, a, b, c)
				id, ok := dict[key]
				if !ok {
					id = uint32(len(dict))
					dict[key] = id
				}
				buf = append(buf, keyOwner{id, uint32(k)})
				n++
			})
			if n > 1 {
				s.capVariants[i] = true
			}
		}
		slices.SortFunc(buf, func(x, y keyOwner) int { return cmp.Compare(x.key, y.key) })
		for _, ko := range buf {
			s.capKeys = append(s.capKeys, ko.key)
			s.capOwner = append(s.capOwner, ko.owner)
		}
		s.capStart[i+1] = uint32(len(s.capKeys))
	}

	// 5. Synonym neighbourhoods within the vocabulary of each role.
	var nbr [numRoles][][]int32
	for r := range nbr {
		nbr[r] = neighbours(v.syn[r])
	}

	// 6. Each image's expansion: the corpus tuples that match its tuples.
	type imgOut struct {
		keys, refStart, refs []uint32
	}
	outs := make([]imgOut, nImg)
	s.nRef = make([]uint32, nImg)
	if err := parallel(ctx, nImg, func(j int) {
		ts := s.ref[j].tuples()
		s.nRef[j] = uint32(len(ts))
		var pairs []keyOwner
		var exp [3][]int32
		for k := range ts {
			t := &ts[k]
			ar := arity(t.kind)
			for p := 0; p < ar; p++ {
				exp[p] = expand(nbr[tupleRoles[t.kind][p]], t.c[p].ids, exp[p][:0])
			}
			lookup := func(a, b, c int32) {
				if id, ok := dict[packTuple(t.kind, a, b, c)]; ok {
					pairs = append(pairs, keyOwner{id, uint32(k)})
				}
			}
			switch ar {
			case 1:
				for _, a := range exp[0] {
					lookup(a, 0, 0)
				}
			case 2:
				for _, a := range exp[0] {
					for _, b := range exp[1] {
						lookup(a, b, 0)
					}
				}
			case 3:
				for _, a := range exp[0] {
					for _, b := range exp[1] {
						for _, c := range exp[2] {
							lookup(a, b, c)
						}
					}
				}
			}
		}
		slices.SortFunc(pairs, func(x, y keyOwner) int {
			return cmp.Or(cmp.Compare(x.key, y.key), cmp.Compare(x.owner, y.owner))
		})
		o := &outs[j]
		for k := 0; k < len(pairs); {
			key := pairs[k].key
			o.keys = append(o.keys, key)
			o.refStart = append(o.refStart, uint32(len(o.refs)))
			for ; k < len(pairs) && pairs[k].key == key; k++ {
				o.refs = append(o.refs, pairs[k].owner) // (key, owner) pairs are distinct
			}
		}
	}); err != nil {
		return nil, err
	}
	s.imgStart = make([]uint32, nImg+1)
	for j := range outs {
		o := &outs[j]
		base := uint32(len(s.refs))
		for k := range o.keys {
			s.imgKeys = append(s.imgKeys, o.keys[k])
			s.refStart = append(s.refStart, base+o.refStart[k])
		}
		s.refs = append(s.refs, o.refs...)
		s.imgStart[j+1] = uint32(len(s.imgKeys))
		outs[j] = imgOut{}
	}
	s.refStart = append(s.refStart, uint32(len(s.refs)))

	// 7. Postings by tuple id, for ScoreRows.
	s.postStart = make([]uint32, len(dict)+1)
	for _, t := range s.imgKeys {
		s.postStart[t+1]++
	}
	for t := 1; t < len(s.postStart); t++ {
		s.postStart[t] += s.postStart[t-1]
	}
	s.post = make([]posting, len(s.imgKeys))
	fill := slices.Clone(s.postStart[:len(dict)])
	for j := 0; j < nImg; j++ {
		for k := s.imgStart[j]; k < s.imgStart[j+1]; k++ {
			t := s.imgKeys[k]
			s.post[fill[t]] = posting{uint32(j), k}
			fill[t]++
		}
		s.maxRef = max(s.maxRef, int(s.nRef[j]))
	}
	return s, nil
}

// forVariants calls fn with every combination of the lemma ids of t's
// elements (one combination unless a candidate element merged synonyms).
func forVariants(t *ituple, fn func(a, b, c int32)) {
	ar := arity(t.kind)
	var ids [3][]int32
	zero := []int32{0}
	for p := 0; p < 3; p++ {
		if p < ar {
			ids[p] = t.c[p].ids
		} else {
			ids[p] = zero
		}
	}
	for _, a := range ids[0] {
		for _, b := range ids[1] {
			for _, c := range ids[2] {
				fn(a, b, c)
			}
		}
	}
}

// neighbours returns, for each lemma id of a role, the sorted ids of the
// lemmas it matches: itself and those sharing a synonym key.
func neighbours(syn [][]uint64) [][]int32 {
	byKey := map[uint64][]int32{}
	for id, keys := range syn {
		for _, k := range keys {
			byKey[k] = append(byKey[k], int32(id))
		}
	}
	out := make([][]int32, len(syn))
	var tmp []int32
	for id, keys := range syn {
		tmp = append(tmp[:0], int32(id))
		for _, k := range keys {
			tmp = append(tmp, byKey[k]...)
		}
		slices.Sort(tmp)
		out[id] = slices.Clone(slices.Compact(tmp))
	}
	return out
}

// expand returns the union of the neighbourhoods of ids, sorted.
func expand(nbr [][]int32, ids []int32, dst []int32) []int32 {
	if len(ids) == 1 {
		return append(dst, nbr[ids[0]]...)
	}
	for _, id := range ids {
		dst = append(dst, nbr[id]...)
	}
	slices.Sort(dst)
	return slices.Compact(dst)
}

// parallel runs fn(0..n-1) on all cores, stopping early when ctx is done.
func parallel(ctx context.Context, n int, fn func(i int)) error {
	workers := min(runtime.GOMAXPROCS(0), n)
	var next atomic.Int64
	var wg sync.WaitGroup
	const chunk = 64
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				lo := int(next.Add(chunk)) - chunk
				if lo >= n {
					return
				}
				for i := lo; i < min(lo+chunk, n); i++ {
					fn(i)
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("spice: %w", err)
	}
	return nil
}

// Score returns SPICE F1 of caption i against image j's captions.
func (s *Scorer) Score(i, j int) float32 {
	tp := s.matched(i, j)
	if tp == 0 {
		return 0
	}
	return float32(2*tp) / float32(s.nCand[i]+s.nRef[j])
}

// Stats returns the full match statistics of caption i against image j.
func (s *Scorer) Stats(i, j int) Stats {
	return makeStats(s.matched(i, j), int(s.nCand[i]), int(s.nRef[j]))
}

// ScoreRows writes Score(i, j) to out[(i-i0)*NumImages()+j] for the rows
// i0 <= i < i1 and every image j. It walks the postings of each caption's
// tuples, touching only images that share a tuple, and is much faster than
// calling Score for every pair. Concurrent calls on disjoint rows are safe.
// It checks ctx before each row and returns ctx's error, out partly
// written, once ctx is done.
func (s *Scorer) ScoreRows(ctx context.Context, i0, i1 int, out []float32) error {
	nImg := len(s.nRef)
	if len(out) < (i1-i0)*nImg {
		panic(fmt.Sprintf("spice: ScoreRows(%d, %d) needs %d outputs, got %d", i0, i1, (i1-i0)*nImg, len(out)))
	}
	// Per image: hits so far, a bitset of the reference tuples hit when every
	// hit matched exactly one of the first 64*words tuples, or "slow" (-1).
	words := min((s.maxRef+63)/64, 8)
	hits := make([]int32, nImg)
	seen := make([]uint64, nImg*words)
	var touched []uint32
	for i := i0; i < i1; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		row := out[(i-i0)*nImg : (i-i0+1)*nImg]
		clear(row)
		touched = touched[:0]
		variants := s.capVariants[i]
		for _, t := range s.capKeys[s.capStart[i]:s.capStart[i+1]] {
			for _, p := range s.post[s.postStart[t]:s.postStart[t+1]] {
				j := p.img
				if hits[j] == 0 {
					touched = append(touched, j)
				}
				if hits[j] < 0 {
					continue
				}
				hits[j]++
				lo, hi := s.refStart[p.key], s.refStart[p.key+1]
				r := int(s.refs[lo])
				if variants || hi-lo != 1 || r >= 64*words {
					hits[j] = -1
					continue
				}
				seen[int(j)*words+r/64] |= 1 << (r % 64)
			}
		}
		nc := s.nCand[i]
		for _, j := range touched {
			var tp int
			if hits[j] < 0 {
				tp = s.matched(i, int(j))
			} else {
				for _, w := range seen[int(j)*words : int(j+1)*words] {
					tp += popcount(w)
				}
			}
			if tp > 0 {
				row[j] = float32(2*tp) / float32(nc+s.nRef[j])
			}
			hits[j] = 0
			clear(seen[int(j)*words : int(j+1)*words])
		}
	}
	return nil
}

// matched returns the size of a maximum matching between caption i's tuples
// and image j's reference tuples. The common case, where the caption has no
// variant ids and every key found matches a single reference tuple, is the
// number of distinct reference tuples found; anything else goes to
// matchedSlow.
func (s *Scorer) matched(i, j int) int {
	a := s.capKeys[s.capStart[i]:s.capStart[i+1]]
	b := s.imgKeys[s.imgStart[j]:s.imgStart[j+1]]
	if len(a) == 0 || len(b) == 0 || a[len(a)-1] < b[0] || b[len(b)-1] < a[0] {
		return 0
	}
	if s.capVariants[i] {
		return s.matchedSlow(i, j)
	}
	base := s.imgStart[j]
	var seen [8]uint64
	n := 0
	for ia, ib := 0, 0; ia < len(a) && ib < len(b); {
		x, y := a[ia], b[ib]
		if x == y {
			k := base + uint32(ib)
			lo := s.refStart[k]
			r := s.refs[lo]
			if s.refStart[k+1]-lo != 1 || r >= 512 {
				return s.matchedSlow(i, j)
			}
			w, bit := r/64, uint64(1)<<(r%64)
			if seen[w]&bit == 0 {
				seen[w] |= bit
				n++
			}
		}
		ia += b2i(x <= y)
		ib += b2i(y <= x)
	}
	return n
}

// matchedSlow is matched for any case: it collects, per candidate tuple,
// the reference tuples its keys match, and runs augmenting paths.
func (s *Scorer) matchedSlow(i, j int) int {
	a := s.capKeys[s.capStart[i]:s.capStart[i+1]]
	b := s.imgKeys[s.imgStart[j]:s.imgStart[j+1]]
	adj := map[uint32][]int{}
	var order []uint32
	base := s.imgStart[j]
	for ia, ib := 0, 0; ia < len(a) && ib < len(b); {
		switch {
		case a[ia] < b[ib]:
			ia++
		case a[ia] > b[ib]:
			ib++
		default:
			o := s.capOwner[s.capStart[i]+uint32(ia)]
			if _, ok := adj[o]; !ok {
				order = append(order, o)
			}
			k := base + uint32(ib)
			for _, r := range s.refs[s.refStart[k]:s.refStart[k+1]] {
				if !slices.Contains(adj[o], int(r)) {
					adj[o] = append(adj[o], int(r))
				}
			}
			ia++
			ib++
		}
	}
	lists := make([][]int, len(order))
	for k, o := range order {
		lists[k] = adj[o]
	}
	return maxMatching(lists, int(s.nRef[j]))
}

func popcount(x uint64) int { return bits.OnesCount64(x) }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

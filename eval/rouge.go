package eval

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"sync"
)

// RougeLBeta is the beta of ROUGE-L's F-measure in the COCO caption
// evaluation code (weighting recall over precision).
const RougeLBeta = 1.2

// RougeLTokens splits a caption as the COCO caption evaluation rouge.py (and
// TERAN's copy of it) does: lower-case, then split on every single space.
// Nothing else is done: punctuation stays attached to words, and two
// consecutive spaces give an empty token, as Python's str.split(" ") does.
// The caption is used as given, without PTB tokenization.
func RougeLTokens(caption string) []string {
	return strings.Split(strings.ToLower(caption), " ")
}

// RougeL returns the ROUGE-L F-score of candidate against the reference
// captions refs, exactly as rouge.py's Rouge.score: for each reference the
// LCS length over RougeLTokens; P = lcs/len(candidate) and R =
// lcs/len(reference), maximised separately over the references; F =
// (1+b^2) P R / (R + b^2 P) with b = 1.2, and 0 when P or R is 0. It is the
// slow, obvious version (dynamic programming); the relevance computation
// uses the bit-parallel one and gives the same values.
func RougeL(candidate string, refs []string) float64 {
	c := RougeLTokens(candidate)
	var acc rougeAcc
	for _, r := range refs {
		t := RougeLTokens(r)
		n, _ := lcsDP(context.Background(), c, t)
		acc.add(n, len(t))
	}
	return acc.fscore(len(c))
}

// lcsCheckCells is how many cells of the dynamic programming table lcsDP
// fills between two checks of its context: about a millisecond of work.
const lcsCheckCells = 1 << 20

// lcsDP is the textbook O(len(a) len(b)) longest common subsequence length.
// Two captions of a megabyte each make a table of 10^11 cells, so it checks
// ctx about every lcsCheckCells cells and returns ctx's error once ctx is
// done.
func lcsDP[T comparable](ctx context.Context, a, b []T) (int, error) {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	every := max(1, lcsCheckCells/max(1, len(b)))
	for i := range a {
		if i%every == every-1 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(prev[j+1], cur[j])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)], nil
}

// lcsBits returns the LCS length of a and a pattern b of at most 64 symbols
// with the bit-vector algorithm of Allison-Dix / Hyyrö: match[x] has bit k
// set when b[k] == x; V starts with the low len(b) bits set, and each
// symbol of a updates it with U = V & match, V = (V + U) | (V - U); the LCS
// length is the number of zero bits among the low len(b).
func lcsBits(a []int32, match map[int32]uint64, m int) int {
	mask := ^uint64(0) >> (64 - m)
	v := mask
	for _, x := range a {
		u := v & match[x]
		v = ((v + u) | (v - u)) & mask
	}
	return m - bits.OnesCount64(v)
}

// rougeAcc accumulates the per-reference LCS lengths of one candidate: the
// best LCS (for the precision) and the best ratio lcs/len (the recall). Its
// zero value is ready.
type rougeAcc struct {
	maxLCS int
	r      float64
}

func (a *rougeAcc) add(lcs, refLen int) {
	a.maxLCS = max(a.maxLCS, lcs)
	a.r = max(a.r, ratio(lcs, refLen))
}

// fscore returns the ROUGE-L F-score of a candidate of candLen tokens.
func (a *rougeAcc) fscore(candLen int) float64 {
	if a.maxLCS == 0 {
		return 0
	}
	return rougeF(ratio(a.maxLCS, candLen), a.r)
}

// ratio returns float64(a)/float64(b), 0 <= a <= b, b > 0.
func ratio(a, b int) float64 {
	if b <= 64 {
		return quotients[b][a]
	}
	return float64(a) / float64(b)
}

// beta^2 and 1+beta^2 computed in float64 as Python computes 1.2**2 and
// 1 + 1.2**2 (variables, not exact constant arithmetic).
var (
	rougeBeta         float64 = RougeLBeta
	rougeBeta2                = rougeBeta * rougeBeta
	rougeOnePlusBeta2         = 1 + rougeBeta2
)

// rougeF is F = (1+b^2) P R / (R + b^2 P) for P, R > 0, in rouge.py's
// operation order; the explicit conversions forbid fused multiply-adds.
func rougeF(p, r float64) float64 {
	num := float64(float64(rougeOnePlusBeta2*p) * r)
	den := r + float64(rougeBeta2*p)
	return num / den
}

// quotients[b][a] is float64(a)/float64(b) for 0 <= a <= b <= 64: the
// ratios lcs/len, looked up instead of divided in the hot loop (the same
// correctly rounded values as rouge.py's divisions).
var quotients = func() *[65][65]float64 {
	var q [65][65]float64
	for b := 1; b <= 64; b++ {
		for a := 0; a <= b; a++ {
			q[b][a] = float64(a) / float64(b)
		}
	}
	return &q
}()

// RougeLMetric is the ROUGE-L relevance tau of TERAN: the ROUGE-L F-score
// of a caption against the captions of an image (RougeL), the caption
// itself included when the image is its own. It is registered as "rouge-l".
type RougeLMetric struct{}

// Name returns "rouge-l".
func (RougeLMetric) Name() string { return "rouge-l" }

func init() {
	RegisterMetric("rouge-l", func() (Metric, error) { return RougeLMetric{}, nil })
}

// Prepare tokenizes all captions once, maps words to integer ids and, per
// image, packs its reference captions into 64-bit pattern words with the
// per-word match masks of the bit-parallel LCS. The returned Scorer also
// implements RowScorer.
func (RougeLMetric) Prepare(ctx context.Context, captions []string, perImage int) (Scorer, error) {
	if perImage <= 0 {
		return nil, fmt.Errorf("rouge-l: captions per image = %d, want > 0", perImage)
	}
	if len(captions) == 0 || len(captions)%perImage != 0 {
		return nil, fmt.Errorf("rouge-l: %d captions is not a positive multiple of %d per image", len(captions), perImage)
	}
	s := &rougeScorer{per: perImage, nImg: len(captions) / perImage}
	ids := map[string]int32{}
	s.off = make([]int32, 1, len(captions)+1)
	for _, c := range captions {
		for _, w := range RougeLTokens(c) {
			id, ok := ids[w]
			if !ok {
				id = int32(len(ids))
				ids[w] = id
			}
			s.tok = append(s.tok, id)
		}
		s.off = append(s.off, int32(len(s.tok)))
	}
	s.vocab = len(ids)
	s.imgs = make([]rougeImage, s.nImg)
	for j := range s.imgs {
		if j%1024 == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("rouge-l: %w", ctx.Err())
		}
		s.imgs[j] = s.packImage(j)
		s.maxGroups = max(s.maxGroups, len(s.imgs[j].groups))
	}
	s.pool.New = func() any {
		p := make([]uint64, max(1, s.maxGroups)*s.vocab)
		return &p
	}
	return s, nil
}

// rougeScorer holds the tokenized captions and the packed references.
type rougeScorer struct {
	per, nImg int
	vocab     int
	tok       []int32 // word ids of all captions, back to back
	off       []int32 // caption c is tok[off[c]:off[c+1]]
	imgs      []rougeImage
	maxGroups int
	pool      sync.Pool // *[]uint64 scratch: maxGroups planes of vocab match masks
}

// rougeImage is the reference side of one image. Its captions are packed
// into groups: each group is one 64-bit word holding several references as
// bit segments separated by a guard bit, so that one run of the
// bit-parallel LCS handles them all (the guard stops the carry of the
// addition from leaking into the next segment). References longer than 64
// tokens go to long and use the dynamic programming LCS.
type rougeImage struct {
	groups []rougeGroup
	long   []int32  // caption indices
	words  []int32  // distinct word ids of the packed references, sorted
	masks  []uint64 // masks[k*len(groups)+g]: match mask of words[k] in group g
}

type rougeGroup struct {
	pm   uint64 // bits of all segments
	segs []rougeSeg
}

type rougeSeg struct {
	mask uint64
	n    int // reference length in tokens
}

func (s *rougeScorer) caption(c int) []int32 { return s.tok[s.off[c]:s.off[c+1]] }

func (s *rougeScorer) packImage(j int) rougeImage {
	var img rougeImage
	type place struct{ c, g, shift int }
	var places []place
	used := 0 // bits used in the last group
	for c := j * s.per; c < (j+1)*s.per; c++ {
		n := len(s.caption(c))
		switch {
		case n > 64:
			img.long = append(img.long, int32(c))
			continue
		case len(img.groups) == 0 || used+1+n > 64:
			img.groups = append(img.groups, rougeGroup{})
			used = 0
		default:
			used++ // guard bit
		}
		g := &img.groups[len(img.groups)-1]
		seg := rougeSeg{mask: (^uint64(0) >> (64 - n)) << used, n: n}
		g.segs = append(g.segs, seg)
		g.pm |= seg.mask
		places = append(places, place{c, len(img.groups) - 1, used})
		used += n
	}
	for _, p := range places {
		img.words = append(img.words, s.caption(p.c)...)
	}
	slices.Sort(img.words)
	img.words = slices.Compact(img.words)
	G := len(img.groups)
	img.masks = make([]uint64, len(img.words)*G)
	for _, p := range places {
		for t, w := range s.caption(p.c) {
			k, _ := slices.BinarySearch(img.words, w)
			img.masks[k*G+p.g] |= 1 << (p.shift + t)
		}
	}
	return img
}

// Score returns ROUGE-L of caption i against the captions of image j.
func (s *rougeScorer) Score(i, j int) float32 {
	img := &s.imgs[j]
	cand := s.caption(i)
	G := len(img.groups)
	var acc rougeAcc
	for g := range img.groups {
		grp := &img.groups[g]
		v := grp.pm
		for _, w := range cand {
			var m uint64
			if k, ok := slices.BinarySearch(img.words, w); ok {
				m = img.masks[k*G+g]
			}
			u := v & m
			v = ((v + u) | (v ^ u)) & grp.pm
		}
		for _, sg := range grp.segs {
			acc.add(sg.n-bits.OnesCount64(v&sg.mask), sg.n)
		}
	}
	for _, c := range img.long {
		ref := s.caption(int(c))
		n, _ := lcsDP(context.Background(), cand, ref)
		acc.add(n, len(ref))
	}
	return float32(acc.fscore(len(cand)))
}

// ScoreRows fills out[(i-i0)*nImages+j] with Score(i, j) for the captions
// i in [i0, i1) and all images j. Image by image, it scatters the image's
// match masks into dense tables indexed by word id, so that the inner loop
// over candidate words is a table load and four bit operations (U = V & M;
// V - U equals V ^ U since U is a subset of V). It checks ctx before each
// image and inside the quadratic LCS of long captions, and returns ctx's
// error, out partly written, once ctx is done.
func (s *rougeScorer) ScoreRows(ctx context.Context, i0, i1 int, out []float32) error {
	pp := s.pool.Get().(*[]uint64)
	defer s.pool.Put(pp)
	planes := *pp
	nImg := s.nImg
	for j := range s.imgs {
		if err := ctx.Err(); err != nil {
			return err
		}
		img := &s.imgs[j]
		G := len(img.groups)
		for k, w := range img.words {
			for g := 0; g < G; g++ {
				planes[g*s.vocab+int(w)] = img.masks[k*G+g]
			}
		}
		var err error
		if G == 1 && len(img.long) == 0 {
			s.rowsOneGroup(i0, i1, &img.groups[0], planes[:s.vocab], out[j:], nImg)
		} else {
			err = s.rowsGeneral(ctx, i0, i1, img, planes, out[j:], nImg)
		}
		for _, w := range img.words {
			for g := 0; g < G; g++ {
				planes[g*s.vocab+int(w)] = 0
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// rowsOneGroup is ScoreRows' loop for an image whose references all fit in
// one 64-bit word (the common case for COCO: 5 x ~10.5 tokens + 4 guards).
// out[(i-i0)*stride] receives caption i's score.
func (s *rougeScorer) rowsOneGroup(i0, i1 int, grp *rougeGroup, plane []uint64, out []float32, stride int) {
	pm := grp.pm
	for i := i0; i < i1; i++ {
		cand := s.tok[s.off[i]:s.off[i+1]]
		v := pm
		for _, w := range cand {
			u := v & plane[w]
			v = ((v + u) | (v ^ u)) & pm
		}
		out[(i-i0)*stride] = oneGroupScore(grp, v, len(cand))
	}
}

// oneGroupScore turns the final bit vector of a candidate of candLen
// tokens into its ROUGE-L score.
func oneGroupScore(grp *rougeGroup, v uint64, candLen int) float32 {
	if v == grp.pm { // no match at all: every LCS is 0
		return 0
	}
	var acc rougeAcc
	for _, sg := range grp.segs {
		acc.add(sg.n-bits.OnesCount64(v&sg.mask), sg.n)
	}
	return float32(acc.fscore(candLen))
}

// rowsGeneral handles images with several groups or long references.
func (s *rougeScorer) rowsGeneral(ctx context.Context, i0, i1 int, img *rougeImage, planes []uint64, out []float32, stride int) error {
	for i := i0; i < i1; i++ {
		cand := s.tok[s.off[i]:s.off[i+1]]
		var acc rougeAcc
		for g := range img.groups {
			grp := &img.groups[g]
			plane := planes[g*s.vocab : (g+1)*s.vocab]
			v := grp.pm
			for _, w := range cand {
				u := v & plane[w]
				v = ((v + u) | (v ^ u)) & grp.pm
			}
			for _, sg := range grp.segs {
				acc.add(sg.n-bits.OnesCount64(v&sg.mask), sg.n)
			}
		}
		for _, c := range img.long {
			ref := s.caption(int(c))
			n, err := lcsDP(ctx, cand, ref)
			if err != nil {
				return err
			}
			acc.add(n, len(ref))
		}
		out[(i-i0)*stride] = float32(acc.fscore(len(cand)))
	}
	return nil
}

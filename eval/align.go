package eval

import (
	"fmt"
	"math"
	"slices"
)

// AnnotatedWord is a word with ground-truth grounding: the token position in
// its caption's alignment matrix and the regions it refers to (for example
// the detections overlapping a Flickr30k Entities box).
type AnnotatedWord struct {
	Token   int   // row of the alignment matrix
	Correct []int // correct region indices (columns); empty means not annotated
}

// AlignItem is one caption's word-region alignment matrix with its
// annotated words. The matrix comes from any model (TERAN's cosine
// alignments, attention weights): only the argmax over regions matters.
type AlignItem struct {
	// Scores is the tokens x Regions matrix, row-major.
	Scores  []float32
	Regions int
	// RegionMask, if not nil, has one entry per region; false marks a
	// region (padding, TERAN's empty slot 0) that can never be chosen.
	RegionMask []bool
	Words      []AnnotatedWord
}

// AlignmentAccuracy returns the share (in [0, 1]) of annotated words whose
// top-scoring valid region is one of their correct regions, and the number
// n of annotated words counted (words with no correct region are skipped).
// The top region is the first maximum (lowest index on ties); NaN scores
// never win; a word with no valid region counts as wrong. acc is 0 when n
// is 0. Malformed items (a token or region out of range, a matrix whose
// size is not a multiple of Regions) are errors naming the item.
func AlignmentAccuracy(items []AlignItem) (acc float64, n int, err error) {
	hits := 0
	for k, it := range items {
		if it.Regions <= 0 || len(it.Scores)%it.Regions != 0 {
			return 0, 0, fmt.Errorf("alignment item %d: %d scores do not form rows of %d regions", k, len(it.Scores), it.Regions)
		}
		if it.RegionMask != nil && len(it.RegionMask) != it.Regions {
			return 0, 0, fmt.Errorf("alignment item %d: region mask has %d entries for %d regions", k, len(it.RegionMask), it.Regions)
		}
		tokens := len(it.Scores) / it.Regions
		for _, w := range it.Words {
			if len(w.Correct) == 0 {
				continue
			}
			if w.Token < 0 || w.Token >= tokens {
				return 0, 0, fmt.Errorf("alignment item %d: token %d out of range [0, %d)", k, w.Token, tokens)
			}
			for _, c := range w.Correct {
				if c < 0 || c >= it.Regions {
					return 0, 0, fmt.Errorf("alignment item %d: token %d: correct region %d out of range [0, %d)", k, w.Token, c, it.Regions)
				}
			}
			n++
			row := it.Scores[w.Token*it.Regions : (w.Token+1)*it.Regions]
			best, bestV := -1, float32(math.Inf(-1))
			for r, v := range row {
				if it.RegionMask != nil && !it.RegionMask[r] {
					continue
				}
				if best < 0 && !math.IsNaN(float64(v)) || v > bestV {
					best, bestV = r, v
				}
			}
			if best >= 0 && slices.Contains(w.Correct, best) {
				hits++
			}
		}
	}
	if n == 0 {
		return 0, 0, nil
	}
	return float64(hits) / float64(n), n, nil
}

package model

import (
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/text"
)

// WordAlignments returns, for caption c of the text bank and image i of the
// image bank, the alignment matrix (tokens x region slots, row-major) of
// cosine similarities.
func WordAlignments(images, texts *Bank, i, c int) []float32 {
	l1, l2, e := images.L, texts.L, images.E
	out := make([]float32, l2*l1)
	for t := 0; t < l2; t++ {
		w := texts.Vecs[(c*l2+t)*e : (c*l2+t+1)*e]
		for r := 0; r < l1; r++ {
			v := images.Vecs[(i*l1+r)*e : (i*l1+r+1)*e]
			var s float32
			for k := range w {
				s += w[k] * v[k]
			}
			out[t*l1+r] = s
		}
	}
	return out
}

// AlignmentItems builds the word-region alignment accuracy items of every
// grounded caption: each annotated word's first token must point to its
// object's region. Region r of the data is slot r+1 of the model (slot 0 is
// the empty/I-CLS slot, never a valid answer). batches are the tokenizer
// batches of the captions, in order, as TextsOf returns them.
func AlignmentItems(images, texts *Bank, grounding []data.Grounding, batches []*text.Batch) []eval.AlignItem {
	var items []eval.AlignItem
	c := 0
	for _, b := range batches {
		for row := 0; row < b.B; row, c = row+1, c+1 {
			if c >= len(grounding) {
				return items
			}
			g := grounding[c]
			if g.Image >= images.N {
				continue
			}
			words := b.Words[row*b.T : (row+1)*b.T]
			mask := make([]bool, images.L)
			for r := range mask {
				mask[r] = images.Mask[g.Image*images.L+r] != 0
			}
			it := eval.AlignItem{Scores: WordAlignments(images, texts, g.Image, c), Regions: images.L, RegionMask: mask}
			for _, w := range g.Words {
				tok := -1
				for t, wi := range words {
					if int(wi) == w.Index {
						tok = t
						break
					}
				}
				if tok < 0 {
					continue // truncated away
				}
				var correct []int
				for _, r := range w.Correct() {
					if r+1 < images.L {
						correct = append(correct, r+1)
					}
				}
				it.Words = append(it.Words, eval.AnnotatedWord{Token: tok, Correct: correct})
			}
			items = append(items, it)
		}
	}
	return items
}

package text

import "fmt"

// EncodeOptions sets the lengths of an encoded batch. The zero value keeps
// every token and pads to the longest sequence of the batch.
type EncodeOptions struct {
	// MaxLen, when > 0, caps each sequence at MaxLen ids, the start and end
	// tokens included: tokens are dropped from the end, the end token kept
	// last. It must be 0 or at least 2.
	MaxLen int
	// PadTo, when > 0, fixes the batch width T to PadTo: shorter sequences
	// are padded and longer ones truncated as MaxLen would. When 0, T is the
	// length of the longest sequence. It must not be negative.
	PadTo int
}

// limit returns the per-sequence cap implied by o, 0 meaning none.
func (o EncodeOptions) limit() int {
	if o.MaxLen < 0 || o.PadTo < 0 {
		panic(fmt.Sprintf("text: negative EncodeOptions %+v", o))
	}
	switch {
	case o.PadTo == 0:
		return o.MaxLen
	case o.MaxLen == 0:
		return o.PadTo
	}
	return min(o.MaxLen, o.PadTo)
}

// Batch is B token sequences padded to a common length T, stored row-major:
// entry (b, t) of every (B, T) slice is at index b*T + t.
type Batch struct {
	B, T int
	// IDs (B, T): token ids, the pad id after the end of each sequence.
	IDs []int32
	// Mask (B, T): true at real tokens (start and end tokens included),
	// false at padding.
	Mask []bool
	// Lens (B): the number of real tokens of each row; Mask[b*T+t] is
	// t < Lens[b].
	Lens []int
	// Words (B, T): for each token, the index into strings.Fields(text) of
	// the caption word it came from; -1 for start/end tokens and padding.
	Words []int32
}

// Row returns the T ids of row i, padding included.
func (b *Batch) Row(i int) []int32 { return b.IDs[i*b.T : (i+1)*b.T] }

// FloatMask returns Mask as float32 (1 for a real token, 0 for padding),
// the form that multiplies activations.
func (b *Batch) FloatMask() []float32 {
	m := make([]float32, len(b.Mask))
	for i, ok := range b.Mask {
		if ok {
			m[i] = 1
		}
	}
	return m
}

// newBatch pads encodings into a batch of width padTo, or of the longest
// encoding when padTo is 0. The encodings must not be longer than padTo.
func newBatch(encs []Encoding, padTo int, pad int32) *Batch {
	T := padTo
	if T == 0 {
		for _, e := range encs {
			T = max(T, len(e.IDs))
		}
	}
	b := &Batch{
		B:     len(encs),
		T:     T,
		IDs:   make([]int32, len(encs)*T),
		Mask:  make([]bool, len(encs)*T),
		Lens:  make([]int, len(encs)),
		Words: make([]int32, len(encs)*T),
	}
	for i, e := range encs {
		row := i * T
		copy(b.IDs[row:row+T], e.IDs)
		copy(b.Words[row:row+T], e.Words)
		for t := len(e.IDs); t < T; t++ {
			b.IDs[row+t] = pad
			b.Words[row+t] = -1
		}
		for t := range e.IDs {
			b.Mask[row+t] = true
		}
		b.Lens[i] = len(e.IDs)
	}
	return b
}

// WordTokens inverts a token->word map: given the word index of every token
// (as in [Encoding].Words, -1 for tokens of no word) and the number of
// whitespace words of the caption, it returns for each word the positions
// of its tokens, in order. A word whose tokens were all truncated away, or
// that gave no token (e.g. a lone control character), has none.
func WordTokens(words []int32, nWords int) [][]int {
	out := make([][]int, nWords)
	for pos, w := range words {
		if w >= 0 && int(w) < nWords {
			out[w] = append(out[w], pos)
		}
	}
	return out
}

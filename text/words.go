package text

import (
	"fmt"
	"sort"
)

// The special tokens of a word vocabulary and their fixed ids, in the order
// of the VSE++ vocabulary.
const (
	WordPad   = "<pad>"   // id 0: padding
	WordStart = "<start>" // id 1: first token of every sequence
	WordEnd   = "<end>"   // id 2: last token of every sequence
	WordUnk   = "<unk>"   // id 3: a word missing from the vocabulary

	WordPadID   int32 = 0
	WordStartID int32 = 1
	WordEndID   int32 = 2
	WordUnkID   int32 = 3
)

var wordSpecials = [...]string{WordPad, WordStart, WordEnd, WordUnk}

// WordVocab is a word-level vocabulary for the recurrent and convolutional
// text encoders (GRU, LSTM, word transformer). Words are those of [BasicTokenize]:
// lower-cased, accents stripped, punctuation split off, no WordPiece. Ids 0
// to 3 are the special tokens <pad>, <start>, <end>, <unk>.
//
// A WordVocab is immutable and safe for concurrent use.
type WordVocab struct {
	v *Vocab
}

// BuildWordVocab counts the words of captions and keeps those seen at least
// minCount times, after the four special tokens, most frequent first (ties
// in byte order), so that the result does not depend on map order.
func BuildWordVocab(captions []string, minCount int) *WordVocab {
	counts := map[string]int{}
	s := basicPool.Get().(*basicScratch)
	for _, c := range captions {
		s.split(c, func(w []byte, _ int32) { counts[string(w)]++ })
	}
	basicPool.Put(s)
	words := make([]string, 0, len(counts))
	for w, n := range counts {
		if n >= minCount {
			words = append(words, w)
		}
	}
	sort.Slice(words, func(i, j int) bool {
		if counts[words[i]] != counts[words[j]] {
			return counts[words[i]] > counts[words[j]]
		}
		return words[i] < words[j]
	})
	// The basic tokenizer splits "<" and ">" off, so no caption word can
	// collide with a special token.
	return &WordVocab{v: NewVocab(append(wordSpecials[:], words...))}
}

// NewWordVocab checks that v starts with the four special tokens in order
// and wraps it.
func NewWordVocab(v *Vocab) (*WordVocab, error) {
	for i, sp := range wordSpecials {
		if v.Len() <= i || v.Token(int32(i)) != sp {
			return nil, fmt.Errorf("word vocab: token %d must be %s", i, sp)
		}
		if id, _ := v.ID(sp); id != int32(i) {
			return nil, fmt.Errorf("word vocab: %s appears again as token %d", sp, id)
		}
	}
	return &WordVocab{v: v}, nil
}

// LoadWordVocab reads a word vocabulary saved by [WordVocab.Save].
func LoadWordVocab(path string) (*WordVocab, error) {
	v, err := LoadVocab(path)
	if err != nil {
		return nil, err
	}
	w, err := NewWordVocab(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}

// Save writes the vocabulary to path atomically, one token per line, the
// line number (from 0) being the id.
func (w *WordVocab) Save(path string) error { return w.v.Save(path) }

// Vocab returns the underlying token list.
func (w *WordVocab) Vocab() *Vocab { return w.v }

// Len returns the number of tokens, specials included.
func (w *WordVocab) Len() int { return w.v.Len() }

// AppendWords appends to ids the word ids of text, <unk> for unknown words,
// without <start> and <end>, and to words the index into
// strings.Fields(text) of each word's whitespace field.
func (w *WordVocab) AppendWords(ids, words []int32, text string) ([]int32, []int32) {
	s := basicPool.Get().(*basicScratch)
	s.split(text, func(b []byte, field int32) {
		id, ok := w.v.ids[string(b)]
		if !ok {
			id = WordUnkID
		}
		ids = append(ids, id)
		words = append(words, field)
	})
	basicPool.Put(s)
	return ids, words
}

// Encode returns <start> + the word ids of text + <end>, cut to maxLen ids
// (the end token kept last) when maxLen > 0. maxLen must be 0 or >= 2.
func (w *WordVocab) Encode(text string, maxLen int) Encoding {
	if maxLen < 0 || maxLen == 1 {
		panic(fmt.Sprintf("text: Encode maxLen %d: want 0 (no limit) or >= 2", maxLen))
	}
	ids, words := w.AppendWords([]int32{WordStartID}, []int32{-1}, text)
	e := Encoding{IDs: ids, Words: words}
	if maxLen > 0 && len(ids)+1 > maxLen {
		e.IDs, e.Words, e.Truncated = ids[:maxLen-1], words[:maxLen-1], true
	}
	e.IDs = append(e.IDs, WordEndID)
	e.Words = append(e.Words, -1)
	return e
}

// EncodeBatch encodes texts with [WordVocab.Encode] and pads them with
// <pad> into a batch. See [EncodeOptions] for the length rules.
func (w *WordVocab) EncodeBatch(texts []string, opt EncodeOptions) *Batch {
	maxLen := opt.limit()
	encs := make([]Encoding, len(texts))
	for i, s := range texts {
		encs[i] = w.Encode(s, maxLen)
	}
	return newBatch(encs, opt.PadTo, WordPadID)
}

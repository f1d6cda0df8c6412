package text

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The special tokens of a BERT vocabulary.
const (
	TokenPad = "[PAD]" // padding
	TokenUnk = "[UNK]" // a word that cannot be cut into vocabulary pieces
	TokenCLS = "[CLS]" // first token of every sequence
	TokenSEP = "[SEP]" // last token of every sequence
)

// MaxWordChars is the longest word, in code points after lower-casing and
// accent stripping, that WordPiece cuts into pieces; a longer word becomes
// [UNK]. It is HuggingFace's max_input_chars_per_word (Google's
// tokenization.py uses 200; no caption word comes near either).
const MaxWordChars = 100

// WordPiece is the BERT uncased tokenizer: the basic tokenizer
// ([BasicTokenize]) followed by greedy longest-match-first WordPiece. A word
// is cut from the left into the longest piece in the vocabulary, every piece
// after the first being looked up with a "##" prefix; a word with a part that
// matches no piece, or longer than [MaxWordChars], becomes one [UNK].
//
// A WordPiece is safe for concurrent use.
type WordPiece struct {
	vocab *Vocab
	// cont maps the text of every continuation token "##x" to its id, keyed
	// without the "##", so that a piece w[i:j] is looked up in place.
	cont    map[string]int32
	maxTok  int // longest token in bytes: no longer substring can match
	maxCont int // longest continuation key in bytes
	pad     int32
	unk     int32
	cls     int32
	sep     int32
}

// NewWordPiece returns the WordPiece tokenizer over vocab, which must hold
// [PAD], [UNK], [CLS] and [SEP].
func NewWordPiece(vocab *Vocab) (*WordPiece, error) {
	t := &WordPiece{vocab: vocab, cont: make(map[string]int32)}
	for _, sp := range []struct {
		tok string
		id  *int32
	}{{TokenPad, &t.pad}, {TokenUnk, &t.unk}, {TokenCLS, &t.cls}, {TokenSEP, &t.sep}} {
		id, ok := vocab.ID(sp.tok)
		if !ok {
			return nil, fmt.Errorf("wordpiece: vocabulary has no %s token", sp.tok)
		}
		*sp.id = id
	}
	// Walk the list in order (a map's random order would make the work, and
	// the fuzzer's coverage, differ from run to run), giving a duplicated
	// token the id Vocab.ID gives it.
	for _, tok := range vocab.tokens {
		t.maxTok = max(t.maxTok, len(tok))
		if k, ok := strings.CutPrefix(tok, "##"); ok {
			t.cont[k] = vocab.ids[tok]
			t.maxCont = max(t.maxCont, len(k))
		}
	}
	return t, nil
}

// LoadWordPiece reads a HuggingFace vocab.txt and returns its tokenizer.
func LoadWordPiece(path string) (*WordPiece, error) {
	v, err := LoadVocab(path)
	if err != nil {
		return nil, err
	}
	t, err := NewWordPiece(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Vocab returns the tokenizer's vocabulary.
func (t *WordPiece) Vocab() *Vocab { return t.vocab }

// PadID returns the id of [PAD].
func (t *WordPiece) PadID() int32 { return t.pad }

// UnkID returns the id of [UNK].
func (t *WordPiece) UnkID() int32 { return t.unk }

// CLSID returns the id of [CLS].
func (t *WordPiece) CLSID() int32 { return t.cls }

// SEPID returns the id of [SEP].
func (t *WordPiece) SEPID() int32 { return t.sep }

// appendPieces appends the WordPiece ids of one basic-tokenizer word.
func (t *WordPiece) appendPieces(ids []int32, w []byte) []int32 {
	if len(w) > MaxWordChars && utf8.RuneCount(w) > MaxWordChars {
		return append(ids, t.unk)
	}
	n0 := len(ids)
	for start := 0; start < len(w); {
		m, limit := t.vocab.ids, t.maxTok
		if start > 0 {
			m, limit = t.cont, t.maxCont
		}
		end := len(w)
		if end-start > limit {
			end = start + limit
			for end > start && !utf8.RuneStart(w[end]) {
				end--
			}
		}
		found := false
		for end > start {
			if id, ok := m[string(w[start:end])]; ok {
				ids = append(ids, id)
				found = true
				break
			}
			end--
			for end > start && !utf8.RuneStart(w[end]) {
				end--
			}
		}
		if !found {
			return append(ids[:n0], t.unk)
		}
		start = end
	}
	return ids
}

// AppendTokenize appends to ids the WordPiece ids of text, without [CLS]
// and [SEP], and to words, for each id, the index into
// strings.Fields(text) of the whitespace word it came from. Word indices
// never decrease. It allocates nothing beyond the growth of the two slices.
func (t *WordPiece) AppendTokenize(ids, words []int32, text string) ([]int32, []int32) {
	s := basicPool.Get().(*basicScratch)
	s.split(text, func(w []byte, field int32) {
		n := len(ids)
		ids = t.appendPieces(ids, w)
		for range len(ids) - n {
			words = append(words, field)
		}
	})
	basicPool.Put(s)
	return ids, words
}

// TokenizeIDs returns the WordPiece ids of text without [CLS] and [SEP],
// and for each the index into strings.Fields(text) of its word.
func (t *WordPiece) TokenizeIDs(text string) (ids, words []int32) {
	return t.AppendTokenize(nil, nil, text)
}

// Tokenize returns the WordPiece tokens of text without [CLS] and [SEP].
//
//	Tokenize("Skateboarding!") == []string{"skate", "##boarding", "!"} // bert-base-uncased
func (t *WordPiece) Tokenize(text string) []string {
	ids, _ := t.TokenizeIDs(text)
	return t.Tokens(ids)
}

// Tokens returns the tokens of ids.
func (t *WordPiece) Tokens(ids []int32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = t.vocab.Token(id)
	}
	return out
}

// Encoding is one encoded caption.
type Encoding struct {
	// IDs holds the start token ([CLS] or <start>), the token ids of the
	// caption, and the end token ([SEP] or <end>).
	IDs []int32
	// Words holds, for each id, the index into strings.Fields(caption) of
	// the caption word it came from; -1 for the start and end tokens.
	Words []int32
	// Truncated reports that pieces were dropped to respect the length
	// limit.
	Truncated bool
}

// Encode returns [CLS] + the WordPiece ids of text + [SEP]. When maxLen > 0
// the sequence, specials included, is cut to at most maxLen ids by dropping
// pieces at the end, [SEP] kept last. maxLen must be 0 or at least 2.
func (t *WordPiece) Encode(text string, maxLen int) Encoding {
	if maxLen < 0 || maxLen == 1 {
		panic(fmt.Sprintf("text: Encode maxLen %d: want 0 (no limit) or >= 2", maxLen))
	}
	ids, words := t.AppendTokenize([]int32{t.cls}, []int32{-1}, text)
	e := Encoding{IDs: ids, Words: words}
	if maxLen > 0 && len(ids)+1 > maxLen {
		e.IDs, e.Words, e.Truncated = ids[:maxLen-1], words[:maxLen-1], true
	}
	e.IDs = append(e.IDs, t.sep)
	e.Words = append(e.Words, -1)
	return e
}

// EncodeBatch encodes texts with [WordPiece.Encode] and pads them into a
// batch with [PAD]. See [EncodeOptions] for the length rules.
func (t *WordPiece) EncodeBatch(texts []string, opt EncodeOptions) *Batch {
	maxLen := opt.limit()
	encs := make([]Encoding, len(texts))
	for i, s := range texts {
		encs[i] = t.Encode(s, maxLen)
	}
	return newBatch(encs, opt.PadTo, t.pad)
}

// StopWordMask reports, for each token of ids, whether it belongs to a stop
// word; words are the word indices that came with ids (see
// [StopWordMask]).
func (t *WordPiece) StopWordMask(ids, words []int32) []bool {
	return StopWordMask(t.Tokens(ids), words)
}

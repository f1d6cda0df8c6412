package text

import (
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// This file is BERT's BasicTokenizer with do_lower_case=True, in the order
// tokenization.py runs it:
//
//	_clean_text             drop NUL, U+FFFD and control characters; whitespace -> ' '
//	_tokenize_chinese_chars put spaces around CJK ideographs
//	whitespace_tokenize     split on whitespace
//	per word: lower()       Python's str.lower, final sigma included
//	          _run_strip_accents  NFD, then drop category Mn
//	          _run_split_on_punc  every punctuation character is a word
//
// It runs in one pass over the bytes of the text, with an ASCII fast path, and
// hands each resulting word to a callback together with the index of the
// whitespace field of the original text (strings.Fields) it starts in.

// Byte classes of the ASCII fast path.
const (
	asciiKeep  = iota // part of a word
	asciiSpace        // BERT whitespace: ' ', \t, \n, \r
	asciiDrop         // control character that _clean_text removes (NUL included)
)

var (
	asciiClass [128]uint8 // asciiKeep, asciiSpace or asciiDrop
	asciiPunct [128]bool  // BERT's _is_punctuation restricted to ASCII
	asciiField [128]bool  // unicode.IsSpace, which strings.Fields splits on
)

func init() {
	for c := 0; c < 128; c++ {
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			asciiClass[c] = asciiSpace
		case c < 0x20 || c == 0x7f:
			asciiClass[c] = asciiDrop
		}
		// All ASCII characters of category P* fall in these ranges too.
		asciiPunct[c] = c >= 33 && c <= 47 || c >= 58 && c <= 64 || c >= 91 && c <= 96 || c >= 123 && c <= 126
		asciiField[c] = unicode.IsSpace(rune(c))
	}
}

// isCJK reports whether r is a CJK ideograph by BERT's _is_chinese_char: the
// CJK Unified Ideographs blocks and extensions A to E, and the CJK
// Compatibility Ideographs (not Hangul, Hiragana or Katakana).
func isCJK(r rune) bool {
	return r >= 0x4E00 && r <= 0x9FFF ||
		r >= 0x3400 && r <= 0x4DBF ||
		r >= 0x20000 && r <= 0x2A6DF ||
		r >= 0x2A700 && r <= 0x2B73F ||
		r >= 0x2B740 && r <= 0x2B81F ||
		r >= 0x2B820 && r <= 0x2CEAF ||
		r >= 0xF900 && r <= 0xFAFF ||
		r >= 0x2F800 && r <= 0x2FA1F
}

// isPunct is BERT's _is_punctuation: the ASCII non-alphanumeric printable
// characters (symbols such as $ + ^ included) and every Unicode P* category.
func isPunct(r rune) bool {
	if r < 0x80 {
		return r >= 0 && asciiPunct[r]
	}
	return unicode.In(r, unicode.P)
}

// isDropped reports whether _clean_text removes the non-ASCII rune r: U+FFFD
// (which is also what invalid UTF-8 decodes to) and categories Cc and Cf.
func isDropped(r rune) bool {
	return r == utf8.RuneError || unicode.In(r, unicode.Cc, unicode.Cf)
}

// isCased and isCaseIgnorable are the Unicode properties Cased and
// Case_Ignorable, which decide Python's final-sigma rule in str.lower.
func isCased(r rune) bool {
	return unicode.In(r, unicode.Lu, unicode.Ll, unicode.Lt, unicode.Other_Lowercase, unicode.Other_Uppercase)
}

func isCaseIgnorable(r rune) bool {
	switch r {
	// Word_Break MidLetter, MidNumLet and Single_Quote.
	case 0x27, 0x2E, 0x3A, 0xB7, 0x387, 0x55F, 0x5F4, 0x2018, 0x2019, 0x2024, 0x2027,
		0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}

// finalSigma reports whether the capital sigma at w[i:i+n] lower-cases to the
// final form ς: it follows a cased letter (case-ignorable characters
// skipped) and no cased letter follows it (same).
func finalSigma(w []byte, i, n int) bool {
	j := i
	cased := false
	for j > 0 {
		r, size := utf8.DecodeLastRune(w[:j])
		j -= size
		if !isCaseIgnorable(r) {
			cased = isCased(r)
			break
		}
	}
	if !cased {
		return false
	}
	for j = i + n; j < len(w); {
		r, size := utf8.DecodeRune(w[j:])
		j += size
		if !isCaseIgnorable(r) {
			return !isCased(r)
		}
	}
	return true
}

// appendLower appends w lower-cased as Python's str.lower does it: the
// simple lower-case mapping, except İ (U+0130) -> "i\u0307" and the
// context-dependent final sigma.
func appendLower(dst, w []byte) []byte {
	for i := 0; i < len(w); {
		c := w[i]
		if c < 0x80 {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(w[i:])
		switch r {
		case 0x130:
			dst = append(dst, "i\u0307"...)
		case 0x3A3:
			if finalSigma(w, i, n) {
				dst = utf8.AppendRune(dst, 0x3C2)
			} else {
				dst = utf8.AppendRune(dst, 0x3C3)
			}
		default:
			dst = utf8.AppendRune(dst, unicode.ToLower(r))
		}
		i += n
	}
	return dst
}

// basicScratch holds the buffers of one run of the basic tokenizer.
type basicScratch struct {
	word  []byte // the current word, cleaned, ASCII already lower-cased
	low   []byte // a non-ASCII word lower-cased
	nfd   []byte // ... then decomposed
	strip []byte // ... then without combining marks
}

var basicPool = sync.Pool{New: func() any {
	return &basicScratch{word: make([]byte, 0, 256), low: make([]byte, 0, 256), nfd: make([]byte, 0, 256), strip: make([]byte, 0, 256)}
}}

// basicSplit runs the basic tokenizer over text and calls emit for every
// word it produces, with the index into strings.Fields(text) of the field
// the word starts in. The word's bytes are valid only during the call.
//
// Fields and BERT words differ only where _clean_text deletes a character
// that strings.Fields treats as a space (\v, \f, U+0085): "a\vb" is the two
// fields "a", "b" but the one word "ab", which gets field 0.
func (s *basicScratch) split(text string, emit func(word []byte, field int32)) {
	field := int32(-1) // index of the current strings.Fields field
	inSpace := true    // the last rune was a strings.Fields separator
	wordField := int32(0)
	word := s.word[:0]
	nonASCII := false
	for i := 0; i < len(text); {
		c := text[i]
		if c < 0x80 {
			i++
			if asciiField[c] {
				inSpace = true
			} else if inSpace {
				field++
				inSpace = false
			}
			switch asciiClass[c] {
			case asciiDrop:
			case asciiSpace:
				if len(word) > 0 {
					s.flush(word, nonASCII, wordField, emit)
					word, nonASCII = word[:0], false
				}
			default:
				if len(word) == 0 {
					wordField = field
				}
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				word = append(word, c)
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(text[i:])
		if unicode.IsSpace(r) {
			inSpace = true
		} else if inSpace {
			field++
			inSpace = false
		}
		switch {
		case isDropped(r):
		case unicode.IsSpace(r):
			// Zs, U+2028 and U+2029 (U+0085 is Cc, dropped above): the
			// characters Python's str.split still splits on after cleaning.
			if len(word) > 0 {
				s.flush(word, nonASCII, wordField, emit)
				word, nonASCII = word[:0], false
			}
		case isCJK(r):
			if len(word) > 0 {
				s.flush(word, nonASCII, wordField, emit)
				word, nonASCII = word[:0], false
			}
			// A CJK ideograph is neither cased nor decomposed to marks
			// (compatibility ideographs map to unified ones), so it goes
			// through the same normalisation as any other word.
			s.flush(append(word, text[i:i+n]...), true, field, emit)
		default:
			if len(word) == 0 {
				wordField = field
			}
			word = append(word, text[i:i+n]...)
			nonASCII = true
		}
		i += n
	}
	if len(word) > 0 {
		s.flush(word, nonASCII, wordField, emit)
	}
	s.word = word[:0]
}

// flush finishes one whitespace-delimited word: lower-cases it and strips
// accents when it is not plain ASCII (the ASCII letters are already lower
// case), then splits off punctuation and emits the pieces.
func (s *basicScratch) flush(word []byte, nonASCII bool, field int32, emit func([]byte, int32)) {
	if nonASCII {
		s.low = appendLower(s.low[:0], word)
		s.nfd = norm.NFD.Append(s.nfd[:0], s.low...)
		strip := s.strip[:0]
		for i := 0; i < len(s.nfd); {
			r, n := utf8.DecodeRune(s.nfd[i:])
			if !unicode.Is(unicode.Mn, r) {
				strip = append(strip, s.nfd[i:i+n]...)
			}
			i += n
		}
		s.strip = strip
		word = strip
	}
	start := 0
	for i := 0; i < len(word); {
		c := word[i]
		var punct, space bool
		n := 1
		if c < 0x80 {
			punct, space = asciiPunct[c], c == ' '
		} else {
			var r rune
			r, n = utf8.DecodeRune(word[i:])
			// Accent stripping may in principle create a space; Python
			// re-splits on whitespace after punctuation splitting.
			punct, space = isPunct(r), unicode.IsSpace(r)
		}
		if punct || space {
			if i > start {
				emit(word[start:i], field)
			}
			if punct {
				emit(word[i:i+n], field)
			}
			start = i + n
		}
		i += n
	}
	if start < len(word) {
		emit(word[start:], field)
	}
}

// BasicTokenize returns the words of BERT's basic tokenizer (uncased) for
// text: cleaned, CJK ideographs isolated, lower-cased, accents stripped and
// punctuation split off, before any WordPiece step.
//
//	BasicTokenize("Héllo, World!") == []string{"hello", ",", "world", "!"}
func BasicTokenize(text string) []string {
	words, _ := BasicTokenizeFields(text)
	return words
}

// BasicTokenizeFields is [BasicTokenize] that also returns, for each word,
// the index into strings.Fields(text) of the whitespace field it came from.
// The field indices never decrease.
func BasicTokenizeFields(text string) (words []string, fields []int32) {
	s := basicPool.Get().(*basicScratch)
	s.split(text, func(w []byte, f int32) {
		words = append(words, string(w))
		fields = append(fields, f)
	})
	basicPool.Put(s)
	return words, fields
}

package text

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// This file is a slow, literal transcription of Google BERT's
// tokenization.py (BasicTokenizer with do_lower_case=True, then
// WordpieceTokenizer), step by step on strings and rune slices, with no fast
// path. The fuzz tests check the real tokenizer against it. Lower-casing
// is a rune-by-rune transcription of CPython's str.lower (lower_ucs4 and
// handle_capital_sigma in Objects/unicodeobject.c), written apart from
// appendLower; golang.org/x/text/cases was used before and disagrees with
// Python on a sigma after a letter that is both cased and case-ignorable
// ("\u02E3\u03A3": Python gives σ, cases gives ς).

func refIsWhitespace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || unicode.Is(unicode.Zs, r)
}

func refIsControl(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r)
}

func refIsPunct(r rune) bool {
	if r >= 33 && r <= 47 || r >= 58 && r <= 64 || r >= 91 && r <= 96 || r >= 123 && r <= 126 {
		return true
	}
	return unicode.In(r, unicode.P)
}

// refPySpace is Python's str.isspace.
func refPySpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x1f, 0x85, 0x2028, 0x2029:
		return true
	}
	return unicode.Is(unicode.Zs, r)
}

// refWhitespaceTokenize is tokenization.py's whitespace_tokenize.
func refWhitespaceTokenize(s string) []string { return strings.FieldsFunc(s, refPySpace) }

func refBasic(text string) []string {
	// _clean_text; ranging over a Go string turns each invalid byte into
	// U+FFFD, which is then dropped, as convert_to_unicode(errors="ignore").
	var clean []rune
	for _, r := range text {
		if r == 0 || r == 0xFFFD || refIsControl(r) {
			continue
		}
		if refIsWhitespace(r) {
			clean = append(clean, ' ')
		} else {
			clean = append(clean, r)
		}
	}
	// _tokenize_chinese_chars
	var spaced []rune
	for _, r := range clean {
		if isCJK(r) {
			spaced = append(spaced, ' ', r, ' ')
		} else {
			spaced = append(spaced, r)
		}
	}
	var split []string
	for _, tok := range refWhitespaceTokenize(string(spaced)) {
		tok = refLower(tok)
		// _run_strip_accents
		var b strings.Builder
		for _, r := range norm.NFD.String(tok) {
			if !unicode.Is(unicode.Mn, r) {
				b.WriteRune(r)
			}
		}
		// _run_split_on_punc
		var out [][]rune
		startNew := true
		for _, r := range b.String() {
			if refIsPunct(r) {
				out = append(out, []rune{r})
				startNew = true
			} else {
				if startNew {
					out = append(out, nil)
				}
				startNew = false
				out[len(out)-1] = append(out[len(out)-1], r)
			}
		}
		for _, w := range out {
			split = append(split, string(w))
		}
	}
	return refWhitespaceTokenize(strings.Join(split, " "))
}

// refLower is Python's str.lower on runes: the simple lower-case mapping,
// İ to "i\u0307", and capital sigma to final ς when a cased letter precedes
// it and none follows, case-ignorable characters skipped both ways (a
// character that is both is skipped, as CPython's loops do).
func refLower(s string) string {
	rs := []rune(s)
	var b strings.Builder
	for i, r := range rs {
		switch {
		case r == 0x130:
			b.WriteString("i\u0307")
		case r == 0x3A3:
			j := i - 1
			for j >= 0 && isCaseIgnorable(rs[j]) {
				j--
			}
			before := j >= 0 && isCased(rs[j])
			k := i + 1
			for k < len(rs) && isCaseIgnorable(rs[k]) {
				k++
			}
			after := k < len(rs) && isCased(rs[k])
			if before && !after {
				b.WriteRune(0x3C2)
			} else {
				b.WriteRune(0x3C3)
			}
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

func refWordPiece(vocab map[string]int32, text string) []string {
	var output []string
	for _, tok := range refWhitespaceTokenize(text) {
		chars := []rune(tok)
		if len(chars) > MaxWordChars {
			output = append(output, TokenUnk)
			continue
		}
		bad := false
		start := 0
		var sub []string
		for start < len(chars) {
			end := len(chars)
			cur := ""
			for start < end {
				s := string(chars[start:end])
				if start > 0 {
					s = "##" + s
				}
				if _, ok := vocab[s]; ok {
					cur = s
					break
				}
				end--
			}
			if cur == "" {
				bad = true
				break
			}
			sub = append(sub, cur)
			start = end
		}
		if bad {
			output = append(output, TokenUnk)
		} else {
			output = append(output, sub...)
		}
	}
	return output
}

func refTokenize(vocab map[string]int32, text string) []string {
	var out []string
	for _, w := range refBasic(text) {
		out = append(out, refWordPiece(vocab, w)...)
	}
	return out
}

package text

import (
	"unicode"
	"unicode/utf8"
)

// Blank reports whether s holds nothing to read: no character that is
// both visible and kept by the tokenizers. It is the one rule for blank
// captions and queries, used wherever a caption or a query sentence comes
// in (caption files, Karpathy files, a folder's captions file, --text),
// so that what one place refuses no other accepts.
//
// A character is blank when it is:
//
//   - white space or a separator (unicode.IsSpace, categories Zs, Zl, Zp);
//   - a control character (category Cc: NUL, tabs, line breaks, DEL, C1);
//   - a format character (category Cf): the byte order mark U+FEFF, the
//     zero-width space U+200B, the zero-width joiners U+200C and U+200D,
//     the word joiner U+2060, the soft hyphen U+00AD, bidirectional marks;
//   - another default-ignorable code point (Hangul fillers U+115F, U+1160,
//     U+3164, U+FFA0, the combining grapheme joiner U+034F, ...) or a
//     variation selector (U+FE00 to U+FE0F, ...);
//   - the replacement character U+FFFD, which is also what bytes that are
//     not UTF-8 decode to;
//   - a nonspacing mark (category Mn), which the tokenizers strip as an
//     accent: marks with no letter to sit on are not a word.
//
// A caption that [BasicTokenize] turns into no word at all is blank: it
// would give a text encoder nothing to encode, and an item without vectors
// scores 0 against every query.
//
//	Blank(" \t")            == true
//	Blank("\ufeff\u200b")   == true
//	Blank("a red circle")   == false
//	Blank("\u200ba")        == false
func Blank(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			// ASCII: blank is white space and controls (NUL to US, DEL).
			if c > ' ' && c != 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if !blankRune(r) {
			return false
		}
		i += n
	}
	return true
}

// blankRune reports whether the non-ASCII rune r is blank (see Blank).
func blankRune(r rune) bool {
	return r == utf8.RuneError || unicode.IsSpace(r) ||
		unicode.In(r, unicode.Z, unicode.Cc, unicode.Cf, unicode.Mn, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}

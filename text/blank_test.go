package text

import "testing"

// blankCases are captions that hold nothing to read, and captions that do
// although they start or end with invisible characters.
var blankCases = []struct {
	name  string
	in    string
	blank bool
}{
	{"empty", "", true},
	{"spaces", "   ", true},
	{"tabs and line breaks", "\t\r\n\v\f", true},
	{"NUL and controls", "\x00\x01\x1f\x7f", true},
	{"C1 control NEL", "\u0085", true},
	{"byte order mark", "\ufeff", true},
	{"zero-width space", "\u200b\u200b\u200b", true},
	{"zero-width joiners and word joiner", "\u200c\u200d\u2060", true},
	{"soft hyphen", "\u00ad", true},
	{"bidirectional marks", "\u200e\u200f\u202a\u202c\u2066\u2069", true},
	{"no-break and ideographic spaces", "\u00a0\u3000\u2007", true},
	{"line and paragraph separators", "\u2028\u2029", true},
	{"Hangul fillers", "\u3164\u115f\u1160\uffa0", true},
	{"combining grapheme joiner", "\u034f", true},
	{"variation selectors", "\ufe0f\ufe00", true},
	{"replacement character", "\ufffd", true},
	{"bytes that are not UTF-8", "\xff\xfe\xc3", true},
	{"combining accents alone", "\u0301\u0308", true},
	{"tag characters", "\U000E0041\U000E007F", true},
	{"BOM and zero-width space around spaces", "\ufeff \u200b\t", true},

	{"a word", "a red circle", false},
	{"one letter", "a", false},
	{"punctuation", ".", false},
	{"a letter after zero-width spaces", "\u200b\u200ba", false},
	{"a letter after a BOM", "\ufeffdog", false},
	{"an accented letter", "\u00e9", false},
	{"a letter and its combining accent", "e\u0301", false},
	{"CJK", "\u72ac", false},
	{"emoji", "\U0001F415", false},
	{"a symbol", "\u00a9", false},
	{"an enclosing mark", "\u20dd", false},
	{"a digit", "7", false},
}

func TestBlank(t *testing.T) {
	for _, tc := range blankCases {
		if got := Blank(tc.in); got != tc.blank {
			t.Errorf("%s: Blank(%q) = %v, want %v", tc.name, tc.in, got, tc.blank)
		}
	}
}

// TestBlankHasNoWords: every caption of the table that the tokenizer
// turns into no word (what a text encoder would encode as nothing) is
// blank.
func TestBlankHasNoWords(t *testing.T) {
	for _, tc := range blankCases {
		if words := BasicTokenize(tc.in); len(words) == 0 && !Blank(tc.in) {
			t.Errorf("%s: %q has no word but is not blank", tc.name, tc.in)
		}
	}
}

// FuzzBlank: a caption that the basic tokenizer turns into no word is
// blank; a caption with a word that is neither invisible nor a mark is not.
func FuzzBlank(f *testing.F) {
	for _, tc := range blankCases {
		f.Add(tc.in)
	}
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(BasicTokenize(s)) == 0 && !Blank(s) {
			t.Fatalf("%q: no word, but not blank", s)
		}
	})
}

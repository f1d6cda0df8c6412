package text

import (
	"reflect"
	"strings"
	"testing"
)

func TestBasicTokenize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", "", nil},
		{"spaces only", " \t\n\r ", nil},
		// tokenization_test.py test_basic_tokenizer_lower.
		{"lower", " \tHeLLo!how  \n Are yoU?  ", []string{"hello", "!", "how", "are", "you", "?"}},
		{"accent", "H\u00E9llo", []string{"hello"}},
		{"accent decomposed", "He\u0301llo", []string{"hello"}},
		{"punct", "a,b", []string{"a", ",", "b"}},
		{"punct run", "wait...", []string{"wait", ".", ".", "."}},
		{"ascii symbols are punct", "$5+3^2|x~y`", []string{"$", "5", "+", "3", "^", "2", "|", "x", "~", "y", "`"}},
		{"unicode punct", "a\u2014b\u00BFc\u300Cd", []string{"a", "\u2014", "b", "\u00BF", "c", "\u300C", "d"}},
		{"unicode symbol is not punct", "a\u00A9b", []string{"a\u00A9b"}},
		{"apostrophe", "man's", []string{"man", "'", "s"}},
		// tokenization_test.py test_chinese.
		{"cjk", "ah\u535A\u63A8zz", []string{"ah", "\u535A", "\u63A8", "zz"}},
		{"cjk ext B", "x\U00020000y", []string{"x", "\U00020000", "y"}},
		{"hiragana is not cjk", "\u3053\u3093", []string{"\u3053\u3093"}},
		// U+F900 is a CJK compatibility ideograph: isolated, then NFD maps it
		// to U+8C48.
		{"cjk compatibility", "a\uF900b", []string{"a", "\u8C48", "b"}},
		// NFD splits Hangul syllables into conjoining jamo (category Lo).
		{"hangul", "\uD55C", []string{"\u1112\u1161\u11AB"}},
		{"control dropped", "a\x00b\x01c\x7fd", []string{"abcd"}},
		{"cf dropped", "a\u200Bb\uFEFFc", []string{"abc"}},
		{"fffd dropped", "a\uFFFDb", []string{"ab"}},
		{"invalid utf8 dropped", "a\xffb\xc3", []string{"ab"}},
		{"vertical tab dropped", "a\vb\fc", []string{"abc"}},
		{"nbsp splits", "a\u00A0b\u3000c", []string{"a", "b", "c"}},
		{"line separator splits", "a\u2028b\u2029c", []string{"a", "b", "c"}},
		{"lone combining mark vanishes", "\u0301 a", []string{"a"}},
		{"dotted capital I", "\u0130stanbul", []string{"istanbul"}},
		// Python's str.lower applies the final-sigma rule per whitespace
		// word, before punctuation is split off.
		{"final sigma", "\u039F\u0394\u039F\u03A3", []string{"\u03BF\u03B4\u03BF\u03C2"}},
		{"lone sigma", "\u03A3", []string{"\u03C3"}},
		{"medial sigma", "\u0391\u03A3\u0391", []string{"\u03B1\u03C3\u03B1"}},
		{"sigma before period", "\u0391\u03A3.", []string{"\u03B1\u03C2", "."}},
		{"sigma before apostrophe letter", "\u0391\u03A3'\u0391", []string{"\u03B1\u03C3", "'", "\u03B1"}},
		{"sigma before comma letter", "\u0391\u03A3,\u0391", []string{"\u03B1\u03C2", ",", "\u03B1"}},
		// U+02E3 is both cased and case-ignorable: CPython skips it, so the
		// sigma has no cased letter before it (checked with python3).
		{"sigma after a modifier letter", "\u02E3\u03A3", []string{"\u02E3\u03C3"}},
		// GREEK VARIA (Sk) decomposes to a grave accent U+0060, which is
		// punctuation for BERT: accents are stripped before splitting.
		{"decomposes to punct", "a\u1FEFb", []string{"a", "`", "b"}},
		{"ligature kept", "\uFB01sh", []string{"\uFB01sh"}},
		{"title case digraph", "\u01C5", []string{"\u01C6"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := BasicTokenize(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("BasicTokenize(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if ref := refBasic(tt.in); !reflect.DeepEqual(got, ref) && !(len(got) == 0 && len(ref) == 0) {
				t.Errorf("BasicTokenize(%q) = %q, reference transcription gives %q", tt.in, got, ref)
			}
		})
	}
}

func TestBasicTokenizeFields(t *testing.T) {
	tests := []struct {
		in     string
		words  []string
		fields []int32
	}{
		{"a man's  hat,\tsir", []string{"a", "man", "'", "s", "hat", ",", "sir"}, []int32{0, 1, 1, 1, 2, 2, 3}},
		{"ah\u535A\u63A8zz x", []string{"ah", "\u535A", "\u63A8", "zz", "x"}, []int32{0, 0, 0, 0, 1}},
		// strings.Fields keeps "\x00" as a field; BERT drops it.
		{"\x00 a", []string{"a"}, []int32{1}},
		// \v separates fields but BERT deletes it, joining the words.
		{"a\vb c", []string{"ab", "c"}, []int32{0, 2}},
		{"\vab", []string{"ab"}, []int32{0}},
		{"x \u0301 y", []string{"x", "y"}, []int32{0, 2}},
		{"\u00A0lead\u3000trail\u00A0", []string{"lead", "trail"}, []int32{0, 1}},
	}
	for _, tt := range tests {
		words, fields := BasicTokenizeFields(tt.in)
		if !reflect.DeepEqual(words, tt.words) || !reflect.DeepEqual(fields, tt.fields) {
			t.Errorf("BasicTokenizeFields(%q) = %q %v, want %q %v", tt.in, words, fields, tt.words, tt.fields)
		}
		n := len(strings.Fields(tt.in))
		for _, f := range fields {
			if f < 0 || int(f) >= n {
				t.Errorf("BasicTokenizeFields(%q): field %d out of [0, %d)", tt.in, f, n)
			}
		}
	}
}

func TestCharClasses(t *testing.T) {
	// tokenization_test.py test_is_punctuation, test_is_control and
	// test_is_whitespace, plus the CJK block boundaries.
	for _, r := range "-$`.,!?'\"()[]{}@#%&*/\\:;<=>^_|~\u00BF\u2014\u3001" {
		if !isPunct(r) {
			t.Errorf("isPunct(%U) = false", r)
		}
	}
	for _, r := range "aA0 \u00A9\u00E9\u4E00" {
		if isPunct(r) {
			t.Errorf("isPunct(%U) = true", r)
		}
	}
	for _, r := range []rune{0x05, 0x7F, 0x85, 0x200B, 0x200D, 0xFEFF, 0xFFFD} {
		if !isDropped(r) && r >= 0x80 {
			t.Errorf("isDropped(%U) = false", r)
		}
	}
	for _, r := range []rune{'A', ' ', 0xE9, 0x2028, 0x4E00} {
		if isDropped(r) {
			t.Errorf("isDropped(%U) = true", r)
		}
	}
	for _, c := range []struct {
		r    rune
		want bool
	}{
		{0x4DFF, false}, {0x4E00, true}, {0x9FFF, true}, {0xA000, false},
		{0x3400, true}, {0x4DBF, true}, {0x33FF, false},
		{0x20000, true}, {0x2A6DF, true}, {0x2A6E0, false},
		{0x2A700, true}, {0x2B81F, true}, {0x2B820, true}, {0x2CEAF, true}, {0x2CEB0, false},
		{0xF8FF, false}, {0xF900, true}, {0xFAFF, true}, {0xFB00, false},
		{0x2F800, true}, {0x2FA1F, true}, {0x2FA20, false},
		{0xAC00, false}, {0x3042, false},
	} {
		if got := isCJK(c.r); got != c.want {
			t.Errorf("isCJK(%U) = %v, want %v", c.r, got, c.want)
		}
	}
}

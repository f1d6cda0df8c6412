package text

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// testTokens is the vocabulary of tokenization_test.py (test_full_tokenizer)
// with [PAD] in front and a few more pieces.
var testTokens = []string{
	"[PAD]", "[UNK]", "[CLS]", "[SEP]", // 0-3
	"want", "##want", "##ed", "wa", "un", "runn", "##ing", ",", // 4-11
	"una", "##ff", "##able", // 12-14
	"hello", "!", "how", "are", "you", "?", // 15-20
	"ah", "\u535A", "\u63A8", "zz", // 21-24
	"a", "b", "##b", "##a", ".", // 25-29
	"the", "##ir", "cafe", "\u03BF\u03B4\u03BF\u03C2", // 30-33
}

func testWordPiece(t testing.TB) *WordPiece {
	t.Helper()
	wp, err := NewWordPiece(NewVocab(testTokens))
	if err != nil {
		t.Fatal(err)
	}
	return wp
}

// realVocabPath is BERT-base uncased's vocab.txt, from the shared data
// directory beside the repository root (/work/shared/data when the
// repository is /work/main).
var realVocabPath = filepath.Join("..", "..", "shared", "data", "bert-base-uncased-vocab.txt")

var realWP struct {
	once sync.Once
	wp   *WordPiece
	err  error
}

// realWordPiece returns the bert-base-uncased tokenizer or skips the test
// when the vocabulary file is absent.
func realWordPiece(t testing.TB) *WordPiece {
	t.Helper()
	if _, err := os.Stat(realVocabPath); err != nil {
		t.Skipf("skipping: BERT vocabulary %s not found (it lives in ../shared/data beside the repository)", realVocabPath)
	}
	realWP.once.Do(func() { realWP.wp, realWP.err = LoadWordPiece(realVocabPath) })
	if realWP.err != nil {
		t.Fatal(realWP.err)
	}
	return realWP.wp
}

func TestWordPieceTokenize(t *testing.T) {
	wp := testWordPiece(t)
	long := strings.Repeat("a", MaxWordChars)
	tests := []struct {
		name string
		in   string
		want string // tokens joined by spaces
	}{
		{"empty", "", ""},
		// tokenization_test.py test_wordpiece_tokenizer and test_full_tokenizer.
		{"pieces", "unwanted running", "un ##want ##ed runn ##ing"},
		{"unmatched piece makes the word unk", "unwantedX running", "[UNK] runn ##ing"},
		{"full", "UNwant\u00E9d,running", "un ##want ##ed , runn ##ing"},
		{"longest match first", "unaffable", "una ##ff ##able"},
		{"whole word preferred", "want wa", "want wa"},
		{"lower and punct", " \tHeLLo!how  \n Are yoU?  ", "hello ! how are you ?"},
		{"accent", "H\u00E9llo", "hello"},
		{"punct split", "a,b", "a , b"},
		{"cjk", "ah\u535A\u63A8zz", "ah \u535A \u63A8 zz"},
		{"nul joins", "a\x00b", "a ##b"},
		{"zero width space joins", "a\u200Bb", "a ##b"},
		{"invalid utf8 joins", "a\xffb", "a ##b"},
		{"nbsp splits", "a\u00A0b", "a b"},
		{"unknown word", "xyz", "[UNK]"},
		{"unknown punct", "a;b", "a [UNK] b"},
		{"special tokens are not protected", "[CLS]", "[UNK] [UNK] [UNK]"},
		{"max word length", long, "a" + strings.Repeat(" ##a", MaxWordChars-1)},
		{"over max word length", long + "a", "[UNK]"},
		{"over max word length with accents", strings.Repeat("\u00E1", MaxWordChars+1), "[UNK]"},
		{"accents do not count", strings.Repeat("a\u0301", MaxWordChars), "a" + strings.Repeat(" ##a", MaxWordChars-1)},
		{"final sigma piece", "\u039F\u0394\u039F\u03A3", "\u03BF\u03B4\u03BF\u03C2"},
		{"non-final sigma is unk", "\u039F\u0394\u039F\u03A3A", "[UNK]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(wp.Tokenize(tt.in), " ")
			if got != tt.want {
				t.Errorf("Tokenize(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if ref := strings.Join(refTokenize(wp.vocab.ids, tt.in), " "); got != ref {
				t.Errorf("Tokenize(%q) = %q, reference transcription gives %q", tt.in, got, ref)
			}
		})
	}
}

func TestTokenizeIDsWords(t *testing.T) {
	wp := testWordPiece(t)
	tests := []struct {
		in    string
		ids   []int32
		words []int32
	}{
		{"", nil, nil},
		{"unwanted running", []int32{8, 5, 6, 9, 10}, []int32{0, 0, 0, 1, 1}},
		{"Hello, how are you?", []int32{15, 11, 17, 18, 19, 20}, []int32{0, 0, 1, 2, 3, 3}},
		{"  ah\u535A zz ", []int32{21, 22, 24}, []int32{0, 0, 1}},
		{"\x00 b", []int32{26}, []int32{1}},
	}
	for _, tt := range tests {
		ids, words := wp.TokenizeIDs(tt.in)
		if !reflect.DeepEqual(ids, tt.ids) || !reflect.DeepEqual(words, tt.words) {
			t.Errorf("TokenizeIDs(%q) = %v %v, want %v %v", tt.in, ids, words, tt.ids, tt.words)
		}
	}
}

func TestEncode(t *testing.T) {
	wp := testWordPiece(t)
	tests := []struct {
		in        string
		maxLen    int
		ids       []int32
		words     []int32
		truncated bool
	}{
		{"unwanted running", 0, []int32{2, 8, 5, 6, 9, 10, 3}, []int32{-1, 0, 0, 0, 1, 1, -1}, false},
		{"unwanted running", 7, []int32{2, 8, 5, 6, 9, 10, 3}, []int32{-1, 0, 0, 0, 1, 1, -1}, false},
		{"unwanted running", 6, []int32{2, 8, 5, 6, 9, 3}, []int32{-1, 0, 0, 0, 1, -1}, true},
		{"unwanted running", 3, []int32{2, 8, 3}, []int32{-1, 0, -1}, true},
		{"unwanted running", 2, []int32{2, 3}, []int32{-1, -1}, true},
		{"", 0, []int32{2, 3}, []int32{-1, -1}, false},
		{"", 2, []int32{2, 3}, []int32{-1, -1}, false},
	}
	for _, tt := range tests {
		e := wp.Encode(tt.in, tt.maxLen)
		if !reflect.DeepEqual(e.IDs, tt.ids) || !reflect.DeepEqual(e.Words, tt.words) || e.Truncated != tt.truncated {
			t.Errorf("Encode(%q, %d) = %v %v %v, want %v %v %v", tt.in, tt.maxLen, e.IDs, e.Words, e.Truncated, tt.ids, tt.words, tt.truncated)
		}
	}
}

func TestEncodePanicsOnBadMaxLen(t *testing.T) {
	wp := testWordPiece(t)
	for _, n := range []int{-1, 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Encode(maxLen=%d) did not panic", n)
				}
			}()
			wp.Encode("a", n)
		}()
	}
}

func TestEncodeBatch(t *testing.T) {
	wp := testWordPiece(t)
	texts := []string{"unwanted running", "hello", ""}
	tests := []struct {
		name  string
		opt   EncodeOptions
		T     int
		ids   []int32
		words []int32
		lens  []int
	}{
		{"pad to longest", EncodeOptions{}, 7,
			[]int32{
				2, 8, 5, 6, 9, 10, 3,
				2, 15, 3, 0, 0, 0, 0,
				2, 3, 0, 0, 0, 0, 0,
			},
			[]int32{
				-1, 0, 0, 0, 1, 1, -1,
				-1, 0, -1, -1, -1, -1, -1,
				-1, -1, -1, -1, -1, -1, -1,
			},
			[]int{7, 3, 2}},
		{"max len", EncodeOptions{MaxLen: 4}, 4,
			[]int32{
				2, 8, 5, 3,
				2, 15, 3, 0,
				2, 3, 0, 0,
			},
			[]int32{
				-1, 0, 0, -1,
				-1, 0, -1, -1,
				-1, -1, -1, -1,
			},
			[]int{4, 3, 2}},
		{"pad to fixed", EncodeOptions{PadTo: 3}, 3,
			[]int32{
				2, 8, 3,
				2, 15, 3,
				2, 3, 0,
			},
			[]int32{
				-1, 0, -1,
				-1, 0, -1,
				-1, -1, -1,
			},
			[]int{3, 3, 2}},
		{"max len below pad", EncodeOptions{MaxLen: 3, PadTo: 5}, 5,
			[]int32{
				2, 8, 3, 0, 0,
				2, 15, 3, 0, 0,
				2, 3, 0, 0, 0,
			},
			[]int32{
				-1, 0, -1, -1, -1,
				-1, 0, -1, -1, -1,
				-1, -1, -1, -1, -1,
			},
			[]int{3, 3, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := wp.EncodeBatch(texts, tt.opt)
			if b.B != 3 || b.T != tt.T {
				t.Fatalf("B, T = %d, %d, want 3, %d", b.B, b.T, tt.T)
			}
			if !reflect.DeepEqual(b.IDs, tt.ids) {
				t.Errorf("IDs = %v, want %v", b.IDs, tt.ids)
			}
			if !reflect.DeepEqual(b.Words, tt.words) {
				t.Errorf("Words = %v, want %v", b.Words, tt.words)
			}
			if !reflect.DeepEqual(b.Lens, tt.lens) {
				t.Errorf("Lens = %v, want %v", b.Lens, tt.lens)
			}
			fm := b.FloatMask()
			for i, m := range b.Mask {
				if want := i%b.T < b.Lens[i/b.T]; m != want || (fm[i] == 1) != want {
					t.Errorf("Mask[%d] = %v, FloatMask %v, want %v", i, m, fm[i], want)
				}
			}
			if got := b.Row(1); !reflect.DeepEqual(got, tt.ids[tt.T:2*tt.T]) {
				t.Errorf("Row(1) = %v", got)
			}
		})
	}
	if b := wp.EncodeBatch(nil, EncodeOptions{}); b.B != 0 || b.T != 0 || len(b.IDs) != 0 {
		t.Errorf("EncodeBatch(nil) = %+v, want empty", b)
	}
}

func TestWordTokens(t *testing.T) {
	wp := testWordPiece(t)
	caption := "Unwanted  running, hello"
	e := wp.Encode(caption, 0)
	// [CLS] un ##want ##ed runn ##ing , hello [SEP]
	got := WordTokens(e.Words, len(strings.Fields(caption)))
	want := [][]int{{1, 2, 3}, {4, 5, 6}, {7}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WordTokens = %v, want %v", got, want)
	}
	e = wp.Encode(caption, 4) // [CLS] un ##want [SEP]
	got = WordTokens(e.Words, 3)
	want = [][]int{{1, 2}, nil, nil}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WordTokens truncated = %v, want %v", got, want)
	}
}

func TestNewWordPieceNeedsSpecials(t *testing.T) {
	for _, sp := range []string{TokenPad, TokenUnk, TokenCLS, TokenSEP} {
		var toks []string
		for _, tok := range testTokens {
			if tok != sp {
				toks = append(toks, tok)
			}
		}
		_, err := NewWordPiece(NewVocab(toks))
		if err == nil || !strings.Contains(err.Error(), sp) {
			t.Errorf("vocabulary without %s: err = %v, want one naming it", sp, err)
		}
	}
	if _, err := LoadWordPiece(filepath.Join(t.TempDir(), "missing.txt")); err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Errorf("LoadWordPiece(missing) err = %v, want one naming the file", err)
	}
}

// TestRealVocab checks bert-base-uncased cases whose pieces were checked
// against the vocabulary by hand (grep -nx): for "unaffable", "una" is in
// the vocabulary but not "unaf" or "unaff"; then "##ffa" is, but no longer
// "##ffa..."; then "##ble" (so not the "una ##ff ##able" of the
// BERT README's example vocabulary).
func TestRealVocab(t *testing.T) {
	wp := realWordPiece(t)
	if n := wp.Vocab().Len(); n != 30522 {
		t.Errorf("vocabulary size %d, want 30522", n)
	}
	if wp.PadID() != 0 || wp.UnkID() != 100 || wp.CLSID() != 101 || wp.SEPID() != 102 {
		t.Errorf("specials pad/unk/cls/sep = %d/%d/%d/%d, want 0/100/101/102", wp.PadID(), wp.UnkID(), wp.CLSID(), wp.SEPID())
	}
	tests := []struct {
		in   string
		want string
	}{
		{"a man riding a horse on the beach .", "a man riding a horse on the beach ."},
		{"A man riding a horse on the beach.", "a man riding a horse on the beach ."},
		{"skateboarding", "skate ##boarding"},
		{"unaffable", "una ##ffa ##ble"},
		{"A giraffe and a frisbee near the surfboard.", "a gi ##raf ##fe and a fr ##is ##bee near the surf ##board ."},
		{"Two dogs' toys", "two dogs ' toys"},
		{"Café crème brûlée", "cafe cr ##eme br ##ule ##e"},
		{"\u7684\u4E2D", "\u7684 \u4E2D"},
		{"\u039F\u0394\u039F\u03A3", "\u03BF ##\u03B4 ##\u03BF\u03C2"},
		{"[CLS]", "[ cl ##s ]"},
		{strings.Repeat("x", 101), "[UNK]"},
	}
	for _, tt := range tests {
		got := strings.Join(wp.Tokenize(tt.in), " ")
		if got != tt.want {
			t.Errorf("Tokenize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// The HuggingFace documentation's example: tokenizer("Hello, my dog is
	// cute")["input_ids"].
	e := wp.Encode("Hello, my dog is cute", 0)
	if want := []int32{101, 7592, 1010, 2026, 3899, 2003, 10140, 102}; !reflect.DeepEqual(e.IDs, want) {
		t.Errorf("Encode(Hello, my dog is cute) = %v, want %v", e.IDs, want)
	}
}

// TestRealVocabMatchesReference compares the tokenizer with the literal
// transcription of tokenization.py on random text mixing ASCII, accents,
// Greek, CJK, punctuation, spaces and control characters.
func TestRealVocabMatchesReference(t *testing.T) {
	wp := realWordPiece(t)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:'\"!?-()[]#$%& \t\n\r\x00\x01\v" +
		"\u00E9\u00E8\u00FC\u00F1\u00E7\u00C5\u0301\u0308 \u00A0\u2028\u200B\uFFFD\u0085" +
		"\u0391\u03A3\u03B1\u03C3\u039F\u0394 \u4E2D\u6587\uF900\u3053\uD55C \u2014\u00BF\u00A9\u1FEF\u0130\u01C5\uFB01")
	for range 3000 {
		n := rng.IntN(40)
		rs := make([]rune, n)
		for i := range rs {
			rs[i] = alphabet[rng.IntN(len(alphabet))]
		}
		s := string(rs)
		got := wp.Tokenize(s)
		want := refTokenize(wp.vocab.ids, s)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("Tokenize(%q) = %q, reference gives %q", s, got, want)
		}
	}
}

func TestWordPieceConcurrent(t *testing.T) {
	wp := testWordPiece(t)
	want := strings.Join(wp.Tokenize("UNwant\u00E9d,running \u535A"), " ")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if got := strings.Join(wp.Tokenize("UNwant\u00E9d,running \u535A"), " "); got != want {
					t.Errorf("concurrent Tokenize = %q, want %q", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

package text

import (
	"reflect"
	"testing"
)

func TestStopWords(t *testing.T) {
	if n := len(StopWords()); n != 179 {
		t.Errorf("%d stop words, want NLTK's 179", n)
	}
	seen := map[string]bool{}
	for _, w := range StopWords() {
		if seen[w] {
			t.Errorf("duplicate stop word %q", w)
		}
		seen[w] = true
	}
	for _, w := range []string{"a", "the", "The", "of", "is", "on", "with", "don't", "t", "s", "wouldn"} {
		if !IsStopWord(w) {
			t.Errorf("IsStopWord(%q) = false", w)
		}
	}
	for _, w := range []string{"", "man", "dog", "riding", ",", "able", "thei"} {
		if IsStopWord(w) {
			t.Errorf("IsStopWord(%q) = true", w)
		}
	}
}

func TestStopWordMask(t *testing.T) {
	tests := []struct {
		name   string
		tokens []string
		words  []int32
		want   []bool
	}{
		{"simple",
			[]string{"[CLS]", "a", "man", "on", "the", "beach", "[SEP]"},
			[]int32{-1, 0, 1, 2, 3, 4, -1},
			[]bool{false, true, false, true, true, false, false}},
		{"continuation joins its word",
			[]string{"the", "##ir", "a", "##ble", "dog", "##s"},
			[]int32{0, 0, 1, 1, 2, 2},
			[]bool{true, true, false, false, false, false}},
		{"punctuation splits",
			[]string{"don", "'", "t", "go"},
			[]int32{0, 0, 0, 1},
			[]bool{true, false, true, false}},
		{"continuation across word indices does not join",
			[]string{"the", "##ir"},
			[]int32{0, 1},
			[]bool{true, false}},
		{"nil words",
			[]string{"the", "##ir", "cat", "[PAD]"},
			nil,
			[]bool{true, true, false, false}},
		{"padding", []string{"[CLS]", "a", "[SEP]", "[PAD]"}, []int32{-1, 0, -1, -1}, []bool{false, true, false, false}},
		{"empty", nil, nil, []bool{}},
	}
	for _, tt := range tests {
		if got := StopWordMask(tt.tokens, tt.words); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: StopWordMask(%q, %v) = %v, want %v", tt.name, tt.tokens, tt.words, got, tt.want)
		}
	}
}

func TestWordPieceStopWordMask(t *testing.T) {
	wp := testWordPiece(t)
	e := wp.Encode("The unwanted cafe, how are you?", 0)
	// [CLS] the un ##want ##ed cafe , how are you ? [SEP]
	want := []bool{false, true, false, false, false, false, false, true, true, true, false, false}
	if got := wp.StopWordMask(e.IDs, e.Words); !reflect.DeepEqual(got, want) {
		t.Errorf("StopWordMask = %v, want %v (tokens %q)", got, want, wp.Tokens(e.IDs))
	}
}

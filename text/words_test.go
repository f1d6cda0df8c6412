package text

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var wordCaptions = []string{
	"A dog runs on the grass.",
	"The dog, a puppy, plays.",
	"A CAT sleeps on the sofa",
	"Café dog dog",
}

func TestBuildWordVocab(t *testing.T) {
	tests := []struct {
		minCount int
		want     []string
	}{
		// Counts: dog 4, a 3, the 3, . 2, on 2, then one each.
		{2, []string{"<pad>", "<start>", "<end>", "<unk>", "dog", "a", "the", ",", ".", "on"}},
		{4, []string{"<pad>", "<start>", "<end>", "<unk>", "dog"}},
		{5, []string{"<pad>", "<start>", "<end>", "<unk>"}},
		{0, []string{"<pad>", "<start>", "<end>", "<unk>", "dog", "a", "the", ",", ".", "on",
			"cafe", "cat", "grass", "plays", "puppy", "runs", "sleeps", "sofa"}},
	}
	for _, tt := range tests {
		got := BuildWordVocab(wordCaptions, tt.minCount).Vocab().Tokens()
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("BuildWordVocab(min %d) = %q, want %q", tt.minCount, got, tt.want)
		}
	}
}

func TestWordVocabEncode(t *testing.T) {
	wv := BuildWordVocab(wordCaptions, 2)
	// ids: dog 4, a 5, the 6, "," 7, "." 8, on 9
	tests := []struct {
		in        string
		maxLen    int
		ids       []int32
		words     []int32
		truncated bool
	}{
		{"A dog on the moon.", 0, []int32{1, 5, 4, 9, 6, 3, 8, 2}, []int32{-1, 0, 1, 2, 3, 4, 4, -1}, false},
		{"A dog on the moon.", 4, []int32{1, 5, 4, 2}, []int32{-1, 0, 1, -1}, true},
		{"", 0, []int32{1, 2}, []int32{-1, -1}, false},
		{"<pad>", 0, []int32{1, 3, 3, 3, 2}, []int32{-1, 0, 0, 0, -1}, false},
	}
	for _, tt := range tests {
		e := wv.Encode(tt.in, tt.maxLen)
		if !reflect.DeepEqual(e.IDs, tt.ids) || !reflect.DeepEqual(e.Words, tt.words) || e.Truncated != tt.truncated {
			t.Errorf("Encode(%q, %d) = %v %v %v, want %v %v %v", tt.in, tt.maxLen, e.IDs, e.Words, e.Truncated, tt.ids, tt.words, tt.truncated)
		}
	}
	b := wv.EncodeBatch([]string{"the dog", "a"}, EncodeOptions{PadTo: 5})
	wantIDs := []int32{1, 6, 4, 2, 0, 1, 5, 2, 0, 0}
	wantMask := []bool{true, true, true, true, false, true, true, true, false, false}
	if b.B != 2 || b.T != 5 || !reflect.DeepEqual(b.IDs, wantIDs) || !reflect.DeepEqual(b.Mask, wantMask) || !reflect.DeepEqual(b.Lens, []int{4, 3}) {
		t.Errorf("EncodeBatch = %+v, want IDs %v Mask %v", b, wantIDs, wantMask)
	}
}

func TestWordVocabSaveLoad(t *testing.T) {
	wv := BuildWordVocab(wordCaptions, 1)
	path := filepath.Join(t.TempDir(), "words.txt")
	if err := wv.Save(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "<pad>\n<start>\n<end>\n<unk>\ndog\n") {
		t.Errorf("file starts %q", b[:min(len(b), 40)])
	}
	got, err := LoadWordVocab(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Vocab().Tokens(), wv.Vocab().Tokens()) || got.Len() != wv.Len() {
		t.Errorf("round trip = %q, want %q", got.Vocab().Tokens(), wv.Vocab().Tokens())
	}
}

func TestNewWordVocabErrors(t *testing.T) {
	tests := []struct {
		toks []string
		want string
	}{
		{[]string{"<pad>", "<start>", "<end>"}, "token 3 must be <unk>"},
		{[]string{"<start>", "<pad>", "<end>", "<unk>"}, "token 0 must be <pad>"},
		{[]string{"<pad>", "<start>", "<end>", "<unk>", "x", "<end>"}, "<end> appears again as token 5"},
	}
	for _, tt := range tests {
		_, err := NewWordVocab(NewVocab(tt.toks))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewWordVocab(%q) err = %v, want %q", tt.toks, err, tt.want)
		}
	}
	path := filepath.Join(t.TempDir(), "bad.txt")
	if err := os.WriteFile(path, []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadWordVocab(path); err == nil || !strings.Contains(err.Error(), "bad.txt") {
		t.Errorf("LoadWordVocab(bad) err = %v, want one naming the file", err)
	}
}

package text

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestReadVocab(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"final newline", "[PAD]\nhello\n##lo\n", []string{"[PAD]", "hello", "##lo"}},
		{"no final newline", "a\nb", []string{"a", "b"}},
		{"crlf", "a\r\nb\r\n", []string{"a", "b"}},
		{"empty line keeps ids", "a\n\nb\n", []string{"a", "", "b"}},
		{"spaces are kept", " a \n", []string{" a "}},
		{"single newline", "\n", []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := ReadVocab(strings.NewReader(tt.in), "v.txt")
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Tokens(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("tokens = %q, want %q", got, tt.want)
			}
			for i, tok := range tt.want {
				if id, ok := v.ID(tok); !ok || v.Token(id) != tok || (id != int32(i) && strings.Count(tt.in, tok+"\n") < 2) {
					t.Errorf("ID(%q) = %d, %v", tok, id, ok)
				}
			}
		})
	}
}

func TestReadVocabDuplicateLastWins(t *testing.T) {
	v, err := ReadVocab(strings.NewReader("a\nb\na\n"), "v.txt")
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := v.ID("a"); id != 2 || v.Len() != 3 || v.Token(0) != "a" {
		t.Errorf("ID(a) = %d, Len %d; want 2, 3 (HuggingFace load_vocab: the last line wins)", id, v.Len())
	}
}

func TestReadVocabErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // substring of the error
	}{
		{"empty", "", "v.txt: file is empty"},
		{"invalid utf8", "a\nb\xff\n", "v.txt:2: token is not valid UTF-8"},
		{"tab", "a\nb\n3\tc\n", "v.txt:3: token \"3\\tc\" holds a tab"},
	}
	for _, tt := range tests {
		_, err := ReadVocab(strings.NewReader(tt.in), "v.txt")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
	_, err := LoadVocab(filepath.Join(t.TempDir(), "nope.txt"))
	if err == nil || !strings.Contains(err.Error(), "nope.txt") {
		t.Errorf("LoadVocab(missing) err = %v, want one naming the file", err)
	}
}

func TestVocabSaveLoad(t *testing.T) {
	toks := []string{"[PAD]", "", "x y", "\u00E9", "##a"}
	path := filepath.Join(t.TempDir(), "vocab.txt")
	if err := NewVocab(toks).Save(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "[PAD]\n\nx y\n\u00E9\n##a\n"; string(b) != want {
		t.Errorf("file = %q, want %q", b, want)
	}
	v, err := LoadVocab(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v.Tokens(), toks) {
		t.Errorf("round trip = %q, want %q", v.Tokens(), toks)
	}
	if _, err := NewVocab([]string{"a\nb"}).WriteTo(&bytes.Buffer{}); err == nil {
		t.Error("WriteTo accepted a token with a newline")
	}
	if err := NewVocab([]string{"a\tb"}).Save(path); err == nil {
		t.Error("Save accepted a token with a tab")
	}
	if v, err := LoadVocab(path); err != nil || v.Len() != len(toks) {
		t.Errorf("a failed Save changed the file: %v, %v", v, err)
	}
}

func TestRealVocabFile(t *testing.T) {
	if _, err := os.Stat(realVocabPath); err != nil {
		t.Skipf("skipping: BERT vocabulary %s not found (it lives in ../shared/data beside the repository)", realVocabPath)
	}
	v, err := LoadVocab(realVocabPath)
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]int32{"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103, "the": 1996, "##s": 2015} {
		if id, ok := v.ID(tok); !ok || id != want {
			t.Errorf("ID(%q) = %d, %v; want %d", tok, id, ok, want)
		}
	}
	var buf bytes.Buffer
	if _, err := v.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(realVocabPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), orig) {
		t.Error("WriteTo does not reproduce vocab.txt byte for byte")
	}
}

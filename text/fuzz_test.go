package text

import (
	"bytes"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	"",
	"unwanted running",
	"UNwant\u00E9d,running",
	" \tHeLLo!how  \n Are yoU?  ",
	"ah\u535A\u63A8zz",
	"a\x00b\vc\u200Bd\xffe",
	"\u039F\u0394\u039F\u03A3 \u0391\u03A3'\u0391",
	"a\u1FEFb \uF900 \uD55C \u0130",
	"A man riding a horse on the beach.",
	strings.Repeat("a", MaxWordChars+1),
}

// FuzzWordPiece checks the tokenizer against the reference transcription of
// tokenization.py, on the small test vocabulary and, when present, on
// bert-base-uncased, and checks the invariants of its output.
func FuzzWordPiece(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	wps := []*WordPiece{testWordPiece(f)}
	if _, err := os.Stat(realVocabPath); err == nil {
		wps = append(wps, realWordPiece(f))
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := BasicTokenize(s), refBasic(s); !reflect.DeepEqual(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("BasicTokenize(%q) = %q, reference %q", s, got, want)
		}
		nFields := len(strings.Fields(s))
		for _, wp := range wps {
			ids, words := wp.TokenizeIDs(s)
			if len(ids) != len(words) {
				t.Fatalf("%d ids, %d words", len(ids), len(words))
			}
			toks := wp.Tokens(ids)
			if want := refTokenize(wp.vocab.ids, s); !reflect.DeepEqual(toks, want) && len(toks)+len(want) > 0 {
				t.Fatalf("Tokenize(%q) = %q, reference %q", s, toks, want)
			}
			for i, id := range ids {
				if id < 0 || int(id) >= wp.vocab.Len() {
					t.Fatalf("id %d out of range", id)
				}
				if id == wp.cls || id == wp.sep || id == wp.pad {
					t.Fatalf("Tokenize(%q) produced special id %d", s, id)
				}
				if words[i] < 0 || int(words[i]) >= nFields || (i > 0 && words[i] < words[i-1]) {
					t.Fatalf("Tokenize(%q): word indices %v not non-decreasing in [0, %d)", s, words, nFields)
				}
				if i == 0 && strings.HasPrefix(toks[i], "##") {
					t.Fatalf("Tokenize(%q) starts with a continuation %q", s, toks[0])
				}
			}
			e := wp.Encode(s, 8)
			if len(e.IDs) > 8 || e.IDs[0] != wp.cls || e.IDs[len(e.IDs)-1] != wp.sep || e.Truncated != (len(ids) > 6) {
				t.Fatalf("Encode(%q, 8) = %+v", s, e)
			}
			if !slices.Equal(e.IDs[1:len(e.IDs)-1], ids[:len(e.IDs)-2]) {
				t.Fatalf("Encode(%q, 8) = %v, not a prefix of %v", s, e.IDs, ids)
			}
		}
	})
}

// FuzzReadVocab checks that any input either fails cleanly or gives one
// token per line that survives a write and a re-read.
func FuzzReadVocab(f *testing.F) {
	for _, s := range []string{"", "\n", "a\nb\n", "a\r\nb", "[PAD]\n[UNK]\n##x\n\n", "a\tb\n", "\xff\n", "a\nb\na"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ReadVocab(bytes.NewReader(data), "fuzz.txt")
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.txt") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if v.Len() != len(lines) {
			t.Fatalf("%d tokens from %d lines", v.Len(), len(lines))
		}
		for i, l := range lines {
			tok := v.Token(int32(i))
			if tok != strings.TrimSuffix(l, "\r") || !utf8.ValidString(tok) {
				t.Fatalf("token %d = %q from line %q", i, tok, l)
			}
			if id, ok := v.ID(tok); !ok || v.Token(id) != tok || id < int32(i) {
				t.Fatalf("ID(%q) = %d, %v", tok, id, ok)
			}
		}
		var buf bytes.Buffer
		if _, err := v.WriteTo(&buf); err != nil {
			// A token ending in "\r" was written with "\r\n"; it cannot be
			// written back unambiguously.
			return
		}
		w, err := ReadVocab(&buf, "again")
		if err != nil || !reflect.DeepEqual(w.Tokens(), v.Tokens()) {
			t.Fatalf("re-read = %v, %v; want %q", w, err, v.Tokens())
		}
		if wp, err := NewWordPiece(v); err == nil {
			// A vocabulary with the specials must tokenize without panicking.
			wp.Tokenize("a ## ab\u00E9 [UNK]")
		}
	})
}

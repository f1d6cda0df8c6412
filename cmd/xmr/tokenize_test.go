package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/text"
)

func TestTokenizeStream(t *testing.T) {
	wp, err := text.NewWordPiece(text.NewVocab([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##want", "##ed", "runn", "##ing", ","}))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("running ", 200000) // a 1.6 MB line, longer than the read buffer
	tests := []struct {
		name, in, tokens, ids string
	}{
		{"lines", "Unwanted, running\nxyz\n", "un ##want ##ed , runn ##ing\n[UNK]\n", "4 5 6 9 7 8\n1\n"},
		{"empty lines kept", "\nrunning\n\n", "\nrunn ##ing\n\n", "\n7 8\n\n"},
		{"no final newline", "running", "runn ##ing\n", "7 8\n"},
		{"crlf", "running\r\n", "runn ##ing\n", "7 8\n"},
		{"empty input", "", "", ""},
		{"long line", long + "\n", strings.TrimSuffix(strings.Repeat("runn ##ing ", 200000), " ") + "\n", strings.TrimSuffix(strings.Repeat("7 8 ", 200000), " ") + "\n"},
	}
	for _, tt := range tests {
		for _, ids := range []bool{false, true} {
			var out bytes.Buffer
			if err := tokenizeStream(context.Background(), wp, strings.NewReader(tt.in), &out, ids); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			want := tt.tokens
			if ids {
				want = tt.ids
			}
			if out.String() != want {
				got, w := out.String(), want
				if len(got) > 80 {
					got, w = got[:80]+"...", w[:min(80, len(w))]+"..."
				}
				t.Errorf("%s (ids=%v): got %q, want %q", tt.name, ids, got, w)
			}
		}
	}
}

func TestTokenizeCommandErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.txt")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	nospecial := filepath.Join(dir, "nospecial.txt")
	if err := os.WriteFile(nospecial, []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"tokenize"}, 2, "--vocab is required"},
		{[]string{"tokenize", "--vocab", filepath.Join(dir, "missing.txt")}, 1, "missing.txt"},
		{[]string{"tokenize", "--vocab", empty}, 1, empty + ": file is empty"},
		{[]string{"tokenize", "--vocab", nospecial}, 1, "nospecial.txt: wordpiece: vocabulary has no [PAD] token"},
		{[]string{"tokenize", "--vocab", empty, "extra"}, 2, "unexpected arguments"},
	}
	for _, tt := range tests {
		tokenizeFlags.vocab, tokenizeFlags.ids = "", false
		var stdout, stderr bytes.Buffer
		code := runMain(tt.args, &stdout, &stderr)
		if code != tt.code || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("xmr %q: exit %d, stderr %q; want exit %d and %q", tt.args, code, stderr.String(), tt.code, tt.want)
		}
	}
}

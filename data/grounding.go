package data

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/xmr-project/xmr/internal/infile"
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

	// Where ReadGrounding read the record, for CheckGrounding's errors.
	file string
	line int
}

// LoadGrounding reads dir/{split}_align.jsonl, one JSON object per caption
// in caption order. It returns nil and no error when the file does not
// exist (real datasets have no such ground truth).
func LoadGrounding(dir, split string) ([]Grounding, error) {
	path := filepath.Join(dir, split+"_align.jsonl")
	f, err := infile.Open(path)
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
		g.file, g.line = name, line
		out = append(out, g)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// CheckGrounding checks ground truth against the split it describes: at
// most one record per caption, and in each record an image of the split,
// word indices within the caption's words and regions within the R region
// slots. A record out of range is an error naming its file and line (it
// was skipped without a word, and the alignment accuracy then counted
// fewer words than the file holds).
func CheckGrounding(gs []Grounding, s *Split) error {
	if len(gs) > s.NumCaptions() {
		g := gs[s.NumCaptions()]
		return fmt.Errorf("%s line %d: caption %d, but split %s has %d captions", g.file, g.line, g.Caption, s.Name, s.NumCaptions())
	}
	for c, g := range gs {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%s line %d: caption %d: %s", g.file, g.line, c, fmt.Sprintf(format, args...))
		}
		if g.Image < 0 || g.Image >= s.NumImages() {
			return bad("image %d is outside the %d images of split %s", g.Image, s.NumImages(), s.Name)
		}
		words := len(strings.Fields(s.Captions[c]))
		for _, w := range g.Words {
			if w.Index >= words {
				return bad("word %q has index %d, the caption has %d words", w.Word, w.Index, words)
			}
			for _, r := range w.Correct() {
				if r < 0 || r >= s.Images.R {
					return bad("word %q has region %d, outside the %d region slots of split %s", w.Word, r, s.Images.R, s.Name)
				}
			}
		}
	}
	return nil
}

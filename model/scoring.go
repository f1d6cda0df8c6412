package model

import (
	"fmt"
	"strings"
)

// Scoring says how an image and a caption are compared once encoded: by
// their global vectors (cosine, or SEAM's order-embedding similarity), or
// by pooling the alignment matrix of their region and word vectors (TERAN
// eq. 3-4). The zero value is not a valid scoring;
// ParseScoring and UnmarshalText accept only the constants below.
type Scoring string

// The scorings.
const (
	// Global is the cosine of the two global vectors (TERN's I-CLS and
	// T-CLS; for TERAN the normalised mean of the region or word vectors).
	Global Scoring = "global"
	// Order is the order-embedding similarity of the global vectors (Vendrov
	// et al.; SEAM eq. 5): S(caption t, image i) = -||max(0, I - T)||^2,
	// minus the squared norm of the part of the image vector I that exceeds
	// the caption vector T. It is 0 when I lies below T in every
	// coordinate, negative otherwise.
	Order Scoring = "order"
	// MrSw sums over words the best region of each (max over regions, sum
	// over words): TERAN's best pooling.
	MrSw Scoring = "MrSw"
	// MwSr sums over regions the best word of each.
	MwSr Scoring = "MwSr"
	// Symm is MrSw + MwSr.
	Symm Scoring = "Symm"
	// MrAvgw is MrSw divided by the number of words.
	MrAvgw Scoring = "MrAvgw"
)

// scorings lists every scoring, in the order error messages give them.
var scorings = []Scoring{Global, Order, MrSw, MwSr, Symm, MrAvgw}

// alignmentPoolings are the scorings that pool an alignment matrix.
var alignmentPoolings = []Scoring{MrSw, MwSr, Symm, MrAvgw}

// ParseScoring accepts a scoring's name in any letter case ("mrsw" is
// MrSw); anything else is an error listing the valid names.
func ParseScoring(s string) (Scoring, error) {
	for _, v := range scorings {
		if strings.EqualFold(s, string(v)) {
			return v, nil
		}
	}
	return "", fmt.Errorf("unknown scoring %q (want %s)", s, joinScorings(scorings))
}

// Alignment reports whether s pools region-word alignments (rather than
// comparing global vectors).
func (s Scoring) Alignment() bool {
	for _, v := range alignmentPoolings {
		if s == v {
			return true
		}
	}
	return false
}

// String returns the scoring's name.
func (s Scoring) String() string { return string(s) }

// UnmarshalText parses a scoring (see ParseScoring), so that YAML configs
// and flags are validated as they are read.
func (s *Scoring) UnmarshalText(b []byte) error {
	v, err := ParseScoring(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MarshalText returns the scoring's name.
func (s Scoring) MarshalText() ([]byte, error) { return []byte(s), nil }

func joinScorings(ss []Scoring) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// Package wordnet holds the parts of Princeton WordNet 3.0 that the SPICE
// caption parser needs: which lemmas exist in which part of speech, the
// synsets of each (lemma, part of speech) in sense order, how often the
// lemma was seen in the sense-tagged corpus, a flag for nouns whose first
// sense is a person or an animal, and the morphological exception lists
// used by Morphy.
//
// The data ships embedded as a compact gzip-compressed table (see
// Embedded); Parse reads the same data from a WordNet dictionary directory
// (index.*, *.exc, cntlist.rev, data.noun), which is how the table is
// generated and how XMR_WORDNET overrides it at run time.
package wordnet

import (
	"strings"
)

// POS is a WordNet part of speech.
type POS uint8

// The four WordNet parts of speech. Adjective satellites count as Adj.
const (
	Noun POS = iota
	Verb
	Adj
	Adv
	// NumPOS is the number of parts of speech.
	NumPOS
)

// String returns the WordNet file suffix of p ("noun", "verb", "adj", "adv").
func (p POS) String() string {
	switch p {
	case Noun:
		return "noun"
	case Verb:
		return "verb"
	case Adj:
		return "adj"
	case Adv:
		return "adv"
	}
	return "pos?"
}

// Flags of a lemma, stored beside its parts of speech.
const (
	// FlagAnimate marks a noun whose first sense is a person or an animal
	// (its hypernym closure holds person.n.01 or animal.n.01), when that
	// sense is known to be the most frequent one (the lemma has a corpus
	// frequency) or most of the lemma's senses are animate.
	FlagAnimate uint8 = 1 << 4
)

// entry is one lemma's data: per part of speech a slice of DB.senses and a
// corpus frequency.
type entry struct {
	start [NumPOS]uint32
	n     [NumPOS]uint16
	freq  [NumPOS]uint32
	mask  uint8 // bit p set when the lemma exists as POS p; plus flags
}

// DB is a read-only WordNet lexicon. Lemmas are lower case, with '_' between
// the words of a collocation ("fire_hydrant"). A DB is safe for concurrent
// use.
type DB struct {
	index    map[string]int32
	lemmas   []string // sorted
	entries  []entry  // parallel to lemmas
	senses   []int32  // synset ids, dense in [0, nSynsets)
	nSynsets int
	exc      [NumPOS]map[string][]string
}

// Len returns the number of distinct lemmas.
func (db *DB) Len() int { return len(db.lemmas) }

// NumSynsets returns the number of synsets.
func (db *DB) NumSynsets() int { return db.nSynsets }

// NumSenses returns the number of (lemma, synset) pairs.
func (db *DB) NumSenses() int { return len(db.senses) }

func (db *DB) lookup(lemma string) (*entry, bool) {
	i, ok := db.index[lemma]
	if !ok {
		return nil, false
	}
	return &db.entries[i], true
}

// Has reports whether lemma exists with part of speech pos.
func (db *DB) Has(lemma string, pos POS) bool {
	e, ok := db.lookup(lemma)
	return ok && e.mask&(1<<pos) != 0
}

// HasAny reports whether lemma exists in any part of speech.
func (db *DB) HasAny(lemma string) bool {
	_, ok := db.index[lemma]
	return ok
}

// Synsets returns the synset ids of lemma as pos, most frequent sense first.
// The slice belongs to the DB and must not be modified.
func (db *DB) Synsets(lemma string, pos POS) []int32 {
	e, ok := db.lookup(lemma)
	if !ok || e.mask&(1<<pos) == 0 {
		return nil
	}
	return db.senses[e.start[pos] : e.start[pos]+uint32(e.n[pos])]
}

// Freq returns how often lemma was tagged as pos in WordNet's sense-tagged
// corpus (the sum over its senses in cntlist.rev); 0 when unknown.
func (db *DB) Freq(lemma string, pos POS) int {
	e, ok := db.lookup(lemma)
	if !ok {
		return 0
	}
	return int(e.freq[pos])
}

// Animate reports whether noun lemma's first sense is a person or an animal.
func (db *DB) Animate(lemma string) bool {
	e, ok := db.lookup(lemma)
	return ok && e.mask&FlagAnimate != 0
}

// Exceptions returns the base forms listed for an irregular inflected form
// in the pos exception list (noun.exc, verb.exc, ...), or nil.
func (db *DB) Exceptions(word string, pos POS) []string {
	return db.exc[pos][word]
}

// detachment rules of WordNet's morphy (morph.c), per part of speech.
var rules = [NumPOS][][2]string{
	Noun: {{"s", ""}, {"ses", "s"}, {"xes", "x"}, {"zes", "z"}, {"ches", "ch"}, {"shes", "sh"}, {"men", "man"}, {"ies", "y"}},
	Verb: {{"s", ""}, {"ies", "y"}, {"es", "e"}, {"es", ""}, {"ed", "e"}, {"ed", ""}, {"ing", "e"}, {"ing", ""}},
	Adj:  {{"er", ""}, {"est", ""}, {"er", "e"}, {"est", "e"}},
	Adv:  nil,
}

// Morphy returns the base forms of word as pos that exist in WordNet, in
// WordNet's order: forms from the exception list first, then forms made by
// the detachment rules; word itself is not included unless a rule or the
// exception list yields it (see Base for the usual lemmatiser). Spaces are
// read as '_'.
func (db *DB) Morphy(word string, pos POS) []string {
	word = strings.ReplaceAll(word, " ", "_")
	var out []string
	add := func(s string) {
		if s == "" || !db.Has(s, pos) {
			return
		}
		for _, o := range out {
			if o == s {
				return
			}
		}
		out = append(out, s)
	}
	for _, b := range db.exc[pos][word] {
		add(b)
	}
	for _, r := range rules[pos] {
		if strings.HasSuffix(word, r[0]) && len(word) > len(r[0]) {
			add(word[:len(word)-len(r[0])] + r[1])
		}
	}
	// Collocations: inflect the last word ("tennis_shoes", "police_women").
	if i := strings.LastIndexByte(word, '_'); i > 0 && i < len(word)-1 && pos == Noun {
		head, last := word[:i+1], word[i+1:]
		for _, b := range db.exc[pos][last] {
			add(head + b)
		}
	}
	return out
}

// Base returns the lemma of word as pos: the first base form in the
// exception list ("men" -> "man", "bigger" -> "big", although "men" and
// "bigger" are WordNet lemmas too), else word itself when it is a WordNet
// lemma, else, of the forms the detachment rules make, the one most
// frequent in the sense-tagged corpus, the first on ties ("riding" -> "ride"
// rather than "rid", "swinging" -> "swing" rather than "swinge"). ok is
// false when none exists.
func (db *DB) Base(word string, pos POS) (lemma string, ok bool) {
	word = strings.ReplaceAll(word, " ", "_")
	for _, b := range db.exc[pos][word] {
		if db.Has(b, pos) {
			return b, true
		}
	}
	if db.Has(word, pos) {
		return word, true
	}
	m := db.Morphy(word, pos)
	if len(m) == 0 {
		return "", false
	}
	best, bestF := m[0], db.Freq(m[0], pos)
	for _, c := range m[1:] {
		if f := db.Freq(c, pos); f > bestF {
			best, bestF = c, f
		}
	}
	return best, true
}

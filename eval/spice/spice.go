// Package spice computes SPICE (Anderson et al., ECCV 2016) between captions:
// each caption is parsed into a scene graph of objects, object-attribute
// pairs and subject-relation-object triples; the captions of an image are
// merged into one graph; a candidate caption scores the F1 of its tuples
// matched against the image's tuples, where tuple elements match on equal
// lemmas or on WordNet synonymy (a shared synset).
//
// TERAN and TERN use SPICE as the relevance tau(caption, image) of the
// NDCG metric. The official tool is Java on Stanford CoreNLP; this package
// is a deterministic Go reimplementation for caption English: a tokenizer, a
// WordNet-derived part-of-speech lexicon and lemmatiser (Morphy) and a
// rule-based chunker replace the dependency parser. docs/spice.md gives the
// rules and the differences from the Java tool.
//
// Metric.PrepareScorer (Prepare for package eval) parses every caption once
// and returns a Scorer whose Score(i, j) costs a merge of two short sorted
// integer lists, and whose ScoreRows scores whole rows through an inverted
// index: the 125M caption-image pairs of COCO 5K take seconds.
package spice

import (
	"fmt"

	"github.com/xmr-project/xmr/eval/spice/internal/wordnet"
)

// Name is the metric's registered name.
const Name = "spice"

// Metric is the SPICE relevance metric. Its zero value is not usable; make
// one with New. A Metric is safe for concurrent use.
type Metric struct {
	db  *wordnet.DB
	lex *lexicon
}

// New returns a Metric on the embedded WordNet 3.0 table, or on the WordNet
// dictionary directory named by $XMR_WORDNET when that is set.
func New() (*Metric, error) {
	db, err := wordnet.Default()
	if err != nil {
		return nil, fmt.Errorf("spice: %w", err)
	}
	return &Metric{db: db, lex: newLexicon(db)}, nil
}

// Name returns "spice".
func (m *Metric) Name() string { return Name }

// Parse returns the scene graph of one caption.
func (m *Metric) Parse(caption string) *Graph {
	v := newVocab(m.db)
	return buildGraph(v, toIDs(v, parseCaption(m.lex, caption))).export()
}

// ParseReferences returns the merged scene graph of an image's captions.
func (m *Metric) ParseReferences(captions []string) *Graph {
	v := newVocab(m.db)
	ts := make([][]idTuple, len(captions))
	for i, c := range captions {
		ts[i] = toIDs(v, parseCaption(m.lex, c))
	}
	return buildGraph(v, ts...).export()
}

// Compare scores one candidate caption against the merged graph of its
// reference captions, by the straightforward all-pairs matching. It agrees
// with Scorer.Stats and is meant for single uses and for checking.
func (m *Metric) Compare(candidate string, references []string) Stats {
	v := newVocab(m.db)
	cand := buildGraph(v, toIDs(v, parseCaption(m.lex, candidate)))
	ts := make([][]idTuple, len(references))
	for i, c := range references {
		ts[i] = toIDs(v, parseCaption(m.lex, c))
	}
	return evaluate(cand, buildGraph(v, ts...))
}

func toIDs(v *vocab, raw []rawTuple) []idTuple {
	out := make([]idTuple, len(raw))
	for i, t := range raw {
		a, b, c := v.tupleIDs(t)
		out[i] = idTuple{kind: t.kind, a: a, b: b, c: c}
	}
	return out
}

// Stats is the outcome of matching a candidate's tuples against an image's
// tuples.
type Stats struct {
	// Matched is the size of a maximum one-to-one matching between candidate
	// and reference tuples (each reference tuple matched at most once).
	Matched int
	// Candidate and Reference are the numbers of tuples on each side.
	Candidate, Reference int
	// Precision = Matched/Candidate, Recall = Matched/Reference, and F1
	// their harmonic mean; all 0 when either side is empty.
	Precision, Recall, F1 float64
}

func makeStats(matched, cand, ref int) Stats {
	s := Stats{Matched: matched, Candidate: cand, Reference: ref}
	if matched == 0 || cand == 0 || ref == 0 {
		return s
	}
	s.Precision = float64(matched) / float64(cand)
	s.Recall = float64(matched) / float64(ref)
	s.F1 = 2 * s.Precision * s.Recall / (s.Precision + s.Recall)
	return s
}

// tupleMatch reports whether a candidate tuple matches a reference tuple:
// same kind and every element similar.
func tupleMatch(a, b *ituple) bool {
	if a.kind != b.kind {
		return false
	}
	for k := 0; k < arity(a.kind); k++ {
		if !similar(a.c[k], b.c[k]) {
			return false
		}
	}
	return true
}

// evaluate is the reference implementation of the score: all candidate
// tuples against all reference tuples, then a maximum bipartite matching.
func evaluate(cand, ref *igraph) Stats {
	ct, rt := cand.tuples(), ref.tuples()
	adj := make([][]int, len(ct))
	for i := range ct {
		for j := range rt {
			if tupleMatch(&ct[i], &rt[j]) {
				adj[i] = append(adj[i], j)
			}
		}
	}
	return makeStats(maxMatching(adj, len(rt)), len(ct), len(rt))
}

// maxMatching returns the size of a maximum matching of a bipartite graph
// given as adjacency lists from the left side to right vertices [0, nRight),
// by augmenting paths (Kuhn).
func maxMatching(adj [][]int, nRight int) int {
	matchR := make([]int, nRight)
	for i := range matchR {
		matchR[i] = -1
	}
	seen := make([]uint64, (nRight+63)/64)
	var try func(u int) bool
	try = func(u int) bool {
		for _, v := range adj[u] {
			if seen[v/64]&(1<<(v%64)) != 0 {
				continue
			}
			seen[v/64] |= 1 << (v % 64)
			if matchR[v] < 0 || try(matchR[v]) {
				matchR[v] = u
				return true
			}
		}
		return false
	}
	n := 0
	for u := range adj {
		if len(adj[u]) == 0 {
			continue
		}
		clear(seen)
		if try(u) {
			n++
		}
	}
	return n
}

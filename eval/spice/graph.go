package spice

import (
	"sort"
	"strings"

	"github.com/xmr-project/xmr/eval/spice/internal/wordnet"
)

// role is the position a lemma takes in a tuple; each role has its own
// vocabulary and its own synonym rule.
type role uint8

const (
	roleObj  role = iota // objects and the ends of relations: noun synsets
	roleAttr             // attributes: adjective, noun and verb synsets
	roleRel              // relations: verb synsets with the same preposition; prepositions exactly
	numRoles
)

// vocab numbers the lemmas of each role and keeps their synonym keys: two
// lemmas of a role are synonyms when their key sets intersect.
type vocab struct {
	db    *wordnet.DB
	ids   [numRoles]map[string]int32
	words [numRoles][]string
	syn   [numRoles][][]uint64
	rests map[string]uint64
}

func newVocab(db *wordnet.DB) *vocab {
	v := &vocab{db: db, rests: map[string]uint64{}}
	for r := range v.ids {
		v.ids[r] = map[string]int32{}
	}
	return v
}

// id returns the id of w in role r, adding it when new. Not safe for
// concurrent use.
func (v *vocab) id(r role, w string) int32 {
	if id, ok := v.ids[r][w]; ok {
		return id
	}
	id := int32(len(v.words[r]))
	v.ids[r][w] = id
	v.words[r] = append(v.words[r], w)
	v.syn[r] = append(v.syn[r], v.keys(r, w))
	return id
}

var prepRelations = map[string]bool{}

func init() {
	for _, mp := range multiPreps {
		prepRelations[mp[1]] = true
	}
}

// isPrepRelation reports whether a relation is a bare preposition ("on",
// "next to"), matched only exactly.
func isPrepRelation(rel string) bool {
	first, _, _ := strings.Cut(rel, " ")
	return prepositions[first] || prepRelations[rel]
}

// keys returns the sorted synonym keys of w in role r.
func (v *vocab) keys(r role, w string) []uint64 {
	key := strings.ReplaceAll(w, " ", "_")
	var out []uint64
	add := func(ss []int32, tag uint64) {
		for _, s := range ss {
			out = append(out, tag<<32|uint64(uint32(s)))
		}
	}
	switch r {
	case roleObj:
		add(v.db.Synsets(key, wordnet.Noun), 0)
	case roleAttr:
		add(v.db.Synsets(key, wordnet.Adj), 0)
		add(v.db.Synsets(key, wordnet.Noun), 0)
		add(v.db.Synsets(key, wordnet.Verb), 0)
	case roleRel:
		if isPrepRelation(w) {
			return nil
		}
		verb, rest, _ := strings.Cut(w, " ")
		tag, ok := v.rests[rest]
		if !ok {
			tag = uint64(len(v.rests)) + 1
			v.rests[rest] = tag
		}
		add(v.db.Synsets(verb, wordnet.Verb), tag)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return dedup(out)
}

func dedup(s []uint64) []uint64 {
	if len(s) < 2 {
		return s
	}
	k := 1
	for i := 1; i < len(s); i++ {
		if s[i] != s[k-1] {
			s[k] = s[i]
			k++
		}
	}
	return s[:k]
}

// intersects reports whether two sorted key sets share a key.
func intersects(a, b []uint64) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			return true
		}
	}
	return false
}

// jaccard is |a ∩ b| / |a ∪ b| for sorted key sets.
func jaccard(a, b []uint64) float64 {
	i, j, inter := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			inter++
			i++
			j++
		}
	}
	if inter == 0 {
		return 0
	}
	return float64(inter) / float64(len(a)+len(b)-inter)
}

func union(a, b []uint64) []uint64 {
	out := make([]uint64, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i] < b[j]:
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// concept is one tuple element of a scene graph: the lemma ids merged into
// it (ids[0] first seen) and the union of their synonym keys.
type concept struct {
	ids []int32
	syn []uint64
}

func (c *concept) has(id int32) bool {
	for _, x := range c.ids {
		if x == id {
			return true
		}
	}
	return false
}

func (c *concept) merge(id int32, syn []uint64) {
	if c.has(id) {
		return
	}
	c.ids = append(c.ids, id)
	c.syn = union(c.syn, syn)
}

// similar is SPICE's test: two concepts match when they share a lemma or a
// synonym key.
func similar(a, b *concept) bool {
	for _, x := range a.ids {
		if b.has(x) {
			return true
		}
	}
	return intersects(a.syn, b.syn)
}

type inode struct {
	name  concept
	attrs []concept
}

type iedge struct {
	src, dst int
	rel      concept
}

// igraph is a scene graph over vocabulary ids, built like the Java tool's
// SceneGraph: synonymous objects, attributes and relations merge.
type igraph struct {
	v     *vocab
	nodes []inode
	edges []iedge
}

// addTuple adds one proposed tuple (as ids in their roles).
func (g *igraph) addTuple(kind tupleKind, a, b, c int32) {
	switch kind {
	case kindObject:
		g.node(a)
	case kindAttribute:
		n := g.node(a)
		syn := g.v.syn[roleAttr][b]
		attrs := g.nodes[n].attrs
		for k := range attrs {
			if attrs[k].has(b) {
				return
			}
		}
		for k := range attrs {
			if intersects(attrs[k].syn, syn) {
				attrs[k].merge(b, syn)
				return
			}
		}
		g.nodes[n].attrs = append(attrs, concept{ids: []int32{b}, syn: syn})
	case kindRelation:
		s, d := g.node(a), g.node(c)
		syn := g.v.syn[roleRel][b]
		for k := range g.edges {
			e := &g.edges[k]
			if e.src == s && e.dst == d && e.rel.has(b) {
				return
			}
		}
		for k := range g.edges {
			e := &g.edges[k]
			if e.src == s && e.dst == d && intersects(e.rel.syn, syn) {
				e.rel.merge(b, syn)
				return
			}
		}
		g.edges = append(g.edges, iedge{src: s, dst: d, rel: concept{ids: []int32{b}, syn: syn}})
	}
}

// node returns the node for object id: the node holding it, else the most
// similar node (largest Jaccard overlap of synonym keys, first on ties),
// which absorbs it, else a new node.
func (g *igraph) node(id int32) int {
	for k := range g.nodes {
		if g.nodes[k].name.has(id) {
			return k
		}
	}
	syn := g.v.syn[roleObj][id]
	best, bestSim := -1, 0.0
	if len(syn) > 0 {
		for k := range g.nodes {
			if s := jaccard(syn, g.nodes[k].name.syn); s > bestSim {
				best, bestSim = k, s
			}
		}
	}
	if best >= 0 {
		g.nodes[best].name.merge(id, syn)
		return best
	}
	g.nodes = append(g.nodes, inode{name: concept{ids: []int32{id}, syn: syn}})
	return len(g.nodes) - 1
}

// ituple is one tuple of an igraph: its kind and its one to three concepts.
type ituple struct {
	kind tupleKind
	c    [3]*concept
}

// tuples lists the graph's tuples: objects with their attributes, then
// relations.
func (g *igraph) tuples() []ituple {
	var out []ituple
	for k := range g.nodes {
		n := &g.nodes[k]
		out = append(out, ituple{kind: kindObject, c: [3]*concept{&n.name}})
		for a := range n.attrs {
			out = append(out, ituple{kind: kindAttribute, c: [3]*concept{&n.name, &n.attrs[a]}})
		}
	}
	for k := range g.edges {
		e := &g.edges[k]
		out = append(out, ituple{kind: kindRelation, c: [3]*concept{&g.nodes[e.src].name, &e.rel, &g.nodes[e.dst].name}})
	}
	return out
}

// roles of the elements of each tuple kind.
var tupleRoles = [3][3]role{
	kindObject:    {roleObj},
	kindAttribute: {roleObj, roleAttr},
	kindRelation:  {roleObj, roleRel, roleObj},
}

func arity(k tupleKind) int { return int(k) + 1 }

// ids converts a proposed tuple to vocabulary ids.
func (v *vocab) tupleIDs(t rawTuple) (a, b, c int32) {
	a = v.id(roleObj, t.a)
	switch t.kind {
	case kindAttribute:
		b = v.id(roleAttr, t.b)
	case kindRelation:
		b = v.id(roleRel, strings.TrimPrefix(t.b, "be "))
		c = v.id(roleObj, t.c)
	}
	return
}

// buildGraph builds one scene graph from the proposed tuples of one or more
// captions (already converted to ids).
func buildGraph(v *vocab, tuples ...[]idTuple) *igraph {
	g := &igraph{v: v}
	for _, ts := range tuples {
		for _, t := range ts {
			g.addTuple(t.kind, t.a, t.b, t.c)
		}
	}
	return g
}

// idTuple is a proposed tuple over vocabulary ids.
type idTuple struct {
	kind    tupleKind
	a, b, c int32
}

// Graph is a scene graph: objects with their attributes, and relations
// between objects. Each element lists the lemmas merged into it (more than
// one when synonyms merged, e.g. couch/sofa), first seen first.
type Graph struct {
	Objects   []Object
	Relations []Relation
}

// Object is a scene-graph object and its attributes.
type Object struct {
	Names      []string
	Attributes [][]string
}

// Relation links two objects of a Graph (indexes into Objects).
type Relation struct {
	Subject   int
	Predicate []string
	Object    int
}

func (g *igraph) export() *Graph {
	words := func(r role, c *concept) []string {
		out := make([]string, len(c.ids))
		for i, id := range c.ids {
			out[i] = g.v.words[r][id]
		}
		return out
	}
	G := &Graph{}
	for k := range g.nodes {
		n := &g.nodes[k]
		o := Object{Names: words(roleObj, &n.name)}
		for a := range n.attrs {
			o.Attributes = append(o.Attributes, words(roleAttr, &n.attrs[a]))
		}
		G.Objects = append(G.Objects, o)
	}
	for _, e := range g.edges {
		G.Relations = append(G.Relations, Relation{Subject: e.src, Predicate: words(roleRel, &e.rel), Object: e.dst})
	}
	return G
}

// Tuples lists the graph's tuples as strings, "(man)", "(man, tall)",
// "(man, ride, horse)", merged lemmas joined by "/", sorted.
func (g *Graph) Tuples() []string {
	var out []string
	for _, o := range g.Objects {
		name := strings.Join(o.Names, "/")
		out = append(out, "("+name+")")
		for _, a := range o.Attributes {
			out = append(out, "("+name+", "+strings.Join(a, "/")+")")
		}
	}
	for _, r := range g.Relations {
		out = append(out, "("+strings.Join(g.Objects[r.Subject].Names, "/")+", "+strings.Join(r.Predicate, "/")+", "+strings.Join(g.Objects[r.Object].Names, "/")+")")
	}
	sort.Strings(out)
	return out
}

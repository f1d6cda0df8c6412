package spice

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/xmr-project/xmr/eval/spice/internal/wordnet"
)

// class is the closed word class of a token, or clOpen for open-class words
// (nouns, verbs, adjectives, adverbs) whose reading comes from WordNet.
type class uint8

const (
	clOpen     class = iota
	clDet            // a, the, this, some, ...
	clPossPron       // his, her, its, their, ...
	clNum            // two, 3, dozen, ...
	clPrep           // on, in, next to, ...
	clConj           // and, or, but
	clSub            // while, as, when, because: joins clauses
	clPron           // he, she, it, they, them, ...
	clRel            // who, which, whose, where
	clAux            // is, are, has, can, ...
	clNeg            // not, never
	clEx             // there (existential)
	clTo             // to before a verb
	clPoss           // 's possessive
	clPunct          // , ;
	clStop           // . ! ? (sentence end)
	clThat           // that: determiner or relativiser
	clQuantAdj       // several, many, few: attributes
	clSkip           // words with no scene-graph content (also, just, ...)
)

var determiners = set("a", "an", "the", "this", "these", "those", "each", "every", "another",
	"some", "any", "no", "either", "neither", "such", "both", "all", "what", "whatever")

var possPronouns = set("my", "your", "his", "its", "our", "their", "whose")

var numbers = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`zero one two three four five six seven eight nine ten eleven
		twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty thirty forty
		fifty sixty seventy eighty ninety hundred thousand million`) {
		numbers[w] = true
	}
}

// quantAdjs are quantity words that SPICE's parser sees as adjectival
// modifiers and so turns into attributes ("several people" -> (people, several)).
var quantAdjs = set("several", "many", "few", "multiple", "numerous", "various", "much", "more", "most", "other", "others")

// prepositions are the single-word prepositions.
var prepositions = set("on", "in", "at", "of", "with", "by", "near", "under", "over", "above",
	"below", "beneath", "behind", "beside", "besides", "between", "among", "amongst", "around",
	"across", "along", "alongside", "through", "into", "onto", "inside", "outside", "against",
	"toward", "towards", "past", "from", "to", "for", "about", "after", "before", "during",
	"without", "within", "upon", "underneath", "atop", "down", "up", "off", "out", "like",
	"beyond", "throughout", "via", "amid", "around", "round", "thru", "than", "unlike", "opposite",
	"aboard", "except", "despite", "per", "since", "until", "till")

// multiPreps are multi-word prepositions, matched longest first; each
// becomes one relation ("next to"). Determiner-bearing variants map to the
// plain form ("on the top of" -> "on top of").
var multiPreps = [][2]string{
	{"in the front of", "in front of"},
	{"on the top of", "on top of"},
	{"in front of", "in front of"},
	{"on top of", "on top of"},
	{"in back of", "in back of"},
	{"on board", "on board"},
	{"next to", "next to"},
	{"close to", "close to"},
	{"near to", "near"},
	{"out of", "out of"},
	{"because of", "because of"},
	{"instead of", "instead of"},
	{"ahead of", "ahead of"},
	{"in between", "in between"},
	{"along with", "along with"},
	{"together with", "together with"},
	{"away from", "away from"},
	{"across from", "across from"},
	{"apart from", "apart from"},
	{"due to", "due to"},
	{"inside of", "inside of"},
	{"outside of", "outside of"},
	{"up against", "up against"},
	{"on to", "onto"},
	{"in to", "into"},
}

// particles may follow a verb as a verb particle ("sitting down").
var particles = set("up", "down", "out", "off", "away", "back", "over", "around", "along",
	"through", "together", "apart", "aside", "forward", "about", "on", "in", "by", "behind", "outside", "inside")

var conjunctions = set("and", "or", "but", "nor", "plus", "&")

var subordinators = set("while", "as", "when", "because", "so", "whilst", "though", "although", "if", "once", "whereas", "then")

var subjPronouns = set("he", "she", "it", "they", "we", "i", "you")

var objPronouns = set("him", "them", "us", "me", "it", "her", "you")

var reflexives = set("himself", "herself", "itself", "themselves", "myself", "yourself", "ourselves", "yourselves")

var relPronouns = set("who", "whom", "which", "where")

// beForms, haveForms, doForms and modals are the auxiliaries.
var beForms = set("is", "are", "was", "were", "be", "been", "being", "am")
var haveForms = set("has", "have", "had", "having")
var doForms = set("do", "does", "did")
var modals = set("can", "could", "will", "would", "may", "might", "must", "shall", "should")

// skipWords carry no tuple in SPICE's parser and are dropped.
var skipWords = set("also", "just", "very", "really", "too", "still", "even", "only", "almost",
	"quite", "rather", "pretty", "fairly", "somewhat", "extremely", "here", "then", "now", "yet",
	"already", "currently", "probably", "possibly", "perhaps", "maybe", "seemingly", "apparently",
	"mostly", "partially", "partly", "slightly", "nearly", "completely", "totally", "fully", "almost",
	"please", "oh", "ok", "okay", "yes", "hey", "etc", "together", "alone", "outdoors", "indoors",
	"upstairs", "downstairs", "overhead", "nearby", "ahead", "closely", "away")

// quantNouns head quantifier phrases "a Q of X" whose head is X (SPICE's
// quantificational modifiers); countQuant marks those that become an
// attribute of X ("a pair of skis" -> (ski, pair)).
var quantNouns = set("lot", "assortment", "number", "couple", "bunch", "handful", "litany", "sheaf",
	"slew", "dozen", "series", "variety", "multitude", "wad", "clutch", "mountain", "array", "spate",
	"ton", "range", "plethora", "heap", "sort", "form", "kind", "type", "version", "bit", "pair",
	"triple", "total")

var quantPlurals = set("lots", "plenty", "tons", "dozens", "multitudes", "mountains", "loads",
	"pairs", "tens", "hundreds", "thousands", "millions")

var countQuant = set("lot", "lots", "couple", "pair", "pairs", "bunch", "bunches", "handful", "dozen", "dozens",
	"number", "plenty", "tons", "loads", "hundreds", "thousands", "triple", "few", "several", "many", "multitude")

// pluralOnly are nouns kept as they are (not reduced to a singular) and
// counted as plural.
var pluralOnly = set("people", "police", "cattle", "clothes", "pants", "jeans", "shorts", "trousers",
	"glasses", "sunglasses", "eyeglasses", "goggles", "scissors", "binoculars", "headphones",
	"earphones", "tongs", "pliers", "overalls", "pajamas", "pyjamas", "leggings", "tights", "stairs",
	"surroundings", "remains", "outskirts", "belongings", "premises", "suds", "sweatpants", "groceries",
	"livestock", "poultry", "contents", "goods", "slacks", "briefs", "boxers", "fries")

// humanGroups are collective nouns that act like animate subjects.
var humanGroups = set("people", "crowd", "family", "team", "couple", "audience", "group", "herd",
	"flock", "pack", "folks", "kids", "children", "pair", "players", "persons", "individuals", "spectators")

// ingNouns are -ing words that caption writers use as nouns even after an
// inanimate noun ("a brick building", "a wooden railing").
var ingNouns = set("building", "ceiling", "clothing", "painting", "railing", "frosting", "icing",
	"topping", "toppings", "wedding", "evening", "morning", "awning", "sibling", "pudding", "stuffing",
	"dressing", "parking", "siding", "lighting", "housing", "crossing", "bedding", "living", "dining",
	"seating", "ring", "wing", "string", "swing", "spring", "sling", "king", "thing", "things",
	"buildings", "paintings", "ceilings", "railings", "wiring", "plumbing", "flooring", "tiling",
	"shelving", "fencing", "netting", "lettering", "markings", "trimmings", "fixings", "seasoning",
	"dumpling", "dumplings", "sapling", "saplings", "duckling", "ducklings", "earring", "earrings",
	"pudding", "stuffing", "outskirts", "landing", "ping")

// linkingVerbs take an adjective complement that becomes an attribute of
// the subject ("a man looks happy" -> (man, happy)).
var linkingVerbs = set("look", "seem", "appear", "become", "get", "stay", "remain", "turn", "sit", "stand", "lie", "lay", "feel", "grow")

// lexicon analyses words against WordNet and caches the analyses; it is
// safe for concurrent use.
type lexicon struct {
	db     *wordnet.DB
	words  sync.Map // string -> *lexeme
	colloc sync.Map // joined tokens -> collocation lemma, or "" when none
	n      atomic.Int64
}

// maxCached bounds the cache entries, so that adversarial input cannot grow
// memory without bound.
const maxCached = 1 << 20

func newLexicon(db *wordnet.DB) *lexicon { return &lexicon{db: db} }

// word returns the analysis of one token.
func (lx *lexicon) word(w string) lexeme {
	if l, ok := lx.words.Load(w); ok {
		return *l.(*lexeme)
	}
	l := analyse(lx.db, w)
	if lx.n.Add(1) < maxCached {
		lx.words.Store(w, &l)
	}
	return l
}

// collocation returns the WordNet noun collocation of joined tokens
// ("fire_hydrants" -> "fire_hydrant"), or "".
func (lx *lexicon) collocation(joined string) string {
	if c, ok := lx.colloc.Load(joined); ok {
		return c.(string)
	}
	lemma, found := nounLemma(lx.db, joined)
	if !found || !strings.ContainsAny(lemma, "_-") {
		lemma = ""
	}
	if lx.n.Add(1) < maxCached {
		lx.colloc.Store(joined, lemma)
	}
	return lemma
}

func set(ws ...string) map[string]bool {
	m := make(map[string]bool, len(ws))
	for _, w := range ws {
		m[w] = true
	}
	return m
}

// vform is the inflection of a verb reading.
type vform uint8

const (
	vNone vform = iota
	vBase       // ride
	vS          // rides
	vIng        // riding
	vEd         // rode, ridden, parked
)

// lexeme is the analysis of one token: its closed class or its open-class
// readings from WordNet (lemma and corpus frequency per part of speech).
type lexeme struct {
	text string
	cls  class

	noun       string // noun lemma ("" if none)
	nounPlural bool
	nounFreq   int
	known      bool // in WordNet in some part of speech (or closed class)

	verb     string // verb lemma
	form     vform
	verbFreq int

	adj     string // adjective lemma
	adjFreq int
	adv     bool
	animate bool
	ingNoun bool // surface -ing form used as a noun
}

func (l *lexeme) nounish() bool { return l.noun != "" }
func (l *lexeme) verbish() bool { return l.verb != "" }
func (l *lexeme) adjish() bool  { return l.adj != "" }

// analyse looks up one lower-case token.
func analyse(db *wordnet.DB, w string) lexeme {
	l := lexeme{text: w, known: true}
	switch {
	case w == "," || w == ";" || w == ":" || w == "(" || w == ")" || w == "\"" || w == "-" || w == "--":
		l.cls = clPunct
		return l
	case w == "." || w == "!" || w == "?":
		l.cls = clStop
		return l
	case w == "'s":
		l.cls = clPoss
		return l
	case w == "that":
		l.cls = clThat
		return l
	case determiners[w]:
		l.cls = clDet
		return l
	case possPronouns[w]:
		l.cls = clPossPron
		return l
	case numbers[w] || isDigits(w):
		l.cls = clNum
		return l
	case beForms[w] || haveForms[w] || doForms[w] || modals[w]:
		l.cls = clAux
		if w == "can" || w == "will" || w == "may" || w == "has" || w == "have" || w == "had" || w == "having" {
			break // also open-class (a can of soda, have as a main verb): decided in context
		}
		return l
	case w == "not" || w == "never" || w == "n't":
		l.cls = clNeg
		return l
	case w == "there":
		l.cls = clEx
		return l
	case conjunctions[w]:
		l.cls = clConj
		return l
	case subordinators[w] && !prepositions[w]:
		l.cls = clSub
		return l
	case relPronouns[w]:
		l.cls = clRel
		return l
	case subjPronouns[w] || objPronouns[w] || reflexives[w]:
		l.cls = clPron
		return l
	case quantAdjs[w]:
		l.cls = clQuantAdj
		l.adj = w
		if w == "others" {
			l.adj = "other"
		}
		return l
	case skipWords[w]:
		l.cls = clSkip
		return l
	case prepositions[w]:
		l.cls = clPrep
	}
	// Open-class readings.
	if pluralOnly[w] {
		l.noun, l.nounPlural = w, true
	} else if n, ok := nounLemma(db, w); ok {
		l.noun, l.nounPlural = n, n != w
	}
	if l.noun != "" {
		l.nounFreq = db.Freq(l.noun, wordnet.Noun)
		l.animate = db.Animate(l.noun) || humanGroups[w] || humanGroups[l.noun]
	}
	if v, f, ok := verbLemma(db, w); ok {
		l.verb, l.form = v, f
		l.verbFreq = db.Freq(v, wordnet.Verb)
	}
	if a, ok := db.Base(w, wordnet.Adj); ok {
		l.adj = a
		l.adjFreq = db.Freq(a, wordnet.Adj)
	}
	l.adv = db.Has(w, wordnet.Adv) || strings.HasSuffix(w, "ly") && len(w) > 4 && l.noun == "" && l.adj == ""
	if strings.HasSuffix(w, "ing") && l.form == vIng {
		l.ingNoun = ingNouns[w] || db.Has(w, wordnet.Noun) && db.Freq(w, wordnet.Noun) > l.verbFreq
	}
	if l.noun == "" && l.verb == "" && l.adj == "" && !l.adv && l.cls == clOpen {
		// Unknown word: guess from its ending; default noun.
		l.known = false
		switch {
		case strings.HasSuffix(w, "ing") && len(w) > 5:
			l.verb, l.form = strings.TrimSuffix(w, "ing"), vIng
		case strings.HasSuffix(w, "ed") && len(w) > 4:
			l.verb, l.form = strings.TrimSuffix(w, "ed"), vEd
		case strings.HasSuffix(w, "ly") && len(w) > 4:
			l.adv = true
		default:
			l.noun = w
			if strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && len(w) > 3 {
				l.noun, l.nounPlural = strings.TrimSuffix(w, "s"), true
			}
		}
	}
	return l
}

// nounLemma lemmatises w as a noun. Plurals reduce to the singular when
// WordNet has it ("dogs" -> "dog", "women" -> "woman"), even where the
// plural is a lemma of its own with a rarer sense ("arms", "lights").
func nounLemma(db *wordnet.DB, w string) (string, bool) {
	for _, b := range db.Exceptions(w, wordnet.Noun) {
		if db.Has(b, wordnet.Noun) {
			return b, true
		}
	}
	self := db.Has(w, wordnet.Noun)
	if m := db.Morphy(w, wordnet.Noun); len(m) > 0 && m[0] != w {
		if !self || db.Freq(m[0], wordnet.Noun) >= db.Freq(w, wordnet.Noun) {
			return m[0], true
		}
	}
	if self {
		return w, true
	}
	return "", false
}

// verbLemma lemmatises w as a verb and tells its inflection.
func verbLemma(db *wordnet.DB, w string) (string, vform, bool) {
	b, ok := db.Base(w, wordnet.Verb)
	if !ok {
		return "", vNone, false
	}
	switch {
	case b == w:
		return b, vBase, true
	case strings.HasSuffix(w, "ing"):
		return b, vIng, true
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss"):
		return b, vS, true
	default:
		return b, vEd, true // -ed and irregular past forms (sat, worn)
	}
}

func isDigits(w string) bool {
	if w == "" {
		return false
	}
	for i := 0; i < len(w); i++ {
		if w[i] < '0' || w[i] > '9' {
			return false
		}
	}
	return true
}

package spice

import (
	"strings"

	"github.com/xmr-project/xmr/eval/spice/internal/wordnet"
)

// This file turns one caption into proposed tuples, the way SPICE's parser
// proposes them before they enter a scene graph. It replaces the dependency
// parse and the Semgrex rules of the Java tool by a deterministic
// left-to-right pass over chunks, written for caption English; docs/spice.md
// lists the rules.

// tupleKind says which of SPICE's three tuple shapes a tuple has.
type tupleKind uint8

const (
	kindObject    tupleKind = iota // (object)
	kindAttribute                  // (object, attribute)
	kindRelation                   // (subject, relation, object)
)

// rawTuple is a proposed tuple of lemmas: (a), (a, b) or (a, b, c) with b
// the relation of a relation tuple.
type rawTuple struct {
	kind    tupleKind
	a, b, c string
}

// member is one noun phrase: its head lemma and what the parser knows of it.
type member struct {
	lemma   string
	plural  bool
	animate bool
}

// group is a set of coordinated noun phrases ("a cat and a dog") that fills
// one role; relations recorded on a group apply to every member, including
// members added later.
type group struct {
	members []*member
}

func (g *group) animate() bool {
	for _, m := range g.members {
		if m.animate {
			return true
		}
	}
	return false
}

func (g *group) plural() bool {
	return len(g.members) > 1 || len(g.members) == 1 && g.members[0].plural
}

// itemKind is the kind of the last item the parser consumed.
type itemKind uint8

const (
	itNone itemKind = iota
	itNP
	itPron
	itVerb
	itAux
	itPrep
	itConj
	itSub
	itComma
	itRel
	itAdj
	itTo
)

// verbCtx is an open predicate: a verb with its subject, waiting for
// complements.
type verbCtx struct {
	subj        *group
	form        vform
	lemma       string
	pred        string // lemma plus particles ("sit down")
	complements int
}

type grel struct {
	a    *group
	pred string
	b    *group
}

type gattr struct {
	g    *group
	attr string
}

type fronted struct {
	prep string
	g    *group
}

type parser struct {
	db *wordnet.DB
	lx []lexeme
	i  int

	objects  []*member
	objAttrs []rawTuple // (object, attribute) from noun-phrase modifiers
	gattrs   []gattr
	rels     []grel
	groups   []*group

	mainSubj, clauseSubj, lastNP *group
	last                         itemKind
	verb                         *verbCtx
	verbAdjacent                 bool // only adverbs or particles since the verb
	clauseHasVerb                bool
	auxSubj                      *group // subject of the verb after an auxiliary
	copSubj                      *group // subject after "be", awaiting a complement
	auxBe                        bool   // the last auxiliary is a form of "be"
	existential                  bool   // after "there is"
	relAnte                      *group // antecedent of a relative pronoun
	adjTarget                    *group // target of the last predicate adjective
	ppHead                       *group // head the last prepositional phrase attached to
	ppVerb                       *verbCtx
	ofHead, ofObj                *group // the last "X of Y" phrase
	front                        []fronted
}

// parseCaption returns the proposed tuples of one caption.
func parseCaption(lex *lexicon, caption string) []rawTuple {
	toks := respell(tokenize(lex.db, caption))
	p := &parser{db: lex.db, lx: lexemes(lex, toks)}
	p.run()
	return p.tuples()
}

// lexemes analyses tokens, merging WordNet noun collocations ("fire
// hydrant") and multi-word prepositions ("next to") into single lexemes.
func lexemes(lex *lexicon, toks []string) []lexeme {
	db := lex.db
	out := make([]lexeme, 0, len(toks))
	cache := make([]lexeme, len(toks))
	done := make([]bool, len(toks))
	an := func(i int) *lexeme {
		if !done[i] {
			cache[i], done[i] = lex.word(toks[i]), true
		}
		return &cache[i]
	}
outer:
	for i := 0; i < len(toks); i++ {
		// Multi-word prepositions.
		for _, mp := range multiPrepWords[toks[i]] {
			if i+len(mp.words) <= len(toks) && equalWords(toks[i:i+len(mp.words)], mp.words) {
				out = append(out, lexeme{text: mp.prep, cls: clPrep, known: true})
				i += len(mp.words) - 1
				continue outer
			}
		}
		// Noun collocations, longest first; not from a verb after a noun
		// ("zebras drinking water" is no "drinking_water").
		if l := an(i); l.cls == clOpen && !(i > 0 && (l.form == vIng && !l.ingNoun || l.form == vEd) && an(i-1).cls == clOpen && an(i-1).nounish()) {
			for k := 4; k >= 2; k-- {
				if i+k > len(toks) {
					continue
				}
				ok := true
				for j := i; j < i+k; j++ {
					if an(j).cls != clOpen {
						ok = false
						break
					}
				}
				if !ok {
					continue
				}
				joined := strings.Join(toks[i:i+k], "_")
				lemma := lex.collocation(joined)
				if lemma == "" && k == 2 {
					joined = toks[i] + "-" + toks[i+1] // "close up" -> "close-up"
					lemma = lex.collocation(joined)
				}
				if first := an(i); lemma == "" || !adjCollocations[lemma] && (!first.nounish() || first.adjFreq > first.nounFreq) {
					continue // "old man" is an old man, not old_man
				}
				out = append(out, lexeme{
					text: joined, cls: clOpen, known: true,
					noun: strings.ReplaceAll(lemma, "_", " "), nounPlural: lemma != joined,
					nounFreq: db.Freq(lemma, wordnet.Noun), animate: db.Animate(lemma),
				})
				i += k - 1
				continue outer
			}
		}
		out = append(out, *an(i))
	}
	return out
}

// multiPrepWords indexes multiPreps by first word, longest first.
var multiPrepWords = map[string][]struct {
	words []string
	prep  string
}{}

func init() {
	for _, mp := range multiPreps {
		ws := strings.Fields(mp[0])
		multiPrepWords[ws[0]] = append(multiPrepWords[ws[0]], struct {
			words []string
			prep  string
		}{ws, mp[1]})
	}
}

func equalWords(a, b []string) bool {
	for i := range b {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// Lookahead helpers.

func (p *parser) at(i int) *lexeme {
	if i < 0 || i >= len(p.lx) {
		return nil
	}
	return &p.lx[i]
}

func (p *parser) textAt(i int) string {
	if l := p.at(i); l != nil {
		return l.text
	}
	return ""
}

// skipFillers returns the first index at or after i that is not an adverb,
// negation or filler word.
func (p *parser) skipFillers(i int) int {
	for {
		l := p.at(i)
		if l == nil {
			return i
		}
		if l.cls == clNeg || l.cls == clSkip || l.cls == clOpen && isAdverbOnly(l) {
			i++
			continue
		}
		return i
	}
}

func isAdverbOnly(l *lexeme) bool {
	return l.adv && !l.nounish() && !l.adjish() && !l.verbish()
}

// startsNPAt reports whether a noun phrase can start at i.
func (p *parser) startsNPAt(i int) bool {
	l := p.at(i)
	if l == nil {
		return false
	}
	switch l.cls {
	case clDet, clPossPron, clNum, clQuantAdj:
		return true
	case clThat:
		return p.startsNPAt(i + 1)
	case clPron:
		return l.text == "her" && p.startsNPAt(i+1)
	case clOpen:
		if l.verbish() && (l.form == vIng && !l.ingNoun || l.form == vEd) && !l.nounish() {
			// a participle starts a noun phrase only as a modifier: "parked cars"
			n := p.at(i + 1)
			return n != nil && n.cls == clOpen && n.nounish()
		}
		return l.nounish() || l.adjish() || !l.known || isAdverbOnly(l) && p.startsNPAt(i+1)
	}
	return false
}

// predicateAhead reports whether a verb or an auxiliary follows at i.
func (p *parser) predicateAhead(i int) bool {
	i = p.skipFillers(i)
	l := p.at(i)
	if l == nil {
		return false
	}
	switch l.cls {
	case clAux, clRel:
		return true
	case clThat:
		n := p.at(p.skipFillers(i + 1))
		return n != nil && (n.cls == clAux || n.cls == clOpen && n.verbish() && n.form != vBase)
	case clOpen:
		if !l.verbish() {
			return false
		}
		switch l.form {
		case vIng:
			return !l.ingNoun
		case vEd:
			return true
		default:
			return p.verbPref(i)
		}
	}
	return false
}

// verbPref reports whether the noun/verb-ambiguous word at i reads better as
// a verb, by WordNet's corpus frequencies and the next word.
func (p *parser) verbPref(i int) bool {
	l := p.at(i)
	if !l.verbish() {
		return false
	}
	if !l.nounish() {
		return true
	}
	if l.verbFreq > l.nounFreq {
		return true
	}
	if l.verbFreq == l.nounFreq {
		n := p.at(i + 1)
		return n != nil && (n.cls == clDet || n.cls == clPossPron || n.cls == clNum || n.cls == clPrep || n.cls == clPron)
	}
	return false
}

// isVerbAt decides whether the open-class word at i is a verb here, from the
// previous item and the word's inflection.
func (p *parser) isVerbAt(i int) bool {
	l := p.at(i)
	if l == nil || !l.verbish() {
		return false
	}
	nx := p.at(i + 1)
	if nx != nil && nx.cls == clAux && l.form != vIng && l.form != vEd {
		return false // "the train tracks are ..."
	}
	ctx := p.last
	switch l.form {
	case vIng:
		if l.ingNoun && (ctx == itNone || ctx == itPrep || ctx == itComma && p.verb == nil) {
			return false
		}
		return true
	case vEd:
		if ctx == itNone || ctx == itPrep {
			return !(nx != nil && nx.cls == clOpen && nx.nounish())
		}
		return true
	case vS:
		switch ctx {
		case itNP, itPron:
			g := p.lastNP
			return (g == nil || !g.plural()) && p.verbPref(i)
		case itRel, itAux:
			return p.verbPref(i) || !l.nounish()
		case itConj, itComma, itSub:
			return p.verb != nil && p.verbPref(i)
		}
		return !l.nounish()
	case vBase:
		switch ctx {
		case itTo:
			return true
		case itAux:
			return !p.auxBe // "is brown" is an adjective, "can see" a verb
		case itNP, itPron:
			g := p.lastNP
			return g != nil && g.plural() && p.verbPref(i)
		case itRel:
			return p.verbPref(i)
		case itConj, itComma, itSub:
			return p.verb != nil && p.verbPref(i)
		}
		return !l.nounish() && !l.adjish() && ctx != itPrep
	}
	return false
}

// ---------------------------------------------------------------------------
// The main pass.

func (p *parser) run() {
	for p.i < len(p.lx) {
		l := &p.lx[p.i]
		switch l.cls {
		case clStop:
			p.endSentence()
			p.i++
		case clPunct:
			p.comma()
		case clConj:
			p.conj()
		case clSub:
			p.sub()
		case clRel:
			p.rel()
		case clThat:
			if p.lastNP != nil && p.predicateAhead(p.i+1) {
				p.rel()
			} else {
				p.nounPhrase()
			}
		case clEx:
			p.i++
			if n := p.at(p.i); n != nil && n.cls == clAux || p.textAt(p.i) == "'s" {
				p.existential = true
			}
		case clAux:
			p.aux()
		case clNeg, clSkip:
			p.i++
		case clPron:
			p.pronoun()
		case clPoss:
			p.i++ // a stray 's: "it's", "there's"
			if p.last == itPron || p.existential {
				p.i--
				p.lx[p.i].text = "is"
				p.aux()
			}
		case clDet, clPossPron, clNum, clQuantAdj:
			p.nounPhrase()
		case clPrep:
			p.prep()
		case clOpen:
			p.open()
		default:
			p.i++
		}
	}
	p.endSentence()
}

func (p *parser) open() {
	l := &p.lx[p.i]
	if p.isVerbAt(p.i) {
		p.verbAt(l.verb)
		return
	}
	if adjPreferred(l) && !p.nounAfterAdjectives(p.i+1) {
		p.predAdj()
		return
	}
	if l.nounish() || l.adjish() || !l.known || l.verbish() {
		p.nounPhrase()
		return
	}
	p.i++ // adverb
}

func adjPreferred(l *lexeme) bool {
	return l.adjish() && (!l.nounish() || l.adjFreq >= l.nounFreq) && !(l.verbish() && (l.form == vIng || l.form == vEd))
}

// nounAfterAdjectives reports whether, after any adjectives, conjunctions
// and fillers, a noun follows at i ("red and white bus").
func (p *parser) nounAfterAdjectives(i int) bool {
	for {
		l := p.at(i)
		if l == nil {
			return false
		}
		switch {
		case l.cls == clSkip || l.cls == clOpen && isAdverbOnly(l):
		case (l.cls == clConj || l.cls == clPunct && l.text == ",") && p.at(i+1) != nil && adjPreferred(p.at(i+1)):
		case l.cls == clOpen && adjPreferred(l):
		case l.cls == clOpen && (l.nounish() || !l.known):
			return true
		default:
			return false
		}
		i++
	}
}

func (p *parser) newGroup(m *member) *group {
	g := &group{members: []*member{m}}
	p.groups = append(p.groups, g)
	return g
}

func (p *parser) addRel(a *group, pred string, b *group) {
	if a == nil || b == nil || pred == "" {
		return
	}
	p.rels = append(p.rels, grel{a, pred, b})
}

func (p *parser) addAttr(g *group, attr string) {
	if g == nil || attr == "" {
		return
	}
	p.gattrs = append(p.gattrs, gattr{g, attr})
}

// closeVerb ends the open predicate; a verb that found no complement
// becomes an attribute of its subject ("a woman is smiling" -> (woman, smile)).
func (p *parser) closeVerb() {
	if v := p.verb; v != nil && v.complements == 0 && v.lemma != "be" && v.lemma != "have" && v.lemma != "do" {
		p.addAttr(v.subj, v.lemma)
	}
	p.verb = nil
	p.verbAdjacent = false
}

func (p *parser) endSentence() {
	p.closeVerb()
	p.clauseSubj, p.lastNP, p.copSubj, p.relAnte, p.auxSubj, p.adjTarget, p.ppHead, p.ppVerb = nil, nil, nil, nil, nil, nil, nil, nil
	p.ofHead, p.ofObj = nil, nil
	p.existential, p.clauseHasVerb = false, false
	p.front = p.front[:0]
	p.last = itNone
}

// subjectForVerb picks the subject of a verb at the current position.
func (p *parser) subjectForVerb(form vform) *group {
	switch {
	case p.relAnte != nil:
		return p.relAnte
	case p.last == itAux:
		return p.auxSubj
	case p.last == itTo, p.last == itPrep:
		if p.verb != nil {
			return p.verb.subj
		}
		if p.ppVerb != nil {
			return p.ppVerb.subj
		}
		return p.clauseSubj
	case (p.last == itConj || p.last == itSub || p.last == itComma) && p.verb != nil:
		return p.verb.subj
	}
	g := p.lastNP
	if g == nil {
		return p.clauseSubj
	}
	if (form == vS || form == vBase) && p.clauseSubj != nil && !p.clauseHasVerb {
		return p.clauseSubj
	}
	if g.animate() || g == p.clauseSubj || p.clauseSubj == nil {
		return g
	}
	return p.clauseSubj
}

// verbAt starts a predicate with the verb at p.i.
func (p *parser) verbAt(lemma string) {
	form := p.lx[p.i].form
	subj := p.subjectForVerb(form)
	p.closeVerb()
	v := &verbCtx{subj: subj, form: form, lemma: lemma, pred: lemma}
	p.i++
	// Particles: "sitting down", "picking up" (when no noun phrase follows).
	for k := 0; k < 2; k++ {
		j := p.skipFillers(p.i)
		l := p.at(j)
		if l == nil || !particles[l.text] || l.cls != clPrep && l.cls != clOpen || p.startsNPAt(j+1) || p.pronounAt(j+1) {
			break
		}
		v.pred += " " + l.text
		p.i = j + 1
	}
	p.verb, p.verbAdjacent, p.clauseHasVerb = v, true, true
	p.copSubj, p.relAnte, p.auxSubj, p.existential = nil, nil, nil, false
	p.last = itVerb
}

func (p *parser) pronounAt(i int) bool {
	l := p.at(i)
	return l != nil && l.cls == clPron
}

// aux handles be, have, do and modal verbs.
func (p *parser) aux() {
	w := p.lx[p.i].text
	if haveForms[w] {
		j := p.skipFillers(p.i + 1)
		if l := p.at(j); l == nil || !(l.cls == clOpen && l.verbish() && l.form == vEd) && !(l.cls == clAux && (l.text == "been" || l.text == "had")) {
			p.verbAt("have") // main verb: "a man has a beard"
			return
		}
	}
	if (w == "can" || w == "will" || w == "may") && !p.isVerbAt(p.skipFillers(p.i+1)) {
		// not followed by a verb: a noun ("a can of soda") or nothing
		if p.startsNPAt(p.i) && p.last != itNP {
			p.nounPhrase()
			return
		}
	}
	var subj *group
	switch {
	case p.existential:
		subj = nil
	case p.relAnte != nil:
		subj = p.relAnte
	case p.last == itAux:
		subj = p.auxSubj
	case p.last == itConj && p.verb != nil:
		subj = p.verb.subj
	case p.clauseSubj != nil && !p.clauseHasVerb:
		subj = p.clauseSubj
	case p.lastNP != nil:
		subj = p.lastNP
	default:
		subj = p.clauseSubj
	}
	p.closeVerb()
	p.relAnte = nil
	p.i++
	p.auxSubj = subj
	p.auxBe = beForms[w]
	if p.auxBe {
		p.copSubj = subj
	}
	p.clauseHasVerb = true
	p.last = itAux
}

// predAdj handles predicate adjectives: after "be" ("the cat is black"),
// after a linking verb ("looks happy"), after a noun phrase ("a bowl full
// of fruit") and in coordination.
func (p *parser) predAdj() {
	var target *group
	switch {
	case p.last == itAux && p.copSubj != nil:
		target = p.copSubj
		p.copSubj = nil
	case p.verb != nil && p.verbAdjacent && linkingVerbs[p.verb.lemma]:
		target = p.verb.subj
		p.verb.complements++
	case p.last == itConj && p.adjTarget != nil:
		target = p.adjTarget
	case p.last == itNP && p.lastNP != nil:
		target = p.lastNP
	}
	for {
		l := p.at(p.i)
		if l == nil || l.cls != clOpen || !l.adjish() {
			break
		}
		p.addAttr(target, l.adj)
		p.i++
		j := p.skipFillers(p.i)
		if n := p.at(j); n != nil && (n.cls == clConj || n.cls == clPunct && n.text == ",") {
			if a := p.at(p.skipFillers(j + 1)); a != nil && a.cls == clOpen && adjPreferred(a) && !p.nounAfterAdjectives(p.skipFillers(j+1)) {
				p.i = p.skipFillers(j + 1)
				continue
			}
		}
		break
	}
	p.adjTarget = target
	p.last = itAdj
}

// ---------------------------------------------------------------------------
// Noun phrases.

// npResult is a parsed noun phrase: its head object and the groups that own
// it (possessives).
type npResult struct {
	m      *member
	owners []*group
}

// nounPhrase parses a noun phrase at p.i and gives it its role.
func (p *parser) nounPhrase() {
	if n := p.reciprocalAt(p.i); n > 0 {
		// "two dogs chasing each other": the relation holds between the
		// members of the subject group.
		p.i += n
		if p.verb != nil && p.verbAdjacent && p.last == itVerb {
			p.addRel(p.verb.subj, p.verb.pred, p.verb.subj)
			p.verb.complements++
			p.verbAdjacent = false
		}
		p.last = itPron
		return
	}
	if r := p.parseNP(0); r != nil {
		p.placeNP(r)
	}
}

func (p *parser) placeNP(r *npResult) *group {
	g := p.newGroup(r.m)
	for _, o := range r.owners {
		p.addRel(o, "have", g)
	}
	switch {
	case p.verb != nil && p.verbAdjacent && p.last == itVerb:
		// direct object
		p.addRel(p.verb.subj, p.verb.pred, g)
		p.verb.complements++
		p.verbAdjacent = false
	case p.last == itAux && p.copSubj != nil:
		// predicate nominal: "the man is a surfer" -> (man, surfer)
		p.addAttr(p.copSubj, r.m.lemma)
		p.copSubj = nil
	case p.existential:
		p.existential = false
		p.clauseSubj = g
		if p.mainSubj == nil {
			p.mainSubj = g
		}
	case (p.last == itConj || p.last == itSub || p.last == itComma) && p.predicateAhead(p.i):
		// a new clause: "... and a dog runs"
		p.closeVerb()
		p.clauseSubj, p.clauseHasVerb, p.copSubj, p.relAnte = g, false, nil, nil
	default:
		if p.clauseSubj == nil {
			p.clauseSubj = g
		}
		if p.mainSubj == nil {
			p.mainSubj = g
		}
	}
	if len(p.front) > 0 && g == p.clauseSubj {
		for _, f := range p.front {
			p.addRel(g, f.prep, f.g)
		}
		p.front = p.front[:0]
	}
	p.lastNP = g
	p.last = itNP
	return g
}

// parseNP parses specifiers (determiners, numbers, quantifier phrases,
// possessive pronouns), modifiers and the head noun; it records the head as
// an object with its modifier attributes and returns it, or returns nil
// when no head was found.
func (p *parser) parseNP(depth int) *npResult {
	start := p.i
	r := &npResult{}
	count := ""
	var attrs []string
specifiers:
	for p.i < len(p.lx) {
		l := &p.lx[p.i]
		next := p.textAt(p.i + 1)
		switch {
		case l.cls == clDet || l.cls == clThat:
			if (l.text == "a" || l.text == "an") && p.i+2 < len(p.lx) && quantNouns[p.lx[p.i+1].text] && p.lx[p.i+2].text == "of" {
				q := p.lx[p.i+1].text
				if countQuant[q] {
					count = q
				}
				p.i += 3
				continue
			}
			if next == "of" {
				p.i += 2 // partitive: "some of the", "all of the"
				continue
			}
			p.i++
		case l.cls == clPossPron:
			if o := p.possOwner(l.text); o != nil {
				r.owners = append(r.owners, o)
			}
			p.i++
		case l.cls == clPron && l.text == "her" && p.startsNPAt(p.i+1):
			if o := p.possOwner("her"); o != nil {
				r.owners = append(r.owners, o)
			}
			p.i++
		case l.cls == clNum:
			if l.text != "one" && l.text != "1" {
				count = l.text
			}
			p.i++
			if next == "of" {
				p.i++
			}
		case l.cls == clQuantAdj:
			if next == "of" {
				if countQuant[l.text] {
					count = l.text
				}
				p.i += 2
				continue
			}
			attrs = append(attrs, l.adj)
			p.i++
		case l.cls == clOpen && quantPlurals[l.text] && next == "of":
			if countQuant[l.text] {
				count = l.text
				if b, ok := nounLemma(p.db, l.text); ok {
					count = b
				}
			}
			p.i += 2
		default:
			break specifiers
		}
	}
	// The modifier run and its head.
	var run []int
	for p.i < len(p.lx) {
		l := &p.lx[p.i]
		if len(run) == 0 {
			switch {
			case l.cls == clOpen && (l.nounish() || l.adjish() || l.verbish() || !l.known):
			case (l.cls == clAux || l.cls == clPrep) && l.nounish() && p.i > start && !p.startsNPAt(p.i+1):
				// "a can", "the inside", "the back"
			case l.cls == clOpen && isAdverbOnly(l) && p.startsNPAt(p.i+1):
				p.i++ // "a brightly colored kite"
				continue
			default:
				goto head
			}
			run = append(run, p.i)
			p.i++
			continue
		}
		switch {
		case l.cls == clOpen && p.verbBreak(p.i):
			goto head
		case l.cls == clOpen && p.anyNoun(run) && adjPreferred(l) && !p.nounAfterAdjectives(p.i+1):
			goto head // a post-nominal adjective: "a bowl full of fruit"
		case l.cls == clOpen && (l.nounish() || l.adjish() || !l.known || l.verbish() && (l.form == vIng || l.form == vEd)):
			run = append(run, p.i)
			p.i++
		case (l.cls == clConj && (l.text == "and" || l.text == "or") || l.cls == clPunct && l.text == ",") && p.adjRun(run) && p.nounAfterAdjectives(p.i+1):
			p.i++ // "a black and white cat"
		case (l.cls == clSkip || l.cls == clOpen && isAdverbOnly(l)) && p.at(p.i+1) != nil && p.at(p.i+1).cls == clOpen && p.at(p.i+1).adjish():
			p.i++ // "a very large dog"
		default:
			goto head
		}
	}
head:
	if len(run) == 0 {
		return nil
	}
	h := len(run) - 1
	for k := len(run) - 1; k >= 0; k-- {
		if l := &p.lx[run[k]]; l.nounish() || !l.known {
			h = k
			break
		}
	}
	hl := &p.lx[run[h]]
	m := &member{plural: hl.nounPlural, animate: hl.animate}
	switch {
	case hl.nounish():
		m.lemma = hl.noun
	case hl.adjish():
		m.lemma = hl.adj
	default:
		m.lemma = hl.text
	}
	if count != "" && (m.plural || !numbers[count] && !isDigits(count) || count != "one") {
		m.plural = true
	}
	p.objects = append(p.objects, m)
	for k, idx := range run {
		if k != h {
			attrs = append(attrs, modLemma(&p.lx[idx]))
		}
	}
	if count != "" {
		attrs = append(attrs, count)
	}
	for _, a := range attrs {
		if a != "" && a != m.lemma {
			p.objAttrs = append(p.objAttrs, rawTuple{kind: kindAttribute, a: m.lemma, b: a})
		}
	}
	r.m = m
	// Possessive 's: "a man's hand" -> (man, have, hand).
	if depth < 4 && p.textAt(p.i) == "'s" && p.startsNPAt(p.i+1) && !p.predicateAhead(p.i+1) {
		p.i++
		owner := p.newGroup(m)
		if r2 := p.parseNP(depth + 1); r2 != nil {
			r2.owners = append(r2.owners, owner)
			r2.owners = append(r2.owners, r.owners...)
			return r2
		}
	}
	return r
}

func (p *parser) anyNoun(run []int) bool {
	for _, k := range run {
		if p.lx[k].nounish() {
			return true
		}
	}
	return false
}

// reciprocalAt returns the length of "each other" or "one another" at i, or 0.
func (p *parser) reciprocalAt(i int) int {
	a, b := p.textAt(i), p.textAt(i+1)
	if a == "each" && b == "other" || a == "one" && b == "another" {
		return 2
	}
	return 0
}

// adjRun reports whether the run so far holds only adjective-like modifiers.
func (p *parser) adjRun(run []int) bool {
	if len(run) == 0 {
		return false
	}
	for _, k := range run {
		if !adjPreferred(&p.lx[k]) {
			return false
		}
	}
	return true
}

// verbBreak reports whether the word at i, following a noun inside a
// modifier run, is rather the verb of a new predicate ("a man riding").
func (p *parser) verbBreak(i int) bool {
	l, prev := p.at(i), p.at(i-1)
	if l == nil || prev == nil || !l.verbish() {
		return false
	}
	if !prev.nounish() && prev.known {
		return false
	}
	if nx := p.at(i + 1); nx != nil && nx.cls == clAux && l.form != vIng && l.form != vEd {
		return false
	}
	switch l.form {
	case vIng:
		return !(l.ingNoun && !prev.animate)
	case vEd:
		return !(l.nounish() && l.nounFreq > l.verbFreq)
	case vS:
		return !prev.nounPlural && p.verbPref(i)
	case vBase:
		return (prev.nounPlural || humanGroups[prev.text]) && p.verbPref(i)
	}
	return false
}

// modLemma is the attribute a pre-head modifier contributes: participles
// give their verb lemma ("a sleeping cat" -> sleep, as "the cat is
// sleeping"), adjectives their base form, nouns their singular.
func modLemma(l *lexeme) string {
	switch {
	case l.verbish() && (l.form == vIng && !l.ingNoun || l.form == vEd) && !(l.nounish() && l.nounFreq > l.verbFreq):
		return l.verb
	case l.adjish() && (!l.nounish() || l.adjFreq >= l.nounFreq):
		return l.adj
	case l.nounish():
		return l.noun
	case l.adjish():
		return l.adj
	}
	return l.text
}

// possOwner resolves a possessive pronoun to the group that owns: the
// nearest animate noun phrase before it, else the caption's subject.
func (p *parser) possOwner(w string) *group {
	if w == "whose" {
		return p.lastNP
	}
	for _, g := range []*group{p.lastNP, p.clauseSubj, p.mainSubj} {
		if g != nil && g.animate() {
			return g
		}
	}
	return p.mainSubj
}

// ---------------------------------------------------------------------------
// Pronouns, prepositions, conjunctions, relatives.

// resolveObject resolves an object pronoun, given the group that heads the
// relation it fills: the caption's subject, unless that is the head itself,
// then the most recent other noun phrase.
func (p *parser) resolveObject(w string, head *group) *group {
	if reflexives[w] {
		// "a man taking a picture of himself": the subject of the predicate
		switch {
		case p.verb != nil:
			return p.verb.subj
		case p.clauseSubj != nil:
			return p.clauseSubj
		}
		return head
	}
	if p.mainSubj != nil && p.mainSubj != head {
		return p.mainSubj
	}
	for k := len(p.groups) - 1; k >= 0; k-- {
		if g := p.groups[k]; g != head && !containsGroupMembers(head, g) {
			return g
		}
	}
	return nil
}

func containsGroupMembers(a, b *group) bool {
	if a == nil {
		return false
	}
	for _, m := range b.members {
		for _, n := range a.members {
			if m == n {
				return true
			}
		}
	}
	return false
}

func (p *parser) pronoun() {
	w := p.lx[p.i].text
	if w == "her" && p.startsNPAt(p.i+1) && !p.predicateAhead(p.i+1) {
		p.nounPhrase()
		return
	}
	p.i++
	if p.verb != nil && p.verbAdjacent && p.last == itVerb {
		if g := p.resolveObject(w, p.verb.subj); g != nil {
			p.addRel(p.verb.subj, p.verb.pred, g)
			p.verb.complements++
			p.verbAdjacent = false
			p.lastNP = g
		}
		p.last = itPron
		return
	}
	if p.last == itAux && p.copSubj != nil {
		p.copSubj = nil
		p.last = itPron
		return
	}
	// subject position
	g := p.mainSubj
	if g == nil {
		g = p.clauseSubj
	}
	if g != nil {
		if p.last == itConj || p.last == itSub || p.last == itComma || p.clauseSubj == nil {
			p.closeVerb()
			p.clauseSubj, p.clauseHasVerb = g, false
		}
		p.lastNP = g
	}
	p.last = itPron
}

// prep handles a (possibly multi-word) preposition and its object.
func (p *parser) prep() {
	text := p.lx[p.i].text
	if text == "to" {
		// infinitive: "trying to catch a frisbee", "ready to eat"
		j := p.skipFillers(p.i + 1)
		if l := p.at(j); l != nil && l.cls == clOpen && l.verbish() && l.form == vBase &&
			(!l.nounish() || p.verbPref(j) || p.last == itVerb || p.last == itAdj) {
			p.i = j
			p.last = itTo
			p.verbAdjacent = false
			return
		}
	}
	// The head the phrase attaches to.
	var headVerb *verbCtx
	var head *group
	switch {
	case p.verb != nil && p.verbAdjacent && p.last == itVerb:
		headVerb = p.verb
	case p.last == itAux && p.copSubj != nil:
		head = p.copSubj
	case p.last == itAdj && p.adjTarget != nil:
		head = p.adjTarget
	case p.last == itConj && (p.ppHead != nil || p.ppVerb != nil):
		head, headVerb = p.ppHead, p.ppVerb
	case p.lastNP != nil:
		head = p.lastNP
	}
	p.i++
	j := p.skipFillers(p.i)
	obj := p.at(j)
	if n := p.reciprocalAt(j); n > 0 {
		p.i = j + n
		g := head
		if headVerb != nil {
			g = headVerb.subj
		}
		p.attachPP(headVerb, head, text, g)
		p.last = itPron
		return
	}
	switch {
	case obj != nil && obj.cls == clPron && !(obj.text == "her" && p.startsNPAt(j+1)):
		p.i = j + 1
		h := head
		if headVerb != nil {
			h = headVerb.subj
		}
		g := p.resolveObject(obj.text, h)
		p.attachPP(headVerb, head, text, g)
		p.lastNP = g
		p.last = itPron
		return
	case obj != nil && obj.cls == clOpen && obj.verbish() && obj.form == vIng && !obj.ingNoun && !p.startsNPModifier(j):
		// gerund: "after riding a wave": the verb keeps the subject
		p.i = j
		p.ppVerb = headVerb
		p.last = itPrep
		return
	case p.startsNPAt(j):
		p.i = j
		save := p.last
		p.last = itPrep
		r := p.parseNP(0)
		if r == nil {
			p.last = save
			return
		}
		g := p.newGroup(r.m)
		for _, o := range r.owners {
			p.addRel(o, "have", g)
		}
		if head == nil && headVerb == nil {
			// "In a kitchen, a man cooks": held for the first subject.
			p.front = append(p.front, fronted{text, g})
			p.last = itNone
			return
		}
		p.attachPP(headVerb, head, text, g)
		p.lastNP = g
		p.last = itNP
		return
	}
	// No object: a particle of the verb, or nothing.
	if headVerb != nil && particles[text] {
		headVerb.pred += " " + text
	}
}

// startsNPModifier reports whether the -ing word at i modifies a following
// noun ("a sleeping cat").
func (p *parser) startsNPModifier(i int) bool {
	n := p.at(i + 1)
	return n != nil && n.cls == clOpen && n.nounish() && !n.verbish()
}

func (p *parser) attachPP(headVerb *verbCtx, head *group, prep string, g *group) {
	if g == nil {
		return
	}
	if headVerb != nil && prep == "by" && headVerb.form == vEd && g.animate() {
		// passive agent: "a kite flown by a boy" -> (boy, fly, kite)
		p.addRel(g, headVerb.pred, headVerb.subj)
		headVerb.complements++
		p.verbAdjacent = false
		p.ppVerb, p.ppHead = headVerb, nil
		return
	}
	if headVerb != nil {
		p.addRel(headVerb.subj, headVerb.pred+" "+prep, g)
		headVerb.complements++
		p.verbAdjacent = false
		p.ppVerb, p.ppHead = headVerb, nil
		return
	}
	p.addRel(head, prep, g)
	p.ppVerb, p.ppHead = nil, head
	if prep == "of" {
		p.ofHead, p.ofObj = head, g
	}
}

// conj handles and/or/but: noun phrase lists, coordinated verbs, adjectives
// and prepositional phrases, and new clauses.
func (p *parser) conj() {
	prevLast := p.last
	p.i++
	j := p.skipFillers(p.i)
	if (prevLast == itNP || prevLast == itPron) && p.lastNP != nil && p.startsNPAt(j) {
		// A word that may be a noun joins the noun phrase list unless it can
		// only be a verb here: "a sandwich and fries", "a man runs and jumps".
		if l := p.at(j); l.cls == clOpen && (l.form == vIng && !l.ingNoun || l.form == vEd) && p.isVerbAtAfter(j, itConj) {
			p.i = j
			p.last = itConj
			return
		}
		p.i = j
		p.joinNP()
		return
	}
	p.i = j
	if prevLast == itAdj {
		p.last = itConj
		return
	}
	if prevLast == itAux || prevLast == itVerb {
		p.verbAdjacent = false
	}
	p.last = itConj
}

// joinNP parses a noun phrase after a list separator: it joins the previous
// group ("a cat and a dog"), or starts a clause when a predicate follows and
// the previous group already has one.
func (p *parser) joinNP() {
	r := p.parseNP(0)
	if r == nil {
		return
	}
	prev := p.lastNP
	if p.ofHead != nil && prev == p.ofObj && p.textAt(p.i) == "of" {
		// "plates of food and glasses of wine": the conjunct parallels the
		// head of the of-phrase and takes its other relations.
		g := p.newGroup(r.m)
		for _, o := range r.owners {
			p.addRel(o, "have", g)
		}
		for _, rel := range p.rels {
			switch {
			case rel.b == p.ofHead:
				p.addRel(rel.a, rel.pred, g)
			case rel.a == p.ofHead && !(rel.pred == "of" && rel.b == p.ofObj):
				p.addRel(g, rel.pred, rel.b)
			}
		}
		p.lastNP, p.last = g, itNP
		return
	}
	subjectList := prev == p.clauseSubj && !p.clauseHasVerb
	if p.predicateAhead(p.i) && !subjectList && (r.m.animate || p.finiteAhead(p.i)) {
		// "a man holding a bat and a woman holding a ball": a new subject
		p.last = itConj
		p.placeNP(r)
		return
	}
	prev.members = append(prev.members, r.m)
	p.lastNP = prev
	for _, o := range r.owners {
		p.addRel(o, "have", &group{members: []*member{r.m}})
	}
	p.last = itNP
}

// finiteAhead reports whether an auxiliary or a finite verb follows at i.
func (p *parser) finiteAhead(i int) bool {
	i = p.skipFillers(i)
	l := p.at(i)
	return l != nil && (l.cls == clAux || l.cls == clOpen && l.verbish() && (l.form == vS || l.form == vBase) && p.verbPref(i))
}

func (p *parser) comma() {
	p.i++
	j := p.skipFillers(p.i)
	if p.last == itNP && p.lastNP != nil && p.startsNPAt(j) && !p.isVerbAtAfter(j, itComma) {
		p.i = j
		p.joinNP()
		return
	}
	if p.last == itAdj {
		return // "a big, red bus" is handled in the noun phrase; "is big, red" here
	}
	p.verbAdjacent = false
	p.last = itComma
}

func (p *parser) isVerbAtAfter(i int, k itemKind) bool {
	save := p.last
	p.last = k
	v := p.isVerbAt(i)
	p.last = save
	return v
}

// sub handles subordinators (while, as, when): a clause boundary that keeps
// the subject for a following participle.
func (p *parser) sub() {
	p.i++
	p.verbAdjacent = false
	p.copSubj, p.relAnte = nil, nil
	p.last = itSub
}

// rel handles relative pronouns: the next predicate's subject is the noun
// phrase before it.
func (p *parser) rel() {
	w := p.lx[p.i].text
	p.i++
	if w == "where" {
		p.closeVerb()
		p.last = itSub
		return
	}
	if w == "whose" {
		return
	}
	p.relAnte = p.lastNP
	p.last = itRel
}

// ---------------------------------------------------------------------------
// Output.

// tuples expands groups into the proposed tuples, in SPICE's order: objects,
// then attributes, then relations.
func (p *parser) tuples() []rawTuple {
	out := make([]rawTuple, 0, len(p.objects)+len(p.objAttrs)+len(p.gattrs)+2*len(p.rels))
	for _, m := range p.objects {
		out = append(out, rawTuple{kind: kindObject, a: m.lemma})
	}
	out = append(out, p.objAttrs...)
	for _, a := range p.gattrs {
		for _, m := range a.g.members {
			if a.attr != m.lemma {
				out = append(out, rawTuple{kind: kindAttribute, a: m.lemma, b: a.attr})
			}
		}
	}
	for _, r := range p.rels {
		for _, x := range r.a.members {
			for _, y := range r.b.members {
				if x == y {
					continue
				}
				out = append(out, rawTuple{kind: kindRelation, a: x.lemma, b: r.pred, c: y.lemma})
			}
		}
	}
	return out
}

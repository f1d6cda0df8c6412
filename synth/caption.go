package synth

import (
	"math"
	"slices"
	"strings"
)

// The caption grammar. A caption mentions 1 to 3 "units" of a scene; a unit
// is a set of objects that look the same (category, colour and size), named
// by a noun phrase:
//
//	NP   = ("a" | "an") [SIZE] [COLOUR] NOUN          one object
//	     | COUNT [SIZE] [COLOUR] NOUNS                 2-6 look-alikes ("two red circles")
//
// and the caption is one of
//
//	single   [PRE] NP [LOC] | there is NP [LOC] | LOC there is NP | NP VERB LOC
//	relation [PRE] NP REL NP | NP VERB REL NP | there is NP REL NP | REL NP there is NP
//	pair     [PRE] NP (and | together with | with) NP [SUF]
//	triple   [PRE] NP and NP REL NP | [PRE] NP along with NP and NP
//	scene    [PRE] COUNT shapes on a BG background including NP [and NP]
//
// with PRE a distractor prefix ("a photo of", "there is" ...), LOC an
// absolute position ("in the top left corner"), REL a spatial relation that
// holds between every pair of objects of the two units ("left of", "above",
// "next to" ...), SUF a suffix ("in the picture"). Words are synonyms drawn
// from Categories, Colours and SizeWords. Captions are retried until they
// have 8 to maxCaptionWords words and differ from the image's other
// captions.

// WordRef ties one caption word to the region of the object it names.
type WordRef struct {
	// Index is the word's index in strings.Fields(caption).
	Index int `json:"index"`
	// Word is the word itself.
	Word string `json:"word"`
	// Region is the index of the object's own box in the image's ordered
	// region list; for a group of look-alikes ("two red circles"), the
	// smallest such index among the group.
	Region int `json:"region"`
	// Object is the index of that object in the scene.
	Object int `json:"object"`
	// Regions and Objects list every member of a group (ascending region),
	// only for groups.
	Regions []int `json:"regions,omitempty"`
	Objects []int `json:"objects,omitempty"`
}

// Caption is one generated caption with its ground truth.
type Caption struct {
	Text  string
	Words []WordRef
}

var (
	prefixes = []string{"a photo of", "a picture of", "an image of", "a drawing of", "a rendering of",
		"this image shows", "we can see", "the picture shows", "a close up of"}
	suffixes    = []string{"in the picture", "in the image", "in this photo", "on a plain background", "in the scene"}
	countWords  = []string{"", "", "two", "three", "four", "five", "six"}
	sceneCounts = []string{"", "", "two", "three", "four", "five", "six"}
	singVerbs   = []string{"is", "sits", "lies", "can be seen", "appears"}
	plurVerbs   = []string{"are", "sit", "lie", "can be seen", "appear"}
	// locations[row][col]: thirds of the image.
	locations = [3][3][]string{
		{{"in the top left corner", "in the upper left corner", "at the top left"},
			{"at the top", "near the top", "at the top of the picture"},
			{"in the top right corner", "in the upper right corner", "at the top right"}},
		{{"on the left", "on the left side", "at the left"},
			{"in the middle", "in the centre", "in the center"},
			{"on the right", "on the right side", "at the right"}},
		{{"in the bottom left corner", "in the lower left corner", "at the bottom left"},
			{"at the bottom", "near the bottom", "at the bottom of the picture"},
			{"in the bottom right corner", "in the lower right corner", "at the bottom right"}},
	}
)

// Spatial relations of unit A to unit B.
const (
	relNone = iota
	relLeft
	relRight
	relAbove
	relBelow
	relNear
)

var relWords = [...][]string{
	relLeft:  {"left of", "to the left of", "on the left of"},
	relRight: {"right of", "to the right of", "on the right of"},
	relAbove: {"above", "over", "on top of"},
	relBelow: {"below", "under", "beneath", "underneath"},
	relNear:  {"next to", "beside", "near", "close to"},
}

// unit is a group of look-alike objects, sorted by region.
type unit struct {
	objs []int
}

// captioner builds the captions of one image; it is reused.
type captioner struct {
	r     *rng
	s     *Scene
	units []unit
	used  []int // mentions per unit so far
	words []string
	refs  []WordRef
	seen  []string
	saved []int
	// suffixed is set once the current caption has a suffix.
	suffixed bool
}

// captions writes the CaptionsPerImage captions of s into out.
// maxCaptionWords is the longest caption the grammar aims for (COCO's
// captions average about 10.5 words; three-object captions need up to 16).
const maxCaptionWords = 16

func (c *captioner) captions(s *Scene, r *rng, out []Caption) []Caption {
	c.r, c.s = r, s
	c.groupUnits()
	c.seen = c.seen[:0]
	out = out[:0]
	for range CaptionsPerImage {
		var text string
		var refs []WordRef
		c.saved = append(c.saved[:0], c.used...)
		for try := 0; try < 12; try++ {
			copy(c.used, c.saved)
			c.words, c.refs, c.suffixed = c.words[:0], c.refs[:0], false
			c.build()
			if n := len(c.words); n < 8 || n > maxCaptionWords {
				if try < 10 {
					continue
				}
			}
			text = strings.Join(c.words, " ")
			if slices.Contains(c.seen, text) && try < 11 {
				continue
			}
			break
		}
		c.seen = append(c.seen, text)
		if r.IntN(2) == 0 {
			text += " ."
		}
		refs = append(refs, c.refs...)
		out = append(out, Caption{Text: text, Words: refs})
	}
	return out
}

// groupUnits groups the scene's objects by look.
func (c *captioner) groupUnits() {
	c.units = c.units[:0]
	objs := c.s.Objects
	done := make([]bool, len(objs))
	for i := range objs {
		if done[i] {
			continue
		}
		u := unit{objs: []int{i}}
		done[i] = true
		for j := i + 1; j < len(objs); j++ {
			if !done[j] && sameLook(&objs[i], &objs[j]) {
				u.objs = append(u.objs, j)
				done[j] = true
			}
		}
		slices.SortFunc(u.objs, func(a, b int) int { return objs[a].Region - objs[b].Region })
		c.units = append(c.units, u)
	}
	c.used = append(c.used[:0], make([]int, len(c.units))...)
}

func sameLook(a, b *Object) bool {
	return a.Category == b.Category && a.Colour == b.Colour && a.Large == b.Large
}

func (c *captioner) pick(list []string) string { return list[c.r.IntN(len(list))] }

// say appends unaligned words.
func (c *captioner) say(words string) {
	c.words = append(c.words, strings.Fields(words)...)
}

// sayRef appends words that all refer to unit u.
func (c *captioner) sayRef(words string, u int) {
	objs := c.units[u].objs
	for _, w := range strings.Fields(words) {
		ref := WordRef{Index: len(c.words), Word: w, Object: objs[0], Region: c.s.Objects[objs[0]].Region}
		if len(objs) > 1 {
			ref.Objects = append([]int(nil), objs...)
			ref.Regions = make([]int, len(objs))
			for k, o := range objs {
				ref.Regions[k] = c.s.Objects[o].Region
			}
		}
		c.refs = append(c.refs, ref)
		c.words = append(c.words, w)
	}
}

// np appends the noun phrase of unit u: article or count word, optional
// size and colour adjectives, a noun.
func (c *captioner) np(u int) {
	objs := c.units[u].objs
	o := &c.s.Objects[objs[0]]
	c.used[u]++
	var adj []string // size, colour: aligned
	if c.r.IntN(100) < 70 {
		adj = append(adj, c.pick(SizeWords[b2i(o.Large)]))
	}
	if c.r.IntN(100) < 95 {
		adj = append(adj, c.pick(Colours[o.Colour].Words))
	}
	noun := Categories[o.Category].Nouns[c.r.IntN(len(Categories[o.Category].Nouns))]
	if len(objs) > 1 {
		if len(objs) == 2 && c.r.IntN(4) == 0 {
			c.say("a")
			c.sayRef("pair", u)
			c.say("of")
		} else {
			c.sayRef(countWords[len(objs)], u)
		}
		for _, a := range adj {
			c.sayRef(a, u)
		}
		c.sayRef(noun.Plural, u)
		return
	}
	next := noun.Singular
	if len(adj) > 0 {
		next = adj[0]
	}
	c.say(article(next))
	for _, a := range adj {
		c.sayRef(a, u)
	}
	c.sayRef(noun.Singular, u)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func article(next string) string {
	if strings.ContainsRune("aeiou", rune(next[0])) {
		return "an"
	}
	return "a"
}

func (c *captioner) plural(u int) bool { return len(c.units[u].objs) > 1 }

func (c *captioner) verb(u int) string {
	if c.plural(u) {
		return c.pick(plurVerbs)
	}
	return c.pick(singVerbs)
}

func (c *captioner) thereIs(u int) string {
	if c.plural(u) {
		return "there are"
	}
	return "there is"
}

// focus picks a unit, preferring the least mentioned ones so that the five
// captions cover the scene; excluded units are skipped. It returns -1 if none
// is left.
func (c *captioner) focus(exclude ...int) int {
	best, bestKey := -1, math.MaxInt
	for u := range c.units {
		if slices.Contains(exclude, u) {
			continue
		}
		key := c.used[u]*16 + c.r.IntN(12)
		if c.s.Objects[c.units[u].objs[0]].Large {
			key -= 3
		}
		if key < bestKey {
			best, bestKey = u, key
		}
	}
	return best
}

// location returns the cell (row, col) of unit u if all its objects share
// one.
func (c *captioner) location(u int) (row, col int, ok bool) {
	row, col = -1, -1
	for _, i := range c.units[u].objs {
		o := &c.s.Objects[i]
		rr, cc := min(2, int(3*o.Y/ImageHeight)), min(2, int(3*o.X/ImageWidth))
		if row >= 0 && (rr != row || cc != col) {
			return 0, 0, false
		}
		row, col = rr, cc
	}
	return row, col, true
}

// relation returns how unit a lies relative to unit b: left/right/above/below
// when that holds clearly for every pair of their objects, near when every
// pair is close (chosen with probability 1/3 when both apply), relNone
// otherwise.
func (c *captioner) relation(a, b int) int {
	const unset = -1
	dir, near := unset, true
	for _, i := range c.units[a].objs {
		for _, j := range c.units[b].objs {
			p, q := &c.s.Objects[i], &c.s.Objects[j]
			dx, dy := q.X-p.X, q.Y-p.Y
			if math.Hypot(dx, dy) > 1.7*(p.Radius+q.Radius) {
				near = false
			}
			d := relNone
			switch {
			case math.Abs(dx) >= 1.5*math.Abs(dy) && math.Abs(dx) >= 10:
				d = relLeft
				if dx < 0 {
					d = relRight
				}
			case math.Abs(dy) >= 1.5*math.Abs(dx) && math.Abs(dy) >= 10:
				d = relAbove
				if dy < 0 {
					d = relBelow
				}
			}
			if dir == unset {
				dir = d
			} else if d != dir {
				dir = relNone
			}
		}
	}
	if near && (dir == relNone || c.r.IntN(3) == 0) {
		return relNear
	}
	return dir
}

// build appends one caption's words and references.
func (c *captioner) build() {
	n := len(c.units)
	p := c.r.IntN(100)
	// Most captions name two or three units, as COCO captions name a
	// scene's main objects: a caption of one unit ("a red circle") fits
	// about 1 test image in 20 and leaves text-to-image retrieval little to
	// find (docs/synth.md, "ambiguity").
	switch {
	case p < 8 || n == 1:
		c.single()
	case p < 50:
		if !c.related() {
			c.pair()
		}
	case p < 80 && n >= 3:
		c.triple()
	case p < 88:
		c.pair()
	default:
		c.scene()
	}
}

func (c *captioner) maybePrefix(prob int) {
	if c.r.IntN(100) < prob {
		c.say(c.pick(prefixes))
	}
}

// maybeSuffix adds a suffix with probability prob percent, unless the
// caption already has one.
func (c *captioner) maybeSuffix(prob int) {
	if !c.suffixed && c.r.IntN(100) < prob {
		c.say(c.pick(suffixes))
		c.suffixed = true
	}
}

func (c *captioner) single() {
	u := c.focus()
	row, col, hasLoc := c.location(u)
	loc := ""
	if hasLoc {
		loc = c.pick(locations[row][col])
	}
	switch t := c.r.IntN(4); {
	case t == 0 || !hasLoc:
		c.maybePrefix(70)
		c.np(u)
		if hasLoc {
			c.say(loc)
		} else {
			c.maybeSuffix(80)
		}
	case t == 1:
		c.say(c.thereIs(u))
		c.np(u)
		c.say(loc)
	case t == 2:
		c.say(loc)
		c.say(c.thereIs(u))
		c.np(u)
	default:
		c.np(u)
		c.say(c.verb(u))
		c.say(loc)
	}
	if len(c.words) < 8 {
		c.maybeSuffix(100)
	}
}

// related writes a relation caption; it reports false when no pair of units
// has a relation.
func (c *captioner) related() bool {
	a := c.focus()
	order := c.r.Perm(len(c.units))
	for _, b := range order {
		if b == a {
			continue
		}
		rel := c.relation(a, b)
		if rel == relNone {
			continue
		}
		rw := c.pick(relWords[rel])
		switch c.r.IntN(4) {
		case 0:
			c.maybePrefix(60)
			c.np(a)
			c.say(rw)
			c.np(b)
		case 1:
			c.np(a)
			k := c.r.IntN(3) // is, sits, lies
			if c.plural(a) {
				c.say(plurVerbs[k])
			} else {
				c.say(singVerbs[k])
			}
			c.say(rw)
			c.np(b)
		case 2:
			c.say(c.thereIs(a))
			c.np(a)
			c.say(rw)
			c.np(b)
		default:
			if (rel == relLeft || rel == relRight) && !strings.HasPrefix(rw, "to ") {
				// "left of a box there is" reads badly: "to the left of a box there is"
				rw = "to the " + strings.TrimPrefix(rw, "on the ")
			}
			c.say(rw)
			c.np(b)
			c.say(c.thereIs(a))
			c.np(a)
		}
		if len(c.words) < 8 {
			c.maybeSuffix(100)
		}
		return true
	}
	return false
}

func (c *captioner) pair() {
	a := c.focus()
	b := c.focus(a)
	if b < 0 {
		c.single()
		return
	}
	c.maybePrefix(55)
	c.np(a)
	c.say(c.pick([]string{"and", "and", "together with", "with"}))
	c.np(b)
	if len(c.words) < 9 {
		c.maybeSuffix(70)
	}
}

func (c *captioner) triple() {
	a := c.focus()
	b := c.focus(a)
	t := c.focus(a, b)
	if c.r.IntN(2) == 0 {
		if rel := c.relation(a, t); rel != relNone && rel == c.relation(b, t) {
			c.maybePrefix(30)
			c.np(a)
			c.say("and")
			c.np(b)
			c.say(c.pick(relWords[rel]))
			c.np(t)
			return
		}
	}
	c.maybePrefix(50)
	c.np(a)
	c.say(c.pick([]string{"along with", "with", "together with"}))
	c.np(b)
	c.say("and")
	c.np(t)
}

func (c *captioner) scene() {
	c.maybePrefix(40)
	c.say(sceneCounts[len(c.s.Objects)])
	c.say(c.pick([]string{"shapes", "objects", "figures"}))
	c.say("on a")
	c.say(Backgrounds[c.s.Background].Name)
	c.say("background including")
	a := c.focus()
	c.np(a)
	if b := c.focus(a); b >= 0 && c.r.IntN(2) == 0 {
		c.say("and")
		c.np(b)
	}
}

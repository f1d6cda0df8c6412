// Package evaltest generates synthetic caption sets for the tests and
// benchmarks of the caption metrics (ROUGE-L, SPICE): deterministic,
// COCO-length, and grouped by image as a relevance matrix expects (the
// captions of image j are perImage*j up to perImage*(j+1)).
package evaltest

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Captions returns nImages*perImage captions of COCO length (8 to 13 words,
// a few up to 25, about 10.5 on average) of invented words with Zipf
// frequencies over a vocabulary of 3000; the perImage consecutive captions
// of one image share topic words, as real ones do. They suit the metrics
// that only match words (ROUGE-L). The same seed gives the same captions.
func Captions(nImages, perImage int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	function := []string{"a", "the", "of", "on", "with", "in", "and", "is", "an", "at", "to", "two", "some", "near", "while"}
	const vocab = 3000
	words := make([]string, vocab)
	copy(words, function)
	for i := len(function); i < vocab; i++ {
		var b strings.Builder
		n := 3 + r.IntN(7)
		for k := 0; k < n; k++ {
			b.WriteByte(byte('a' + r.IntN(26)))
		}
		words[i] = b.String()
	}
	zipf := rand.NewZipf(r, 1.1, 2, vocab-1)
	caps := make([]string, 0, nImages*perImage)
	topic := make([]string, 12)
	for i := 0; i < nImages; i++ {
		for k := range topic {
			topic[k] = words[len(function)+r.IntN(vocab-len(function))]
		}
		for c := 0; c < perImage; c++ {
			n := 8 + r.IntN(6)
			if r.IntN(50) == 0 {
				n = 14 + r.IntN(12)
			}
			ws := make([]string, n)
			for k := range ws {
				if r.IntN(10) < 4 {
					ws[k] = topic[r.IntN(len(topic))]
				} else {
					ws[k] = words[zipf.Uint64()]
				}
			}
			ws[0] = strings.ToUpper(ws[0][:1]) + ws[0][1:]
			if r.IntN(3) == 0 {
				ws[n-1] += "."
			}
			caps = append(caps, strings.Join(ws, " "))
		}
	}
	return caps
}

// Vocabulary of the synthetic captions: COCO-like objects with synonyms,
// colours, counts, verbs and prepositions.
var (
	synPeople  = [][]string{{"man", "guy"}, {"woman", "lady"}, {"boy", "male child"}, {"girl"}, {"child", "kid"}, {"person", "individual"}, {"skier"}, {"surfer"}, {"player"}, {"chef", "cook"}}
	synAnimals = [][]string{{"dog", "puppy"}, {"cat", "kitten"}, {"horse"}, {"elephant"}, {"giraffe"}, {"zebra"}, {"bird"}, {"cow"}, {"sheep"}, {"bear"}}
	synThings  = [][]string{{"couch", "sofa"}, {"bike", "bicycle"}, {"car", "automobile"}, {"photo", "picture"}, {"frisbee"}, {"skateboard"}, {"surfboard"}, {"umbrella"}, {"kite"}, {"pizza"}, {"sandwich"},
		{"laptop"}, {"cell phone", "phone"}, {"tennis racket", "racket"}, {"bat"}, {"ball"}, {"plate"}, {"bowl"}, {"cake"}, {"book"}, {"clock"}, {"fire hydrant", "hydrant"}, {"bus"}, {"truck"},
		{"train"}, {"motorcycle"}, {"boat"}, {"table"}, {"chair"}, {"bench"}, {"toilet"}, {"sink"}, {"bed"}, {"television", "tv"}, {"vase"}, {"teddy bear"}, {"suitcase"}, {"banana"}, {"apple"}}
	synPlaces = [][]string{{"beach"}, {"street", "road"}, {"field"}, {"kitchen"}, {"park"}, {"room", "living room"}, {"bathroom"}, {"water"}, {"snow"}, {"grass"}, {"sidewalk"},
		{"table"}, {"counter"}, {"desk"}, {"floor"}, {"ocean", "sea"}, {"sky"}, {"court"}, {"runway"}, {"city"}}
	colours   = []string{"red", "blue", "green", "white", "black", "yellow", "brown", "gray", "orange", "pink", "large", "small", "old", "young", "wooden", "tall", "little", "big"}
	counts    = []string{"two", "three", "four", "several", "a group of", "a couple of", "a pair of", "many"}
	verbsObj  = []string{"holding", "riding", "carrying", "eating", "watching", "throwing", "catching", "using", "pushing", "looking at", "playing with", "sitting on", "standing next to", "walking with"}
	verbsIntr = []string{"sitting", "standing", "walking", "running", "smiling", "laying", "sleeping", "playing", "waiting", "jumping"}
	preps     = []string{"on", "in", "near", "next to", "in front of", "on top of", "under", "beside", "behind", "by", "at", "along", "across"}
)

// SceneCaptions returns nImages*perImage COCO-like captions in English, the
// perImage consecutive ones of an image describing the same invented scene
// (people or animals, objects, colours, counts, actions, places) with
// varied wording and synonyms. They suit the metrics that parse captions
// (SPICE). The same seed gives the same captions.
func SceneCaptions(nImages, perImage int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	pickSyn := func(xs [][]string) []string { return xs[r.IntN(len(xs))] }
	out := make([]string, 0, nImages*perImage)
	var b strings.Builder
	for i := 0; i < nImages; i++ {
		var subj []string
		if r.IntN(2) == 0 {
			subj = pickSyn(synPeople)
		} else {
			subj = pickSyn(synAnimals)
		}
		obj, obj2, place := pickSyn(synThings), pickSyn(synThings), pickSyn(synPlaces)
		col, col2 := pick(colours), pick(colours)
		vo, vi, pr := pick(verbsObj), pick(verbsIntr), pick(preps)
		for k := 0; k < perImage; k++ {
			b.Reset()
			s, o, o2, pl := pick(subj), pick(obj), pick(obj2), pick(place)
			if r.IntN(4) == 0 {
				vo, pr = pick(verbsObj), pick(preps)
			}
			if r.IntN(2) == 0 {
				o = col2 + " " + o
			}
			tail := ""
			if r.IntN(2) == 0 {
				tail = " " + pick(preps) + " " + pick([]string{"a", "the"}) + " " + pick(pickSyn(synPlaces))
			}
			switch r.IntN(8) {
			case 0:
				fmt.Fprintf(&b, "%s %s %s %s %s %s %s the %s.", article(col), col, s, vo, article(o), o, pr, pl)
			case 1:
				fmt.Fprintf(&b, "%s %s are %s %s %s %s.", pick(counts), plural(s), vi, pr, article(pl), pl)
			case 2:
				fmt.Fprintf(&b, "There is %s %s %s %s %s %s the %s.", article(s), s, vo, article(o), o, pr, pl)
			case 3:
				fmt.Fprintf(&b, "%s %s and %s %s %s %s %s.", article(s), s, article(o), o, pr, article(pl), pl)
			case 4:
				fmt.Fprintf(&b, "%s %s who is %s %s %s %s.", article(s), s, vo, article(col), col, o)
			case 5:
				fmt.Fprintf(&b, "%s %s with %s %s and %s %s %s.", article(pl), pl, article(o), o, article(o2), col2, o2)
			case 6:
				fmt.Fprintf(&b, "A close up of %s %s %s %s %s.", article(o), o, pr, article(pl), pl)
			default:
				fmt.Fprintf(&b, "%s %s %s is %s %s %s %s %s.", article(col), col, s, vi, pr, article(o), o, "outside")
			}
			c := strings.TrimSuffix(b.String(), ".") + tail + "."
			out = append(out, strings.ToUpper(c[:1])+c[1:])
		}
	}
	return out
}

func article(w string) string {
	if w != "" && strings.ContainsRune("aeiou", rune(w[0])) {
		return "an"
	}
	return "a"
}

func plural(w string) string {
	switch {
	case strings.HasSuffix(w, "man"):
		return strings.TrimSuffix(w, "man") + "men"
	case w == "person":
		return "people"
	case w == "child":
		return "children"
	case w == "sheep":
		return w
	case strings.HasSuffix(w, "s") || strings.HasSuffix(w, "ch"):
		return w + "es"
	case strings.HasSuffix(w, "y") && !strings.HasSuffix(w, "ey") && !strings.HasSuffix(w, "oy") && !strings.HasSuffix(w, "ay"):
		return strings.TrimSuffix(w, "y") + "ies"
	}
	return w + "s"
}

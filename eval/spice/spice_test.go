package spice

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/eval/evaltest"
)

var (
	metricOnce sync.Once
	metric     *Metric
	metricErr  error
)

func testMetric(t testing.TB) *Metric {
	t.Helper()
	metricOnce.Do(func() { metric, metricErr = New() })
	if metricErr != nil {
		t.Fatal(metricErr)
	}
	return metric
}

// TestParseTuples checks the scene graphs of hand-analysed captions.
func TestParseTuples(t *testing.T) {
	m := testMetric(t)
	for _, c := range []struct {
		caption string
		want    string // tuples, space-separated between ")" and "("
	}{
		// objects and attributes
		{"a red car", "(car) (car, red)"},
		{"A black and white cat.", "(cat) (cat, black) (cat, white)"},
		{"a very large dog", "(dog) (dog, large)"},
		{"The man is tall.", "(man) (man, tall)"},
		{"The dog is brown and white.", "(dog) (dog, brown) (dog, white)"},
		{"a wooden table", "(table) (table, wooden)"},
		// counts and plurals
		{"two dogs", "(dog) (dog, two)"},
		{"Three women", "(woman) (woman, three)"},
		{"2 buses", "(bus) (bus, 2)"},
		{"a pair of skis", "(ski) (ski, pair)"},
		{"a couple of benches", "(bench) (bench, couple)"},
		{"several people", "(people) (people, several)"},
		{"boxes and leaves", "(box) (leaf)"},
		// compound nouns
		{"a fire hydrant", "(fire hydrant)"},
		{"a tennis racket", "(tennis racket)"},
		{"two fire hydrants", "(fire hydrant) (fire hydrant, two)"},
		{"a kitchen counter", "(counter) (counter, kitchen)"},
		{"a hot dog", "(hot dog)"},
		// relations
		{"A man riding a horse on a beach.", "(beach) (horse) (horse, on, beach) (man) (man, ride, horse)"},
		{"a cat on a bed", "(bed) (cat) (cat, on, bed)"},
		{"a bike next to a car", "(bike) (bike, next to, car) (car)"},
		{"a dog in front of a door", "(dog) (dog, in front of, door) (door)"},
		{"The cat is on the table.", "(cat) (cat, on, table) (table)"},
		{"a man with a hat", "(hat) (man) (man, with, hat)"},
		{"A cat and a dog on a bed.", "(bed) (cat) (cat, on, bed) (dog) (dog, on, bed)"},
		{"a man who is holding a bat", "(bat) (man) (man, hold, bat)"},
		{"An elephant that is standing in the water.", "(elephant) (elephant, stand in, water) (water)"},
		{"A man is sitting on a bench.", "(bench) (man) (man, sit on, bench)"},
		{"A woman is smiling.", "(woman) (woman, smile)"},
		{"A man in a red shirt riding a horse.", "(horse) (man) (man, in, shirt) (man, ride, horse) (shirt) (shirt, red)"},
		{"A man holding a bat and a ball.", "(ball) (bat) (man) (man, hold, ball) (man, hold, bat)"},
		{"A man holding a bat and a woman holding a ball.", "(ball) (bat) (man) (man, hold, bat) (woman) (woman, hold, ball)"},
		{"A kitchen with a stove, a sink and a refrigerator.", "(kitchen) (kitchen, with, refrigerator) (kitchen, with, sink) (kitchen, with, stove) (refrigerator) (sink) (stove)"},
		{"There is a cat sitting on the couch.", "(cat) (cat, sit on, couch) (couch)"},
		{"A man's hand", "(hand) (man) (man, have, hand)"},
		{"A dog with a frisbee in its mouth.", "(dog) (dog, have, mouth) (dog, with, frisbee) (frisbee) (frisbee, in, mouth) (mouth)"},
		{"Two dogs playing with a frisbee.", "(dog) (dog, play with, frisbee) (dog, two) (frisbee)"},
		{"A plate of food.", "(food) (plate) (plate, of, food)"},
		{"A dog laying down on a bed.", "(bed) (dog) (dog, lie down on, bed)"},
		{"a bus parked on the side of the road", "(bus) (bus, park on, side) (road) (side) (side, of, road)"},
		{"A man has a beard.", "(beard) (man) (man, have, beard)"},
		{"the man is a surfer", "(man) (man, surfer) (surfer)"},
		{"A bowl full of fruit.", "(bowl) (bowl, full) (bowl, of, fruit) (fruit)"},
		{"a sleeping cat", "(cat) (cat, sleep)"},
		{"A kite flown by a boy.", "(boy) (boy, fly, kite) (kite)"},
		{"A car parked by the curb.", "(car) (car, park by, curb) (curb)"},
		{"A frisbee is being thrown by a man.", "(frisbee) (man) (man, throw, frisbee)"},
		{"In a kitchen, a man cooks.", "(kitchen) (man) (man, cook) (man, in, kitchen)"},
		{"On the table is a cake.", "(cake) (cake, on, table) (table)"},
		{"A plate with a sandwich on it.", "(plate) (plate, with, sandwich) (sandwich) (sandwich, on, plate)"},
		{"A man next to a woman holding an umbrella.", "(man) (man, next to, woman) (umbrella) (woman) (woman, hold, umbrella)"},
		{"A plate of food sitting on a table.", "(food) (plate) (plate, of, food) (plate, sit on, table) (table)"},
		{"A man taking a picture of himself.", "(man) (man, take, picture) (picture) (picture, of, man)"},
		{"Two cats chasing each other.", "(cat) (cat, two)"},
		{"A cat and a dog chasing each other.", "(cat) (cat, chase, dog) (dog) (dog, chase, cat)"},
		{"A man trying to catch a frisbee.", "(frisbee) (man) (man, catch, frisbee) (man, try)"},
		{"A table with plates of food and glasses of wine.", "(food) (glasses) (glasses, of, wine) (plate) (plate, of, food) (table) (table, with, glasses) (table, with, plate) (wine)"},
		{"A man in a suit and tie standing in a room.", "(man) (man, in, suit) (man, in, tie) (man, stand in, room) (room) (suit) (tie)"},
		{"Three zebras drinking water from a pond.", "(pond) (water) (water, from, pond) (zebra) (zebra, drink, water) (zebra, three)"},
		{"A double decker bus.", "(bus) (bus, double-decker)"},
		{"A young boy swinging a bat.", "(bat) (boy) (boy, swing, bat) (boy, young)"},
		{"A dog running.", "(dog) (dog, run)"},
		{"A man looks happy.", "(man) (man, happy)"},
		{"A woman talks on her cell phone while walking.", "(cellphone) (woman) (woman, have, cellphone) (woman, talk on, cellphone) (woman, walk)"},
		{"Vegetables are being cooked in a pan.", "(pan) (vegetable) (vegetable, cook in, pan)"},
		{"A little girl holding a teddy bear.", "(girl) (girl, hold, teddy bear) (girl, little) (teddy bear)"},
		{"An old man.", "(man) (man, old)"},
		// nothing to parse
		{"", ""},
		{"...", ""},
		{"the and of", ""},
	} {
		got := strings.Join(m.Parse(c.caption).Tuples(), " ")
		if got != c.want {
			t.Errorf("Parse(%q)\n got %s\nwant %s", c.caption, got, c.want)
		}
	}
}

func TestTokenize(t *testing.T) {
	m := testMetric(t)
	for _, c := range []struct{ in, want string }{
		{"A man's hat.", "a man 's hat ."},
		{"The dogs' bowls", "the dogs 's bowls"},
		{"It isn't red, it's BLUE!", "it is not red , it 's blue ."},
		{"a T-shirt and a long-haired cat", "a t-shirt and a long-haired cat"},
		{"black-and-white photo", "black-and-white photo"},
		{"salt-pepper-shaker", "salt pepper shaker"},
		{"cats & dogs", "cats and dogs"},
		{"a cell phone, a close up", "a cellphone , a closeup"},
		{"  caf\u00e9  \t\n", "café"},
		{"\xff\xfe ok", "ok"},
	} {
		if got := strings.Join(respell(tokenize(m.db, c.in)), " "); got != c.want {
			t.Errorf("tokenize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestSynonyms checks WordNet synonym matching and synonym merging.
func TestSynonyms(t *testing.T) {
	m := testMetric(t)
	for _, c := range []struct {
		cand string
		refs []string
		want float64
	}{
		{"a couch", []string{"a sofa"}, 1},
		{"a bike", []string{"a bicycle"}, 1},
		{"an automobile", []string{"a car"}, 1},
		{"a kid", []string{"a child"}, 1},
		{"a photo", []string{"a picture"}, 1},
		{"a dog", []string{"a cat"}, 0},
		{"a man", []string{"a woman"}, 0},
		{"a red couch", []string{"a red sofa"}, 1},
		{"a crimson car", []string{"a red car"}, 1}, // attribute synonyms
		{"a man on a couch", []string{"a man on a sofa"}, 1},
		{"a man on a couch", []string{"a man next to a sofa"}, 2 * (2.0 / 3) * (2.0 / 3) / (4.0 / 3)},
	} {
		if got := m.Compare(c.cand, c.refs).F1; math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Compare(%q, %q) F1 = %v, want %v", c.cand, c.refs, got, c.want)
		}
	}
	// References merge synonymous objects: couch and sofa are one object.
	g := m.ParseReferences([]string{"a cat on a couch", "a cat on a sofa"})
	if got, want := strings.Join(g.Tuples(), " "), "(cat) (cat, on, couch/sofa) (couch/sofa)"; got != want {
		t.Errorf("merged references: got %s, want %s", got, want)
	}
}

// TestF1 checks hand-computed scores.
func TestF1(t *testing.T) {
	m := testMetric(t)
	for _, c := range []struct {
		cand          string
		refs          []string
		matched, n, r int
	}{
		// cand: (car) (car, red) (road) (car, on, road)
		// refs: (car) (car, blue) (street) (car, on, street): street and road
		// are not synonyms in WordNet, so only (car) matches.
		{"a red car on a road", []string{"a blue car on a street"}, 1, 4, 4},
		// refs merge to (car) (car, red) (car, blue) (road) (car, on, road)
		{"a red car on a road", []string{"a blue car on a road", "a red car"}, 4, 4, 5},
		// two references, one graph: (dog) (dog, two) (dog, brown) (grass) (dog, on, grass)
		{"two dogs on the grass", []string{"two brown dogs", "dogs on the grass"}, 4, 4, 5},
		{"a cat", []string{"a dog"}, 0, 1, 1},
		{"", []string{"a dog"}, 0, 0, 1},
		{"a dog", nil, 0, 1, 0},
	} {
		s := m.Compare(c.cand, c.refs)
		if s.Matched != c.matched || s.Candidate != c.n || s.Reference != c.r {
			t.Errorf("Compare(%q, %q) = %d of %d/%d, want %d of %d/%d", c.cand, c.refs, s.Matched, s.Candidate, s.Reference, c.matched, c.n, c.r)
			continue
		}
		var p, r, f float64
		if c.matched > 0 {
			p, r = float64(c.matched)/float64(c.n), float64(c.matched)/float64(c.r)
			f = 2 * p * r / (p + r)
		}
		if math.Abs(s.Precision-p) > 1e-12 || math.Abs(s.Recall-r) > 1e-12 || math.Abs(s.F1-f) > 1e-12 {
			t.Errorf("Compare(%q, %q) = P %v R %v F %v, want %v %v %v", c.cand, c.refs, s.Precision, s.Recall, s.F1, p, r, f)
		}
	}
}

// TestOneToOne checks that a reference tuple is matched at most once.
func TestOneToOne(t *testing.T) {
	m := testMetric(t)
	// The candidate's "couch" and "lounge" share a synset with the
	// reference's "sofa" (couch, sofa, lounge) and merge within the candidate
	// too, so build the case by hand at the graph level.
	v := newVocab(m.db)
	obj := func(w string) idTuple { return idTuple{kind: kindObject, a: v.id(roleObj, w)} }
	cand := buildGraph(v, []idTuple{obj("couch")}, []idTuple{obj("dog")})
	cand.nodes = append(cand.nodes, inode{name: concept{ids: []int32{v.id(roleObj, "sofa")}, syn: v.syn[roleObj][v.id(roleObj, "sofa")]}})
	ref := buildGraph(v, []idTuple{obj("lounge")})
	s := evaluate(cand, ref)
	if s.Matched != 1 || s.Candidate != 3 || s.Reference != 1 {
		t.Fatalf("got %d of %d/%d, want 1 of 3/1", s.Matched, s.Candidate, s.Reference)
	}
}

func TestMaxMatching(t *testing.T) {
	for _, c := range []struct {
		adj    [][]int
		nRight int
		want   int
	}{
		{nil, 0, 0},
		{[][]int{{0}, {0}}, 1, 1},
		{[][]int{{0, 1}, {0}}, 2, 2}, // greedy would take 0 for the first
		{[][]int{{0, 1, 2}, {0}, {1}}, 3, 3},
		{[][]int{{}, {2}, {2}}, 3, 1},
	} {
		if got := maxMatching(c.adj, c.nRight); got != c.want {
			t.Errorf("maxMatching(%v) = %d, want %d", c.adj, got, c.want)
		}
	}
}

// TestScorerAgreesWithCompare is the property test: the indexed Scorer
// (Score, Stats and ScoreRows) gives what the all-pairs matching gives, on
// random synthetic captions and on shuffled real-looking ones.
func TestScorerAgreesWithCompare(t *testing.T) {
	m := testMetric(t)
	const nImg, per = 60, 5
	caps := evaltest.SceneCaptions(nImg, per, 7)
	// Mix captions across images so that images share words but differ.
	r := rand.New(rand.NewPCG(3, 4))
	for k := 0; k < len(caps)/4; k++ {
		a, b := r.IntN(len(caps)), r.IntN(len(caps))
		caps[a], caps[b] = caps[b], caps[a]
	}
	caps = append(caps, "a couch and a sofa and a lounge", "a dog on a couch", "a lounge", "a sofa with a couch", "a red couch on a sofa")
	caps = append(caps, "", "...", "a cat", "a cat sitting on a cat", "two cats")
	caps = append(caps, wordSalad(9, 100)...)
	nImages := len(caps) / per
	s, err := m.PrepareScorer(context.Background(), caps, per)
	if err != nil {
		t.Fatal(err)
	}
	if s.NumCaptions() != len(caps) || s.NumImages() != nImages {
		t.Fatalf("NumCaptions %d NumImages %d", s.NumCaptions(), s.NumImages())
	}
	rows := make([]float32, len(caps)*nImages)
	if err := s.ScoreRows(context.Background(), 0, len(caps), rows); err != nil {
		t.Fatal(err)
	}
	nonzero := 0
	for i := range caps {
		for j := 0; j < nImages; j++ {
			want := evaluate(s.cand[i], s.ref[j])
			got := s.Stats(i, j)
			if got.Matched != want.Matched || got.Candidate != want.Candidate || got.Reference != want.Reference {
				t.Fatalf("caption %d %q vs image %d: Stats %+v, all-pairs %+v", i, caps[i], j, got, want)
			}
			sc := s.Score(i, j)
			if math.Abs(float64(sc)-want.F1) > 1e-6 {
				t.Fatalf("caption %d vs image %d: Score %v, F1 %v", i, j, sc, want.F1)
			}
			if rows[i*nImages+j] != sc {
				t.Fatalf("caption %d vs image %d: ScoreRows %v, Score %v", i, j, rows[i*nImages+j], sc)
			}
			if sc > 0 {
				nonzero++
			}
		}
	}
	if nonzero < len(caps) {
		t.Errorf("only %d non-zero scores: the test data is too sparse", nonzero)
	}
	// The graphs the scorer built are the ones Compare builds.
	for j := 0; j < nImages; j += 7 {
		got := strings.Join(s.ImageGraph(j).Tuples(), " ")
		want := strings.Join(m.ParseReferences(caps[j*per:(j+1)*per]).Tuples(), " ")
		if got != want {
			t.Errorf("image %d graph:\n%s\nvs ParseReferences:\n%s", j, got, want)
		}
		for i := j * per; i < (j+1)*per; i++ {
			if st, c := s.Stats(i, j), m.Compare(caps[i], caps[j*per:(j+1)*per]); st != c {
				t.Errorf("caption %d: Stats %+v, Compare %+v", i, st, c)
			}
		}
	}
}

// saladWords are polysemous and synonymous caption words, glue words and
// punctuation, for random captions that exercise synonym merging.
var saladWords = strings.Fields(`a the two red big man guy person woman lady dog cat puppy couch sofa
	lounge bank board table plate sits sitting on in next to with and , . is holding rides riding
	car automobile bike bicycle picture photo image top head hand bat ball kid child young old
	crimson scarlet white black glass glasses cup mug seat chair bench stand stands standing
	lie lying lay laying of his her its them who that there`)

func wordSalad(seed uint64, n int) []string {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]string, n)
	for i := range out {
		k := 3 + r.IntN(12)
		ws := make([]string, k)
		for j := range ws {
			ws[j] = saladWords[r.IntN(len(saladWords))]
		}
		out[i] = strings.Join(ws, " ")
	}
	return out
}

// TestOwnImage checks that a caption scores highest, on average, against
// its own image.
func TestOwnImage(t *testing.T) {
	m := testMetric(t)
	const nImg, per = 40, 5
	caps := evaltest.SceneCaptions(nImg, per, 11)
	s, err := m.PrepareScorer(context.Background(), caps, per)
	if err != nil {
		t.Fatal(err)
	}
	better := 0
	for i := range caps {
		own := s.Score(i, i/per)
		var other float32
		for j := 0; j < nImg; j++ {
			if j != i/per {
				other = max(other, s.Score(i, j))
			}
		}
		if own > other {
			better++
		}
	}
	if better < len(caps)*8/10 {
		t.Errorf("own image best for %d of %d captions", better, len(caps))
	}
}

func TestPrepareErrors(t *testing.T) {
	m := testMetric(t)
	if _, err := m.PrepareScorer(context.Background(), []string{"a", "b", "c"}, 2); err == nil {
		t.Error("3 captions at 2 per image accepted")
	}
	if _, err := m.PrepareScorer(context.Background(), []string{"a"}, 0); err == nil {
		t.Error("perImage 0 accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.PrepareScorer(ctx, evaltest.SceneCaptions(10, 5, 1), 5); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Prepare: %v", err)
	}
	s, err := m.PrepareScorer(context.Background(), nil, 5)
	if err != nil || s.NumCaptions() != 0 || s.NumImages() != 0 {
		t.Errorf("empty Prepare: %v", err)
	}
}

func TestRegistered(t *testing.T) {
	if !slices.Contains(eval.MetricNames(), "spice") {
		t.Fatal("spice not registered with package eval")
	}
	mt, err := eval.LookupMetric("spice")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := mt.Prepare(context.Background(), []string{"a red car", "a car", "a dog", "a brown dog"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Score(0, 0) != 1 || sc.Score(0, 1) != 0 {
		t.Errorf("scores %v %v", sc.Score(0, 0), sc.Score(0, 1))
	}
	if _, ok := sc.(eval.RowScorer); !ok {
		t.Error("Scorer is not an eval.RowScorer")
	}
}

func TestDeterministic(t *testing.T) {
	m := testMetric(t)
	caps := evaltest.SceneCaptions(30, 5, 5)
	a, err := m.PrepareScorer(context.Background(), caps, 5)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.PrepareScorer(context.Background(), caps, 5)
	if err != nil {
		t.Fatal(err)
	}
	for i := range caps {
		for j := 0; j < 30; j++ {
			if a.Score(i, j) != b.Score(i, j) {
				t.Fatalf("Score(%d, %d) differs between two Prepares", i, j)
			}
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"A man riding a horse on a beach.", "two dogs and a cat's bowl, which is red", "there's it's 's 's",
		"a-b-c--d 'n't", "\xff\xfe", "of of of on next to in front of", "a man who whose which that", "each other one another",
		strings.Repeat("a red ", 300), "A kite flown by a boy and his dog's toy"} {
		f.Add(s)
	}
	m := testMetric(f)
	f.Fuzz(func(t *testing.T, s string) {
		g := m.Parse(s)
		for _, r := range g.Relations {
			if r.Subject < 0 || r.Subject >= len(g.Objects) || r.Object < 0 || r.Object >= len(g.Objects) {
				t.Fatalf("relation %+v out of range", r)
			}
		}
		st := m.Compare(s, []string{s})
		if st.Matched > st.Candidate || st.Matched > st.Reference {
			t.Fatalf("stats %+v", st)
		}
	})
}

func ExampleMetric_Compare() {
	m, err := New()
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.Join(m.Parse("Two dogs playing on a couch.").Tuples(), " "))
	s := m.Compare("Two dogs playing on a couch.", []string{"Two puppies on a sofa.", "A dog on the sofa."})
	fmt.Printf("matched %d of %d candidate and %d reference tuples: F1 %.3f\n", s.Matched, s.Candidate, s.Reference, s.F1)
	// Output:
	// (couch) (dog) (dog, play on, couch) (dog, two)
	// matched 2 of 4 candidate and 6 reference tuples: F1 0.400
}

// TestMegabyteCaption checks SPICE on caption lines of a megabyte (many
// words, one word, punctuation only): preparing parses only the first
// words of each, a context done before scoring stops ScoreRows at once, and
// a context done while parsing stops the preparation.
func TestMegabyteCaption(t *testing.T) {
	m := testMetric(t)
	words := strings.Repeat("a man with a red dog runs on the grass ", 1<<20/40)
	for name, big := range map[string]string{
		"words":       words,
		"one word":    strings.Repeat("x", 1<<20),
		"punctuation": strings.Repeat(", ", 1<<19),
	} {
		t.Run(name, func(t *testing.T) {
			caps := []string{big, "a man", "a dog", "a red car", "a man with a dog", "a cat"}
			s, err := m.PrepareScorer(context.Background(), caps, 3)
			if err != nil {
				t.Fatal(err)
			}
			out := make([]float32, len(caps)*2)
			if err := s.ScoreRows(context.Background(), 0, len(caps), out); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := s.ScoreRows(ctx, 0, len(caps), out); !errors.Is(err, context.Canceled) {
				t.Errorf("ScoreRows with a done context: err = %v, want context.Canceled", err)
			}
			if _, err := m.PrepareScorer(ctx, caps, 3); !errors.Is(err, context.Canceled) {
				t.Errorf("PrepareScorer with a done context: err = %v, want context.Canceled", err)
			}
		})
	}
}

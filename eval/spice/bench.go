package spice

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xmr-project/xmr/bench"
)

func init() {
	bench.Register(bench.Benchmark{
		Name:    "spice",
		Summary: "SPICE relevance: parse 25,000 synthetic COCO-like captions and score all 125M caption-image pairs",
		Run:     runBench,
	})
}

// runBench times Prepare (parsing and indexing every caption) and the score
// of every caption against every image, once pair by pair through Score and
// once row by row through ScoreRows, on all cores.
func runBench(ctx context.Context, opts bench.Options) error {
	nImg, per := 5000, 5
	if opts.Quick {
		nImg = 500
	}
	caps := syntheticCaptions(1, nImg, per)
	nCap := len(caps)
	shape := fmt.Sprintf("%d captions x %d images", nCap, nImg)
	note := fmt.Sprintf("%s, %d threads", shape, runtime.GOMAXPROCS(0))
	m, err := New()
	if err != nil {
		return err
	}
	t0 := time.Now()
	s, err := m.PrepareScorer(ctx, caps, per)
	if err != nil {
		return err
	}
	prep := time.Since(t0).Seconds()
	opts.Emit(bench.Result{Name: "spice", Metric: "prepare (parse+index)", Value: prep, Unit: "s", Note: note})
	opts.Emit(bench.Result{Name: "spice", Metric: "parse rate", Value: float64(nCap) / prep, Unit: "captions/s", Note: note})

	pairs := float64(nCap) * float64(nImg)
	// Pair by pair.
	t1 := time.Now()
	sumPairs, err := scoreAll(ctx, s, false)
	if err != nil {
		return err
	}
	secPairs := time.Since(t1).Seconds()
	opts.Emit(bench.Result{Name: "spice", Metric: "Score pairs/s", Value: pairs / secPairs, Unit: "pairs/s", Note: note})
	opts.Emit(bench.Result{Name: "spice", Metric: "Score all pairs", Value: secPairs, Unit: "s", Note: note})
	// Row by row.
	t2 := time.Now()
	sumRows, err := scoreAll(ctx, s, true)
	if err != nil {
		return err
	}
	secRows := time.Since(t2).Seconds()
	if sumRows != sumPairs {
		return fmt.Errorf("ScoreRows and Score disagree: checksums %v and %v", sumRows, sumPairs)
	}
	opts.Emit(bench.Result{Name: "spice", Metric: "ScoreRows pairs/s", Value: pairs / secRows, Unit: "pairs/s", Note: note})
	opts.Emit(bench.Result{Name: "spice", Metric: "ScoreRows all pairs", Value: secRows, Unit: "s", Note: note})
	opts.Emit(bench.Result{Name: "spice", Metric: "total (prepare+ScoreRows)", Value: prep + secRows, Unit: "s", Note: note})
	return nil
}

// scoreAll computes every score, in parallel over rows, and returns the sum
// of the scores (as float64 of float32 values summed in row order, so that
// both paths give bit-identical sums).
func scoreAll(ctx context.Context, s *Scorer, rows bool) (float64, error) {
	nCap, nImg := s.NumCaptions(), s.NumImages()
	const chunk = 64
	sums := make([]float64, (nCap+chunk-1)/chunk)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]float32, chunk*nImg)
			for ctx.Err() == nil {
				k := int(next.Add(1) - 1)
				if k >= len(sums) {
					return
				}
				i0, i1 := k*chunk, min((k+1)*chunk, nCap)
				out := buf[:(i1-i0)*nImg]
				if rows {
					s.ScoreRows(i0, i1, out)
				} else {
					for i := i0; i < i1; i++ {
						row := out[(i-i0)*nImg : (i-i0+1)*nImg]
						for j := range row {
							row[j] = s.Score(i, j)
						}
					}
				}
				var sum float64
				for _, x := range out {
					sum += float64(x)
				}
				sums[k] = sum
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var total float64
	for _, x := range sums {
		total += x
	}
	return total, nil
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

// syntheticCaptions returns nImages*perImage COCO-length captions, perImage
// consecutive ones per image describing the same invented scene with
// varied wording and synonyms. The same seed gives the same captions.
func syntheticCaptions(seed uint64, nImages, perImage int) []string {
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

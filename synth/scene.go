package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Object is one shape of a scene.
type Object struct {
	// Category indexes Categories, Colour indexes Colours.
	Category, Colour int
	// Large is the size attribute (false: small).
	Large bool
	// X, Y is the centre in pixels; Radius the circumradius in pixels; Angle
	// the rotation in radians (clockwise, since y grows downwards).
	X, Y, Radius, Angle float64
	// RGB is the drawn colour: the colour's RGB with a small jitter.
	RGB [3]uint8
	// Box is the tight pixel box of the drawn shape, x1, y1, x2, y2 with
	// exclusive ends; Render sets it.
	Box [4]int
	// Region is the index, in the image's ordered region list, of the
	// object's own proposal; the proposal step sets it.
	Region int
}

// Scene is the content of one image.
type Scene struct {
	// Family is the global number of the family's base image; Variant is 0
	// for the base scene and 1..3 for variants, each of which changes one
	// thing of the base (Change says what).
	Family, Variant int
	Change          string
	// Background indexes Backgrounds; BgRGB is its jittered tone.
	Background int
	BgRGB      [3]uint8
	// Texture parameters: a linear gradient (GradX, GradY: grey levels
	// across the image), a separable sinusoid (TexAmp, TexFreq, TexPhase) and
	// per-pixel noise derived from NoiseSeed.
	GradX, GradY int
	TexAmp       float64
	TexFreq      [2]float64
	TexPhase     [2]float64
	NoiseSeed    uint64
	// Objects are drawn in order; later objects cover earlier ones.
	Objects []Object
}

// Random streams. Each image derives its streams from (seed, tag, number)
// so that it can be made alone, in any order, on any worker.
const (
	tagScene uint64 = iota + 1
	tagVariant
	tagFamily
	tagRegions
	tagCaptions
	tagNoise
	tagProjection
)

// mix is the splitmix64 finaliser: a bijective scrambler of 64-bit values.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// seeds returns the two PCG seeds of stream tag for number g.
func seeds(seed, tag uint64, g int) (uint64, uint64) {
	a := mix(seed ^ mix(tag<<32|0x51))
	return a, mix(a ^ mix(uint64(g)+tag))
}

// rng is a reusable random stream.
type rng struct {
	src *rand.PCG
	*rand.Rand
}

func newRNG() *rng {
	src := rand.NewPCG(0, 0)
	return &rng{src: src, Rand: rand.New(src)}
}

// reset positions r at the start of stream tag for number g.
func (r *rng) reset(seed, tag uint64, g int) *rng {
	r.src.Seed(seeds(seed, tag, g))
	return r
}

// uniform returns a value in [lo, hi).
func (r *rng) uniform(lo, hi float64) float64 { return lo + (hi-lo)*r.Float64() }

// Scene-generation constants.
const (
	familyBlock = 4 // images per family block; a family has 1..4 members
	minObjects  = 2
	maxObjects  = 6
	margin      = 3.0 // pixels kept free at the image border
)

// familyOf returns the family (global number of the base image) and variant
// number of local image l of sp. Images are grouped in blocks of four; a block
// starts with a family of 1 to 4 members (40/25/20/15%), the rest of the
// block are singletons.
func familyOf(seed uint64, sp Split, l int) (family, variant int) {
	bstart := l / familyBlock * familyBlock
	r := mix(seed^mix(tagFamily<<32|uint64(sp.Start+bstart))) % 100
	m := 1
	switch {
	case r < 40:
		m = 1
	case r < 65:
		m = 2
	case r < 85:
		m = 3
	default:
		m = 4
	}
	if j := l - bstart; j < m {
		return sp.Start + bstart, j
	}
	return sp.Start + l, 0
}

// makeScene builds the scene of global image g, variant v of family f.
func makeScene(seed uint64, f, v, g int, r *rng) Scene {
	s := baseScene(r.reset(seed, tagScene, f))
	s.Family = f
	if v > 0 {
		s.Variant = v
		makeVariant(&s, r.reset(seed, tagVariant, g))
	}
	return s
}

// baseScene draws a new scene: background, 2-6 objects with random
// attributes (30% of scenes repeat the first object's look once or twice, so
// that counts appear in captions) at non-overlapping positions.
func baseScene(r *rng) Scene {
	var s Scene
	s.Background = r.IntN(len(Backgrounds))
	for c := range 3 {
		s.BgRGB[c] = clampByte(int(Backgrounds[s.Background].RGB[c]) + r.IntN(13) - 6)
	}
	s.GradX, s.GradY = r.IntN(17)-8, r.IntN(17)-8
	s.TexAmp = r.uniform(1, 4)
	s.TexFreq = [2]float64{r.uniform(0.05, 0.3), r.uniform(0.05, 0.3)}
	s.TexPhase = [2]float64{r.uniform(0, 2*math.Pi), r.uniform(0, 2*math.Pi)}
	s.NoiseSeed = r.Uint64()

	n := minObjects
	switch p := r.IntN(100); {
	case p < 15:
		n = 2
	case p < 40:
		n = 3
	case p < 65:
		n = 4
	case p < 85:
		n = 5
	default:
		n = 6
	}
	objs := make([]Object, n)
	for i := range objs {
		objs[i] = randomLook(r)
	}
	if r.IntN(100) < 30 {
		k := 1
		if n >= 4 && r.IntN(100) < 30 {
			k = 2
		}
		for i := 1; i <= k; i++ {
			objs[i].Category, objs[i].Colour, objs[i].Large = objs[0].Category, objs[0].Colour, objs[0].Large
			objs[i].RGB = jitterRGB(r, objs[i].Colour)
			objs[i].Angle = randomAngle(r, objs[i].Category)
		}
	}
	for _, o := range objs {
		if place(r, &o, s.Objects, -1) {
			s.Objects = append(s.Objects, o)
		}
	}
	for len(s.Objects) < minObjects { // very unlikely: the image is nearly empty
		o := randomLook(r)
		o.Large = false
		if place(r, &o, s.Objects, -1) {
			s.Objects = append(s.Objects, o)
		}
	}
	return s
}

// randomLook returns an object with random category, colour, size and
// rotation, not yet placed.
func randomLook(r *rng) Object {
	var o Object
	o.Category = r.IntN(len(Categories))
	o.Colour = r.IntN(len(Colours))
	o.Large = r.IntN(100) < 40
	o.RGB = jitterRGB(r, o.Colour)
	o.Angle = randomAngle(r, o.Category)
	return o
}

func jitterRGB(r *rng, colour int) [3]uint8 {
	var c [3]uint8
	for k := range 3 {
		c[k] = clampByte(int(Colours[colour].RGB[k]) + r.IntN(25) - 12)
	}
	return c
}

// randomAngle returns a small rotation: enough to vary the pixels, not
// enough to turn a square into a diamond.
func randomAngle(r *rng, cat int) float64 {
	switch cat {
	case Circle, Ring:
		return 0
	case Crescent:
		return r.uniform(-0.6, 0.6)
	case Triangle, Star, Arrow:
		return r.uniform(-0.3, 0.3)
	default:
		return r.uniform(-0.2, 0.2)
	}
}

func radiusFor(r *rng, large bool) float64 {
	if large {
		return r.uniform(15, 20)
	}
	return r.uniform(8, 11)
}

// place draws a radius and a free position for o among others (skipping
// index skip); it reports false if none was found in 200 tries, trying a small
// size before giving up on a large object.
func place(r *rng, o *Object, others []Object, skip int) bool {
	for attempt := 0; attempt < 2; attempt++ {
		o.Radius = radiusFor(r, o.Large)
		for range 200 {
			o.X = r.uniform(o.Radius+margin, ImageWidth-o.Radius-margin)
			o.Y = r.uniform(o.Radius+margin, ImageHeight-o.Radius-margin)
			if fits(o, others, skip) {
				return true
			}
		}
		if !o.Large {
			return false
		}
		o.Large = false
	}
	return false
}

// fits reports whether o keeps its distance from every object but skip:
// bounding circles may overlap by at most 15% of the radii.
func fits(o *Object, others []Object, skip int) bool {
	for i := range others {
		if i == skip {
			continue
		}
		p := &others[i]
		if math.Hypot(o.X-p.X, o.Y-p.Y) < 0.85*(o.Radius+p.Radius)+1 {
			return false
		}
	}
	return true
}

// makeVariant changes one thing of s: an object's colour, category, size or
// position, an added or removed object, or two objects swapping places.
// Changes that cannot be made (no room, too few objects) fall back to a
// colour change, which always can.
func makeVariant(s *Scene, r *rng) {
	objs := append([]Object(nil), s.Objects...)
	s.Objects = objs
	n := len(objs)
	p := r.IntN(100)
	i := r.IntN(n)
	switch {
	case p < 20: // category
		o := objs[i]
		o.Category = (o.Category + 1 + r.IntN(len(Categories)-1)) % len(Categories)
		o.Angle = randomAngle(r, o.Category)
		objs[i] = o
		s.Change = fmt.Sprintf("category of object %d", i)
		return
	case p < 35: // size
		o := objs[i]
		o.Large = !o.Large
		if place(r, &o, objs, i) && o.Large == !objs[i].Large {
			objs[i] = o
			s.Change = fmt.Sprintf("size of object %d", i)
			return
		}
	case p < 50: // move
		o := objs[i]
		if place(r, &o, objs, i) && o.Large == objs[i].Large {
			objs[i] = o
			s.Change = fmt.Sprintf("position of object %d", i)
			return
		}
	case p < 60: // add
		if n < maxObjects {
			o := randomLook(r)
			if place(r, &o, objs, -1) {
				s.Objects = append(objs, o)
				s.Change = fmt.Sprintf("added object %d", n)
				return
			}
		}
	case p < 70: // remove
		if n > minObjects {
			s.Objects = append(objs[:i:i], objs[i+1:]...)
			s.Change = fmt.Sprintf("removed object %d", i)
			return
		}
	case p < 75: // swap the places of two objects
		j := r.IntN(n)
		if i != j && objs[i].Large == objs[j].Large && (objs[i].Category != objs[j].Category || objs[i].Colour != objs[j].Colour) {
			a, b := objs[i], objs[j]
			objs[i].X, objs[i].Y, objs[j].X, objs[j].Y = b.X, b.Y, a.X, a.Y
			if fits(&objs[i], objs, i) && fits(&objs[j], objs, j) {
				s.Change = fmt.Sprintf("swapped objects %d and %d", i, j)
				return
			}
			objs[i], objs[j] = a, b
		}
	}
	o := objs[i]
	o.Colour = (o.Colour + 1 + r.IntN(len(Colours)-1)) % len(Colours)
	o.RGB = jitterRGB(r, o.Colour)
	objs[i] = o
	s.Change = fmt.Sprintf("colour of object %d", i)
}

func clampByte(v int) uint8 {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

package synth

import (
	"cmp"
	"math"
	"slices"
)

// RegionKind says where a region proposal came from.
type RegionKind uint8

// Region proposal kinds.
const (
	// KindObject is an object's own box: its tight box with a small jitter
	// (IoU at least 0.7 with it). Every object has exactly one.
	KindObject RegionKind = iota
	// KindPart is a loose box or a half of an object.
	KindPart
	// KindSpan covers two objects.
	KindSpan
	// KindBackground is a random crop.
	KindBackground
)

// String returns the kind's name.
func (k RegionKind) String() string {
	return [...]string{"object", "part", "span", "background"}[k]
}

// Region is one region proposal of an image.
type Region struct {
	// Box is x1, y1, x2, y2 in pixels, inside the image.
	Box [4]float32
	// Score is the proposal's confidence; regions are sorted by it.
	Score float32
	Kind  RegionKind
	// Object is the object a KindObject or KindPart region was made from, or
	// the first object of a span; -1 for background crops.
	Object int
}

// proposals returns the ordered region list of s for at most maxRegions
// slots: each object's own box (jittered, high score), then parts, spans and
// background crops (lower scores) up to a count drawn uniformly from
// [ceil(3/4 maxRegions), maxRegions]; all sorted by descending score. It sets
// every object's Region. out is reused.
func proposals(s *Scene, maxRegions int, r *rng, out []Region) []Region {
	out = out[:0]
	n := len(s.Objects)
	lo := (3*maxRegions + 3) / 4
	count := max(lo+r.IntN(maxRegions-lo+1), n)
	for i := range s.Objects {
		tb := boxF(s.Objects[i].Box)
		b := tb
		for range 8 {
			c := jitterBox(r, tb, 0.06)
			if iou(c, tb) >= 0.7 {
				b = c
				break
			}
		}
		out = append(out, Region{Box: b, Score: float32(0.7 + 0.28*r.Float64()), Kind: KindObject, Object: i})
	}
	for len(out) < count {
		p := r.IntN(100)
		switch {
		case p < 40:
			i := r.IntN(n)
			tb := boxF(s.Objects[i].Box)
			var b [4]float32
			if r.IntN(2) == 0 {
				b = jitterBox(r, tb, 0.25)
			} else { // one half of the object
				b = tb
				cx, cy := (tb[0]+tb[2])/2, (tb[1]+tb[3])/2
				switch r.IntN(4) {
				case 0:
					b[2] = cx
				case 1:
					b[0] = cx
				case 2:
					b[3] = cy
				default:
					b[1] = cy
				}
				b = jitterBox(r, b, 0.1)
			}
			out = append(out, Region{Box: b, Score: float32(0.35 + 0.4*r.Float64()), Kind: KindPart, Object: i})
		case p < 60:
			i, j := r.IntN(n), r.IntN(n-1)
			if j >= i {
				j++
			}
			a, c := s.Objects[i].Box, s.Objects[j].Box
			u := boxF([4]int{min(a[0], c[0]), min(a[1], c[1]), max(a[2], c[2]), max(a[3], c[3])})
			out = append(out, Region{Box: jitterBox(r, u, 0.05), Score: float32(0.25 + 0.4*r.Float64()), Kind: KindSpan, Object: i})
		default:
			w := r.uniform(0.1, 0.5) * ImageWidth
			h := r.uniform(0.1, 0.5) * ImageHeight
			x := r.uniform(0, ImageWidth-w)
			y := r.uniform(0, ImageHeight-h)
			b := [4]float32{float32(x), float32(y), float32(x + w), float32(y + h)}
			out = append(out, Region{Box: clipBox(b), Score: float32(0.02 + 0.45*r.Float64()), Kind: KindBackground, Object: -1})
		}
	}
	slices.SortStableFunc(out, func(a, b Region) int { return cmp.Compare(b.Score, a.Score) })
	for k, reg := range out {
		if reg.Kind == KindObject {
			s.Objects[reg.Object].Region = k
		}
	}
	return out
}

func boxF(b [4]int) [4]float32 {
	return [4]float32{float32(b[0]), float32(b[1]), float32(b[2]), float32(b[3])}
}

// jitterBox moves each side of b by a Gaussian of sd rel times the box size
// (clipped to 2 sd), rounds to a quarter pixel and keeps the box inside the
// image and at least 3 pixels wide and high.
func jitterBox(r *rng, b [4]float32, rel float64) [4]float32 {
	w, h := float64(b[2]-b[0]), float64(b[3]-b[1])
	j := func(v float32, size float64) float32 {
		d := math.Max(-2, math.Min(2, r.NormFloat64())) * rel * size
		return float32(math.Round((float64(v)+d)*4) / 4)
	}
	return clipBox([4]float32{j(b[0], w), j(b[1], h), j(b[2], w), j(b[3], h)})
}

// clipBox keeps b inside the image with sides of at least 3 pixels.
func clipBox(b [4]float32) [4]float32 {
	const minSide float32 = 3
	fix := func(lo, hi float32, limit float32) (float32, float32) {
		lo, hi = max(0, min(lo, limit)), max(0, min(hi, limit))
		if hi < lo {
			lo, hi = hi, lo
		}
		if hi-lo < minSide {
			c := min(max((lo+hi)/2, minSide/2), limit-minSide/2)
			lo, hi = c-minSide/2, c+minSide/2
		}
		return lo, hi
	}
	b[0], b[2] = fix(b[0], b[2], ImageWidth)
	b[1], b[3] = fix(b[1], b[3], ImageHeight)
	return b
}

// iou is the intersection over union of two boxes.
func iou(a, b [4]float32) float64 {
	iw := float64(min(a[2], b[2]) - max(a[0], b[0]))
	ih := float64(min(a[3], b[3]) - max(a[1], b[1]))
	if iw <= 0 || ih <= 0 {
		return 0
	}
	inter := iw * ih
	ua := float64((a[2]-a[0])*(a[3]-a[1])) + float64((b[2]-b[0])*(b[3]-b[1])) - inter
	return inter / ua
}

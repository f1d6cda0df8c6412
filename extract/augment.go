package extract

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/xmr-project/xmr/detect"
)

// AugmentSuffix ends the id of an augmented copy (AugmentSplit), before
// the copy's number.
const AugmentSuffix = "~aug"

// CopyOf returns the id of the image that id is an augmented copy of
// (AugmentSplit's ID~augK), and whether it is one.
func CopyOf(id string) (string, bool) {
	k := strings.LastIndex(id, AugmentSuffix)
	if k <= 0 {
		return "", false
	}
	num := id[k+len(AugmentSuffix):]
	if num == "" {
		return "", false
	}
	for _, r := range num {
		if r < '0' || r > '9' {
			return "", false
		}
	}
	return id[:k], true
}

// AugmentSplit returns s with copies more views of each of its images
// that is not itself an augmented copy (Item.Augment unset) after its
// items: copy k of image ID has the id ID~augK and the image's captions,
// and is extracted from a random crop of the photo, its colours jittered
// (Picture.Augment), drawn from seed, k and the image's position: the same
// call gives the same views. A mirrored copy (MirrorSplit) gets views of
// the mirror image (ID~mirror~augK, mirrored first, then cropped), with
// its captions' sides swapped as the mirror's are.
func AugmentSplit(s SplitSpec, copies int, seed uint64) SplitSpec {
	out := SplitSpec{Name: s.Name, Items: slices.Clone(s.Items), Captions: slices.Clone(s.Captions)}
	for k := 1; k <= copies; k++ {
		for i, it := range s.Items {
			if it.Augment != 0 {
				continue
			}
			v := rand.New(rand.NewPCG(seed, uint64(k)<<32|uint64(i))).Uint64() | 1 // never 0: 0 means no augmentation
			out.Items = append(out.Items, Item{Path: it.Path, ID: fmt.Sprintf("%s%s%d", it.ID, AugmentSuffix, k), Mirror: it.Mirror, Augment: v})
			if s.Captions != nil {
				out.Captions = append(out.Captions, s.Captions[i])
			}
		}
	}
	return out
}

// Augment turns the picture, in place, into a random view of it drawn
// from seed: a crop of 60% to 100% of its area, of an aspect 3/4 to 4/3
// times the input's, stretched back to the detector's input (bilinear),
// then its brightness, contrast and saturation each scaled by 0.7 to 1.3.
// Width and Height stay the photo's: boxes found in the view are where
// they lie in it.
func (p *Picture) Augment(seed uint64) {
	const S = detect.InputSize
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	area := 0.6 + 0.4*rng.Float64()
	aspect := math.Exp(math.Log(0.75) + (math.Log(4.0/3)-math.Log(0.75))*rng.Float64())
	cw := math.Min(S, S*math.Sqrt(area*aspect))
	ch := math.Min(S, S*math.Sqrt(area/aspect))
	x0 := rng.Float64() * (S - cw)
	y0 := rng.Float64() * (S - ch)
	src := p.RGB
	out := make([]float32, len(src))
	at := func(x, y, c int) float32 { return src[(y*S+x)*3+c] }
	for y := 0; y < S; y++ {
		sy := y0 + (float64(y)+0.5)*ch/S - 0.5
		yl := int(math.Floor(sy))
		fy := float32(sy - float64(yl))
		y1, y2 := clampInt(yl, 0, S-1), clampInt(yl+1, 0, S-1)
		for x := 0; x < S; x++ {
			sx := x0 + (float64(x)+0.5)*cw/S - 0.5
			xl := int(math.Floor(sx))
			fx := float32(sx - float64(xl))
			x1, x2 := clampInt(xl, 0, S-1), clampInt(xl+1, 0, S-1)
			for c := 0; c < 3; c++ {
				top := at(x1, y1, c)*(1-fx) + at(x2, y1, c)*fx
				bot := at(x1, y2, c)*(1-fx) + at(x2, y2, c)*fx
				out[(y*S+x)*3+c] = top*(1-fy) + bot*fy
			}
		}
	}
	bright := float32(0.7 + 0.6*rng.Float64())
	contrast := float32(0.7 + 0.6*rng.Float64())
	sat := float32(0.7 + 0.6*rng.Float64())
	var mean float64
	for i := 0; i < len(out); i += 3 {
		mean += float64(gray(out[i:i+3]) * bright)
	}
	m := float32(mean / float64(S*S))
	for i := 0; i < len(out); i += 3 {
		px := out[i : i+3]
		g := gray(px)
		for c := range px {
			v := g + (px[c]-g)*sat
			v = (v*bright-m)*contrast + m
			px[c] = min(max(v, 0), 255)
		}
	}
	p.RGB = out
}

// gray is the luma of an RGB pixel.
func gray(px []float32) float32 { return 0.299*px[0] + 0.587*px[1] + 0.114*px[2] }

func clampInt(v, lo, hi int) int { return min(max(v, lo), hi) }

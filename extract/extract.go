// Package extract turns images into the region features that xmr's models
// read: it decodes a JPEG or PNG (EXIF orientation applied, decompression
// bombs refused before decoding), stretches it to the detector's input,
// runs the detector of package detect, chooses up to MaxBoxes boxes
// (detections, then the whole image and grid cells), and pools one vector
// per box from the detector's feature maps by ROI-Align, plus one global
// vector per image.
//
// Extract writes data sets in the precomp layout of package data
// (resumable, in chunks published atomically, shardable across machines),
// and a features.json beside them records which extractor made the
// features (Identity), so that a model trained on one extractor's features
// is never given another's. docs/extract.md describes it.
package extract

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/xmr-project/xmr/detect"
)

// Detector is what the extractor needs of a detector: *detect.Detector,
// or a fake in tests. Run must be safe for concurrent use.
type Detector interface {
	// MapInfo describes the feature maps Run can return, in order (their
	// names, channels and strides), without running the network; those
	// marked Optional only when RunOptions.Maps names them.
	MapInfo() []detect.MapSpec
	Run(ctx context.Context, rgb []float32, opt detect.RunOptions) (*detect.Output, error)
}

// Tuning is implemented by a detector whose upper part a model fine-tuned
// (detect.Tuned): Tuning names the cut, which the extractor's Identity
// records (Identity.Tuned).
type Tuning interface {
	Tuning() string
}

// Options tune an Extractor. The zero value gives the defaults.
type Options struct {
	// Maps names the detector's feature maps pooled into each region's
	// vector, concatenated in this order (nil: DefaultMaps); it may name
	// an Optional map, such as detect.ClassMap.
	Maps []string
	// MaxBoxes is the number of region slots per image (0: 36, as the
	// bottom-up features of the papers).
	MaxBoxes int
	// MinScore is the detection score a box needs (0: DefaultMinScore).
	MinScore float32
	// NoFill leaves images with fewer detections than MaxBoxes with fewer
	// regions instead of filling the slots with the whole image and grid
	// cells.
	NoFill bool
	// Taps names a cut of the detector (detect.Cuts: "s16" or "s32") whose
	// activation Run returns beside the features (Features.Tap), for
	// fine-tuning the detector's upper part from it; "" for none. The
	// detector must return that activation (detect.Detector.WithTaps with
	// the cut's Node), which Run checks. Taps are extra data beside the
	// same features: they do not change the Identity.
	Taps string
	// Untuned asks, of an extractor whose detector has a fine-tuned part
	// (Tuning), for the features of the detector as published as well
	// (Features.UntunedRegions and UntunedGlobal, over the same boxes):
	// what a model trained on the published detector's features reads,
	// from the same run.
	Untuned bool
}

// DefaultMinScore is the detection score a detected box needs to become a
// region by default.
const DefaultMinScore = 0.2

// DefaultMaps are the feature maps pooled by default: nil means every map
// the detector returns unasked (every one its MapInfo does not mark
// Optional).
var DefaultMaps []string

// Pooling names how region vectors are made from the maps; it is part of
// the Identity and changes whenever the vectors would.
const Pooling = "roialign-mean-v1"

func (o Options) maxBoxes() int {
	if o.MaxBoxes > 0 {
		return o.MaxBoxes
	}
	return 36
}

func (o Options) minScore() float32 {
	if o.MinScore > 0 {
		return o.MinScore
	}
	return DefaultMinScore
}

// Extractor makes region features of images with a detector. It is safe for
// concurrent use when its detector is.
type Extractor struct {
	det   Detector
	opt   Options
	info  []detect.MapSpec // the detector's maps, as its MapInfo says
	maps  []int            // indexes into info of the maps pooled, in order (ident.Maps names them)
	ident Identity
	cut   *detect.Cut // the cut Options.Taps names; nil for none
}

// New returns an extractor over det. It learns det's maps from its
// MapInfo, without running it, and checks that opt.Maps names some of
// them.
func New(det Detector, opt Options) (*Extractor, error) {
	info := det.MapInfo()
	if len(info) == 0 {
		return nil, errors.New("extractor: the detector has no feature maps")
	}
	var names []string
	for _, m := range info {
		if m.C <= 0 || m.Stride <= 0 || m.Name == "" {
			return nil, fmt.Errorf("extractor: detector map %q has %d channels and stride %d", m.Name, m.C, m.Stride)
		}
		if slices.Contains(names, m.Name) {
			return nil, fmt.Errorf("extractor: the detector names two maps %q", m.Name)
		}
		names = append(names, m.Name)
	}
	e := &Extractor{det: det, opt: opt, info: info}
	if opt.Taps != "" {
		c, err := detect.CutNamed(opt.Taps)
		if err != nil {
			return nil, fmt.Errorf("extractor: taps: %w", err)
		}
		e.cut = &c
	}
	want := opt.Maps
	if len(want) == 0 {
		want = DefaultMaps
	}
	if len(want) == 0 {
		for _, m := range info {
			if !m.Optional {
				want = append(want, m.Name)
			}
		}
	}
	width := 0
	for _, w := range want {
		i := slices.Index(names, w)
		if i < 0 {
			return nil, fmt.Errorf("extractor: the detector has no feature map %q; it has %s", w, strings.Join(names, ", "))
		}
		if slices.Contains(e.maps, i) {
			return nil, fmt.Errorf("extractor: feature map %q named twice", w)
		}
		e.maps = append(e.maps, i)
		width += info[i].C
	}
	e.ident = Identity{Name: detect.Name, Version: detect.Version, Width: width, Maps: slices.Clone(want), Pooling: Pooling}
	if t, ok := det.(Tuning); ok {
		e.ident.Tuned = t.Tuning()
	}
	return e, nil
}

// Identity returns the identity of the features this extractor makes.
func (e *Extractor) Identity() Identity { return e.ident }

// Width returns the length of a region's (and the global) feature vector.
func (e *Extractor) Width() int { return e.ident.Width }

// MaxBoxes returns the number of region slots per image.
func (e *Extractor) MaxBoxes() int { return e.opt.maxBoxes() }

// MinScore returns the detection score a detected box needs.
func (e *Extractor) MinScore() float32 { return e.opt.minScore() }

// Taps returns the name of the cut whose activation Run returns in
// Features.Tap (Options.Taps), or "" when it returns none.
func (e *Extractor) Taps() string {
	if e.cut == nil {
		return ""
	}
	return e.cut.Name
}

// Region sources: a detection, or a box added to fill the slots.
const (
	FillWhole = -1 // the whole image
	FillGrid  = -2 // a cell of a 2x2 or 3x3 grid
)

// Features are the features of one image.
type Features struct {
	// Regions is len(Boxes) vectors of the extractor's Width, one after
	// the other.
	Regions []float32
	// Boxes are x1, y1, x2, y2 in the pixels of the upright original image.
	Boxes [][4]float32
	// Classes is the COCO class of each detected region, FillWhole or
	// FillGrid for the others; Scores their detection scores (0 for fill).
	Classes []int
	Scores  []float32
	// Global is the whole image's vector: the mean of each chosen map over
	// every cell, concatenated.
	Global []float32
	// UntunedRegions and UntunedGlobal are Regions and Global as the
	// detector without its fine-tuned part makes them (Options.Untuned;
	// the Identity without Tuned), over the same boxes; nil otherwise.
	UntunedRegions, UntunedGlobal []float32
	// Width and Height are the upright image's size in pixels.
	Width, Height int
	// Tap is the detector's activation at the cut that Options.Taps names,
	// a copy; nil without Options.Taps.
	Tap *Tap
}

// Tap is the activation of the detector at a cut (detect.Cuts) for one
// image, as its frozen lower part computes it from the image stretched to
// the 512 x 512 input (mirrored for a mirrored copy): an H x W x C map,
// e.g. 16 x 16 x 120 at cut "s32".
type Tap struct {
	// Cut names the cut; H, W and C are the map's height, width and
	// channels.
	Cut     string
	H, W, C int
	// Data holds H*W*C values in row-major HWC order.
	Data []float32
}

// Run extracts the features of a prepared picture.
func (e *Extractor) Run(ctx context.Context, p *Picture) (*Features, error) {
	const S = detect.InputSize
	if len(p.RGB) != S*S*3 {
		return nil, fmt.Errorf("extractor: picture has %d values, want %d", len(p.RGB), S*S*3)
	}
	untuned := e.opt.Untuned && e.ident.Tuned != ""
	out, err := e.det.Run(ctx, p.RGB, detect.RunOptions{MaxDetections: e.opt.maxBoxes(), MinScore: e.opt.minScore(), Maps: e.ident.Maps, KeepUntuned: untuned})
	if err != nil {
		return nil, err
	}
	defer out.Release() // the maps are pooled into f below and not kept
	var tap *Tap
	if e.cut != nil {
		// Copied now: out.Release hands the detector's memory back.
		if tap, err = e.copyTap(out.Taps); err != nil {
			return nil, err
		}
	}
	boxes := ChooseBoxes(out.Detections, e.opt.maxBoxes(), e.opt.minScore(), !e.opt.NoFill)
	D := e.ident.Width
	f := &Features{
		Regions: make([]float32, len(boxes)*D),
		Global:  make([]float32, D),
		Width:   p.Width, Height: p.Height,
	}
	if untuned {
		f.UntunedRegions = make([]float32, len(boxes)*D)
		f.UntunedGlobal = make([]float32, D)
	}
	off := 0
	for _, mi := range e.maps {
		want := e.info[mi]
		k := slices.IndexFunc(out.Maps, func(m detect.FeatureMap) bool { return m.Name == want.Name })
		if k < 0 {
			return nil, fmt.Errorf("extractor: the detector returned no map %q, which its MapInfo lists", want.Name)
		}
		m := &out.Maps[k]
		if m.C != want.C || m.Stride != want.Stride || m.H <= 0 || m.W <= 0 || len(m.Data) != m.H*m.W*m.C {
			return nil, fmt.Errorf("extractor: detector map %q is %dx%dx%d at stride %d with %d values; its MapInfo says %d channels at stride %d",
				m.Name, m.H, m.W, m.C, m.Stride, len(m.Data), want.C, want.Stride)
		}
		if off+m.C > D {
			return nil, fmt.Errorf("extractor: detector map %q has %d channels, more than its MapInfo says", m.Name, m.C)
		}
		for r, b := range boxes {
			ROIAlign(m, b.Box, f.Regions[r*D+off:r*D+off+m.C])
		}
		meanMap(m, f.Global[off:off+m.C])
		if untuned {
			um := m
			if k := slices.IndexFunc(out.Untuned, func(u detect.FeatureMap) bool { return u.Name == m.Name }); k >= 0 {
				um = &out.Untuned[k]
			}
			for r, b := range boxes {
				if um == m {
					copy(f.UntunedRegions[r*D+off:r*D+off+m.C], f.Regions[r*D+off:r*D+off+m.C])
				} else {
					ROIAlign(um, b.Box, f.UntunedRegions[r*D+off:r*D+off+m.C])
				}
			}
			meanMap(um, f.UntunedGlobal[off:off+m.C])
		}
		off += m.C
	}
	if untuned && len(out.Untuned) == 0 {
		return nil, fmt.Errorf("extractor: the detector's fine-tuned part (%s) gave no untuned maps", e.ident.Tuned)
	}
	if off != D {
		return nil, fmt.Errorf("extractor: the detector's maps have %d channels, its MapInfo %d", off, D)
	}
	sx, sy := float32(p.Width)/S, float32(p.Height)/S
	for _, b := range boxes {
		f.Boxes = append(f.Boxes, [4]float32{b.Box[0] * sx, b.Box[1] * sy, b.Box[2] * sx, b.Box[3] * sy})
		f.Classes = append(f.Classes, b.Class)
		f.Scores = append(f.Scores, b.Score)
	}
	f.Tap = tap
	return f, nil
}

// copyTap returns a copy of the map among taps that is the activation at
// e's cut.
func (e *Extractor) copyTap(taps []detect.FeatureMap) (*Tap, error) {
	c := e.cut
	for i := range taps {
		m := &taps[i]
		if m.Name != c.Node {
			continue
		}
		if m.H <= 0 || m.W <= 0 || m.C <= 0 || len(m.Data) != m.H*m.W*m.C {
			return nil, fmt.Errorf("extractor: taps of cut %s: the detector's tap at %s is %dx%dx%d with %d values", c.Name, c.Node, m.H, m.W, m.C, len(m.Data))
		}
		return &Tap{Cut: c.Name, H: m.H, W: m.W, C: m.C, Data: slices.Clone(m.Data)}, nil
	}
	return nil, fmt.Errorf("extractor: taps of cut %s: the detector returns no tap at %s: load it with WithTaps", c.Name, c.Node)
}

// ChooseBoxes picks the regions of an image from the detections (boxes in
// input pixels): those scoring at least minScore, best first, at most max
// of them, boxes clipped to the input and empty ones dropped. With fill,
// the remaining slots are filled, in this order, with the whole image, the
// four cells of a 2x2 grid and the nine of a 3x3 grid (Class FillWhole or
// FillGrid, Score 0), until max slots are used or the 14 fill boxes are
// spent. An image thus always has at least min(max, 14) regions.
func ChooseBoxes(dets []detect.Detection, max int, minScore float32, fill bool) []detect.Detection {
	const S = float32(detect.InputSize)
	var out []detect.Detection
	sorted := slices.Clone(dets)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Score > sorted[j].Score })
	for _, d := range sorted {
		if len(out) == max {
			break
		}
		if !(d.Score >= minScore) {
			continue
		}
		b := d.Box
		for i := range b {
			b[i] = min(S, b[i])
			if !(b[i] > 0) { // also NaN
				b[i] = 0
			}
		}
		if b[2]-b[0] < 1 || b[3]-b[1] < 1 {
			continue
		}
		d.Box = b
		out = append(out, d)
	}
	if !fill {
		return out
	}
	add := func(b [4]float32, class int) {
		if len(out) < max {
			out = append(out, detect.Detection{Box: b, Class: class})
		}
	}
	add([4]float32{0, 0, S, S}, FillWhole)
	for _, n := range []int{2, 3} {
		c := S / float32(n)
		for gy := range n {
			for gx := range n {
				add([4]float32{float32(gx) * c, float32(gy) * c, float32(gx+1) * c, float32(gy+1) * c}, FillGrid)
			}
		}
	}
	return out
}

// Package synth generates a synthetic image-text world for cross-modal
// retrieval: scenes of coloured shapes rendered to RGB images, region
// proposals over them, region features computed from the rendered pixels,
// five captions per image from a small grammar, and the ground truth that ties
// caption words to regions.
//
// The output is the precomp layout that the data package reads
// ({split}_ims.npy, {split}_caps.txt and their companions; see
// docs/synth.md). Generation is deterministic: the same Config gives
// byte-identical files whatever the number of workers, because every image is
// derived from (seed, image number) alone and files are written in order.
// Memory stays bounded: images are produced in fixed-size chunks by a worker
// pool and streamed to disk.
package synth

import (
	"fmt"
	"math"
	"runtime"
)

// Image geometry. Every synthetic image has the same pixel size; the sizes
// file still lists it per image, as loaders of real data expect.
const (
	ImageWidth  = 160
	ImageHeight = 120
)

// CaptionsPerImage is the number of captions written for every image.
const CaptionsPerImage = 5

// Noun is one way to name a category, singular and plural. A noun may span
// several words ("round shape"); every word of it refers to the object.
type Noun struct {
	Singular string `json:"singular"`
	Plural   string `json:"plural"`
}

// Category is a shape class: its name and the nouns captions use for it.
type Category struct {
	Name  string `json:"name"`
	Nouns []Noun `json:"nouns"`
}

// Colour is an object colour: its name, its RGB value and the adjectives
// captions use for it.
type Colour struct {
	Name  string   `json:"name"`
	RGB   [3]uint8 `json:"rgb"`
	Words []string `json:"words"`
}

// Background is an image background tone.
type Background struct {
	Name string   `json:"name"`
	RGB  [3]uint8 `json:"rgb"`
}

// Category indices into Categories.
const (
	Circle = iota
	Square
	Triangle
	Star
	Cross
	Diamond
	Hexagon
	Ring
	Crescent
	Arrow
)

// Categories are the shape classes, indexed by the constants Circle..Arrow.
var Categories = []Category{
	{"circle", []Noun{{"circle", "circles"}, {"disc", "discs"}, {"round shape", "round shapes"}}},
	{"square", []Noun{{"square", "squares"}, {"box", "boxes"}, {"block", "blocks"}}},
	{"triangle", []Noun{{"triangle", "triangles"}, {"triangular shape", "triangular shapes"}, {"pyramid", "pyramids"}}},
	{"star", []Noun{{"star", "stars"}, {"star shape", "star shapes"}, {"five-pointed star", "five-pointed stars"}}},
	{"cross", []Noun{{"cross", "crosses"}, {"plus sign", "plus signs"}, {"plus", "pluses"}}},
	{"diamond", []Noun{{"diamond", "diamonds"}, {"rhombus", "rhombuses"}, {"lozenge", "lozenges"}}},
	{"hexagon", []Noun{{"hexagon", "hexagons"}, {"six-sided shape", "six-sided shapes"}, {"hex", "hexes"}}},
	{"ring", []Noun{{"ring", "rings"}, {"hoop", "hoops"}, {"donut", "donuts"}}},
	{"crescent", []Noun{{"crescent", "crescents"}, {"moon", "moons"}, {"crescent moon", "crescent moons"}}},
	{"arrow", []Noun{{"arrow", "arrows"}, {"arrowhead", "arrowheads"}, {"pointer", "pointers"}}},
}

// Colours are the object colours; all differ clearly from every background.
var Colours = []Colour{
	{"red", [3]uint8{215, 35, 35}, []string{"red", "crimson", "scarlet"}},
	{"green", [3]uint8{35, 150, 55}, []string{"green", "emerald"}},
	{"blue", [3]uint8{35, 70, 215}, []string{"blue", "azure", "cobalt"}},
	{"yellow", [3]uint8{235, 200, 25}, []string{"yellow", "golden"}},
	{"purple", [3]uint8{125, 45, 165}, []string{"purple", "violet"}},
	{"orange", [3]uint8{240, 125, 20}, []string{"orange", "amber"}},
	{"pink", [3]uint8{240, 90, 170}, []string{"pink", "rose"}},
	{"cyan", [3]uint8{25, 180, 200}, []string{"cyan", "turquoise", "teal"}},
	{"brown", [3]uint8{115, 70, 30}, []string{"brown", "chocolate"}},
	{"black", [3]uint8{28, 28, 30}, []string{"black", "ebony"}},
}

// SizeWords are the adjectives for small (index 0) and large (index 1)
// objects.
var SizeWords = [2][]string{
	{"small", "little", "tiny"},
	{"large", "big", "huge"},
}

// Backgrounds are the light, low-saturation background tones.
var Backgrounds = []Background{
	{"white", [3]uint8{236, 236, 232}},
	{"grey", [3]uint8{202, 202, 200}},
	{"beige", [3]uint8{226, 214, 190}},
	{"cream", [3]uint8{240, 232, 206}},
	{"pale blue", [3]uint8{206, 218, 232}},
	{"pale green", [3]uint8{210, 228, 206}},
}

// Config describes a world. Zero Dim, Regions and Workers select their
// defaults; DefaultConfig returns a complete demo configuration.
type Config struct {
	// N is the total number of distinct images: train + dev + testall.
	N int
	// Seed selects the world; the same seed and settings give the same bytes.
	Seed uint64
	// Dim is the region feature dimension (default 2048).
	Dim int
	// Regions is the number of region slots per image (default 36); images
	// have between 3/4 of it and all of it valid.
	Regions int
	// Noise is the standard deviation of the Gaussian noise added to the
	// projected features before the ReLU (0: none; the command's default is
	// 0.1).
	Noise float64
	// NoImages skips writing PNG files (features are still computed from
	// rendered pixels).
	NoImages bool
	// Workers is the number of goroutines generating images (default
	// runtime.NumCPU()); it never changes the output.
	Workers int
	// Dev and Test override the number of dev and testall images (0: 20% of
	// N each, at most 5000). The test split is the first min(1000, Test)
	// images of testall.
	Dev, Test int
	// Progress shows progress bars (the progress package) while writing.
	Progress bool
}

// DefaultConfig returns a demo-size world of 2000 images.
func DefaultConfig() Config {
	return Config{N: 2000, Seed: 1, Dim: 2048, Regions: 36, Noise: 0.1}
}

// Limits on Config values.
const (
	MinRegions = 6 // at least one slot per object of the busiest scene
	MaxRegions = 256
	MaxImages  = 9_999_999 // image ids have seven digits
	MaxDim     = 1 << 16
)

// normalized returns c with defaults filled in, or an error for a value out
// of range.
func (c Config) normalized() (Config, error) {
	if c.Dim == 0 {
		c.Dim = 2048
	}
	if c.Regions == 0 {
		c.Regions = 36
	}
	if c.Workers <= 0 {
		c.Workers = runtime.NumCPU()
	}
	switch {
	case c.N < 3 || c.N > MaxImages:
		return c, fmt.Errorf("synth: %d images: need 3 to %d", c.N, MaxImages)
	case c.Dim < 1 || c.Dim > MaxDim:
		return c, fmt.Errorf("synth: feature dimension %d: need 1 to %d", c.Dim, MaxDim)
	case c.Regions < MinRegions || c.Regions > MaxRegions:
		return c, fmt.Errorf("synth: %d regions: need %d to %d", c.Regions, MinRegions, MaxRegions)
	case c.Noise < 0 || math.IsNaN(c.Noise) || math.IsInf(c.Noise, 0):
		return c, fmt.Errorf("synth: noise %v: need a finite value >= 0", c.Noise)
	case c.Dev < 0 || c.Test < 0:
		return c, fmt.Errorf("synth: negative split size (dev %d, test %d)", c.Dev, c.Test)
	}
	return c, nil
}

// Split is a contiguous range of images. Images are numbered globally
// (testall first, then dev, then train), and image g has id IDOf(g).
type Split struct {
	// Name is train, dev, test or testall.
	Name string `json:"name"`
	// Start is the global number of the split's first image.
	Start int `json:"start"`
	// Len is the number of images.
	Len int `json:"images"`
	// Of names the split this one is a prefix of ("testall" for test).
	Of string `json:"of,omitempty"`
}

// IDOf returns the id of global image g, e.g. "synth-0000123".
func IDOf(g int) string { return fmt.Sprintf("synth-%07d", g) }

// Allocate splits n images into testall, dev and train, with dev and test
// overriding the automatic sizes when positive. Automatic sizes are 20% of n
// (rounded) for each of dev and testall, capped at 5000 and at least 1; train
// gets the rest and must not be empty. The test split is the first
// min(1000, testall) images of testall, as COCO's 1K test set is the first
// fold of its 5K set. The returned order is the writing order: testall, test,
// dev, train.
func Allocate(n, dev, test int) ([]Split, error) {
	auto := func(v int) int {
		if v > 0 {
			return v
		}
		a := (n + 2) / 5
		return max(1, min(5000, a))
	}
	nt, nd := auto(test), auto(dev)
	ntr := n - nt - nd
	if ntr < 1 {
		return nil, fmt.Errorf("synth: %d images leave no training images (testall %d, dev %d)", n, nt, nd)
	}
	return []Split{
		{Name: "testall", Start: 0, Len: nt},
		{Name: "test", Start: 0, Len: min(1000, nt), Of: "testall"},
		{Name: "dev", Start: nt, Len: nd},
		{Name: "train", Start: nt + nd, Len: ntr},
	}, nil
}

package data

import (
	"fmt"
	"strconv"

	"github.com/xmr-project/xmr/npy"
)

// DefaultCapsPerImage is the number of captions per image in COCO, Flickr30k
// and every format read here: image i owns captions 5i..5i+4.
const DefaultCapsPerImage = 5

// Regions holds the visual features of N images, R region slots of D float32
// features each, in one flat row-major array: feature d of region r of image
// i is Feat[(i*R+r)*D+d]. Global (whole-image) features are stored with R = 1.
//
// Images may have fewer valid regions than R: Count[i] says how many; the
// slots from Count[i] to R-1 are padding, zero in the files this package
// writes, and must be masked by their users. A nil Count means every slot is
// valid; loaders always set it.
//
// Feat may point into a memory-mapped file (Mapped reports it). Mapped
// memory is private copy-on-write: writing to Feat changes this process's
// copy only, never the file. Close releases the mapping; Feat must not be
// used after Close, and the file must not be truncated while mapped.
type Regions struct {
	N, R, D int
	// Feat is N*R*D features, row-major (image, region, feature).
	Feat []float32
	// Boxes is N*R*4 region boxes x1, y1, x2, y2 normalised by the image
	// width and height to [0, 1], zero for padded slots; nil if unknown.
	Boxes []float32
	// Count is the number of valid regions of each image (length N); nil
	// means R for every image.
	Count []int

	m *npy.Array // the mapped array Feat points into, owned by this value
}

// Len returns the number of images, N.
func (g *Regions) Len() int { return g.N }

// Dims returns the number of region slots R and the feature width D.
func (g *Regions) Dims() (regions, dim int) { return g.R, g.D }

// Image returns the R*D features of image i (a sub-slice of Feat).
func (g *Regions) Image(i int) []float32 {
	n := g.R * g.D
	return g.Feat[i*n : (i+1)*n : (i+1)*n]
}

// Region returns the D features of region slot r of image i.
func (g *Regions) Region(i, r int) []float32 {
	o := (i*g.R + r) * g.D
	return g.Feat[o : o+g.D : o+g.D]
}

// NumRegions returns the number of valid regions of image i.
func (g *Regions) NumRegions(i int) int {
	if g.Count == nil {
		return g.R
	}
	return g.Count[i]
}

// Box5 returns the 5-d spatial code of region slot r of image i used by
// TERAN: [x1, y1, x2, y2, area] in normalised coordinates, area =
// (x2-x1)*(y2-y1). It is all zero when the boxes are unknown and for padded
// slots.
func (g *Regions) Box5(i, r int) [5]float32 {
	if g.Boxes == nil || r >= g.NumRegions(i) {
		return [5]float32{}
	}
	b := g.Boxes[(i*g.R+r)*4:]
	return [5]float32{b[0], b[1], b[2], b[3], (b[2] - b[0]) * (b[3] - b[1])}
}

// Mapped reports whether Feat points into a memory-mapped file.
func (g *Regions) Mapped() bool { return g.m != nil }

// Close releases the memory mapping behind Feat, if this value owns one, and
// clears Feat. It is safe to call more than once and on values that own no
// mapping (Close then does nothing); views made by Slice never own one.
func (g *Regions) Close() error {
	if g == nil || g.m == nil {
		return nil
	}
	err := g.m.Close()
	g.m = nil
	g.Feat = nil
	return err
}

// Slice returns a view of images lo..hi-1 that shares memory with g (for
// example one 1K fold of the COCO 5K test set). The view does not own g's
// mapping: close g, not the view, and only when no view is in use.
func (g *Regions) Slice(lo, hi int) *Regions {
	v := &Regions{N: hi - lo, R: g.R, D: g.D}
	n := g.R * g.D
	v.Feat = g.Feat[lo*n : hi*n : hi*n]
	if g.Boxes != nil {
		v.Boxes = g.Boxes[lo*g.R*4 : hi*g.R*4 : hi*g.R*4]
	}
	if g.Count != nil {
		v.Count = g.Count[lo:hi:hi]
	}
	return v
}

// Validate checks that the lengths of Feat, Boxes and Count agree with N, R
// and D and that every count lies in [0, R].
func (g *Regions) Validate() error {
	if g.N < 0 || g.R < 0 || g.D < 0 {
		return fmt.Errorf("regions: negative shape (%d,%d,%d)", g.N, g.R, g.D)
	}
	if len(g.Feat) != g.N*g.R*g.D {
		return fmt.Errorf("regions: %d features, shape (%d,%d,%d) needs %d", len(g.Feat), g.N, g.R, g.D, g.N*g.R*g.D)
	}
	if g.Boxes != nil && len(g.Boxes) != g.N*g.R*4 {
		return fmt.Errorf("regions: %d box coordinates, %d images x %d regions need %d", len(g.Boxes), g.N, g.R, g.N*g.R*4)
	}
	if g.Count != nil {
		if len(g.Count) != g.N {
			return fmt.Errorf("regions: %d region counts for %d images", len(g.Count), g.N)
		}
		for i, c := range g.Count {
			if c < 0 || c > g.R {
				return fmt.Errorf("regions: image %d has %d valid regions, outside [0,%d]", i, c, g.R)
			}
		}
	}
	return nil
}

// Split is one split (train, dev, test, ...) of an image-text dataset:
// N images and CapsPerImage*N captions, image i owning captions
// i*CapsPerImage .. (i+1)*CapsPerImage-1.
type Split struct {
	// Name is the split name, e.g. "test"; it names the precomp files.
	Name string
	// Images holds the visual features.
	Images *Regions
	// Global is true when Images holds one whole-image feature vector per
	// image (Images.R == 1, no boxes) rather than region features.
	Global bool
	// Captions holds the captions, CapsPerImage consecutive per image.
	Captions []string
	// CapsPerImage is the number of captions per image, normally 5.
	CapsPerImage int
	// ImageIDs holds an id per image (COCO id, Flickr file name, ...); nil
	// if unknown, in which case ID returns the image's index.
	ImageIDs []string
	// Sizes holds the width and height in pixels of each image; nil if
	// unknown.
	Sizes [][2]float32
}

// NumImages returns the number of images.
func (s *Split) NumImages() int {
	if s.Images == nil {
		return 0
	}
	return s.Images.N
}

// NumCaptions returns the number of captions.
func (s *Split) NumCaptions() int { return len(s.Captions) }

// ImageOf returns the index of the image that caption c describes.
func (s *Split) ImageOf(c int) int { return c / s.CapsPerImage }

// CaptionsOf returns the captions of image i.
func (s *Split) CaptionsOf(i int) []string {
	k := s.CapsPerImage
	return s.Captions[i*k : (i+1)*k : (i+1)*k]
}

// ID returns the id of image i: ImageIDs[i], or the decimal index i when the
// ids are unknown.
func (s *Split) ID(i int) string {
	if s.ImageIDs == nil {
		return strconv.Itoa(i)
	}
	return s.ImageIDs[i]
}

// Slice returns a view of images lo..hi-1 and their captions sharing memory
// with s, e.g. fold k of the COCO 1K protocol is s.Slice(1000*k, 1000*(k+1)).
// The view must not be closed; close s when done with every view.
func (s *Split) Slice(lo, hi int) *Split {
	k := s.CapsPerImage
	v := &Split{
		Name:         s.Name,
		Images:       s.Images.Slice(lo, hi),
		Global:       s.Global,
		Captions:     s.Captions[lo*k : hi*k : hi*k],
		CapsPerImage: k,
	}
	if s.ImageIDs != nil {
		v.ImageIDs = s.ImageIDs[lo:hi:hi]
	}
	if s.Sizes != nil {
		v.Sizes = s.Sizes[lo:hi:hi]
	}
	return v
}

// Validate checks that the parts of s agree: feature, box and count lengths,
// CapsPerImage*N captions, one id and size per image when present, and no
// boxes or several regions for global features.
func (s *Split) Validate() error {
	if s.Images == nil {
		return fmt.Errorf("split %q: no images", s.Name)
	}
	if err := s.Images.Validate(); err != nil {
		return fmt.Errorf("split %q: %w", s.Name, err)
	}
	n := s.Images.N
	if s.CapsPerImage <= 0 {
		return fmt.Errorf("split %q: CapsPerImage is %d", s.Name, s.CapsPerImage)
	}
	if len(s.Captions) != n*s.CapsPerImage {
		return fmt.Errorf("split %q: %d images need %d captions, have %d", s.Name, n, n*s.CapsPerImage, len(s.Captions))
	}
	if s.ImageIDs != nil && len(s.ImageIDs) != n {
		return fmt.Errorf("split %q: %d image ids for %d images", s.Name, len(s.ImageIDs), n)
	}
	if s.Sizes != nil && len(s.Sizes) != n {
		return fmt.Errorf("split %q: %d image sizes for %d images", s.Name, len(s.Sizes), n)
	}
	if s.Global && (s.Images.R != 1 || s.Images.Boxes != nil) {
		return fmt.Errorf("split %q: global features need R = 1 and no boxes, have R = %d", s.Name, s.Images.R)
	}
	return nil
}

// Close releases the memory mapping behind the features, if any.
func (s *Split) Close() error {
	if s == nil {
		return nil
	}
	return s.Images.Close()
}

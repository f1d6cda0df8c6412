package train

import (
	"fmt"
	"math/rand/v2"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/extract"
)

// viewPool is what training.augment-draw trains from: the training
// split's photos, each with its augmented copies (ids ID~aug1, ID~aug2,
// ... of photo ID, made by xmr extract --augment), which a step draws in
// place of the photo.
type viewPool struct {
	// caps are the captions of the photos, in the split's order: an
	// epoch goes over these, not over the copies' (their duplicates).
	caps []int
	// copies[i] are photo i's copies; nil for a photo without any and
	// for a copy.
	copies [][]int
	// p is the chance that a step sees one of a photo's copies.
	p float64
}

// newViewPool finds the copies of s's photos by their ids. It refuses a
// split without copies, and a copy whose photo is not in the split.
func newViewPool(s *data.Split, p float64) (*viewPool, error) {
	n := s.NumImages()
	if s.ImageIDs == nil {
		return nil, fmt.Errorf("training.augment-draw: the train split has no image ids; it needs the augmented copies that xmr extract --augment writes (ids ending in %sN)", extract.AugmentSuffix)
	}
	index := make(map[string]int, n)
	for i := 0; i < n; i++ {
		index[s.ID(i)] = i
	}
	pool := &viewPool{copies: make([][]int, n), p: p}
	isCopy := make([]bool, n)
	nCopies := 0
	for i := 0; i < n; i++ {
		photo, ok := extract.CopyOf(s.ID(i))
		if !ok {
			continue
		}
		j, found := index[photo]
		if !found {
			return nil, fmt.Errorf("training.augment-draw: image %q of the train split is an augmented copy of %q, which the split lacks", s.ID(i), photo)
		}
		pool.copies[j] = append(pool.copies[j], i)
		isCopy[i] = true
		nCopies++
	}
	if nCopies == 0 {
		return nil, fmt.Errorf("training.augment-draw: the train split's %d images have no augmented copies (ids ending in %sN); extract it with xmr extract --augment N", n, extract.AugmentSuffix)
	}
	for c := 0; c < s.NumCaptions(); c++ {
		if !isCopy[s.ImageOf(c)] {
			pool.caps = append(pool.caps, c)
		}
	}
	return pool, nil
}

// images returns the image each caption of caps shows at a step, drawn
// from rng: with probability p one of its photo's copies, chosen
// uniformly, else the photo; and the photos themselves, which the loss
// groups captions by.
func (v *viewPool) images(s *data.Split, caps []int, rng *rand.Rand) (images, photos []int) {
	images, photos = make([]int, len(caps)), make([]int, len(caps))
	for k, c := range caps {
		i := s.ImageOf(c)
		images[k], photos[k] = i, i
		if cs := v.copies[i]; len(cs) > 0 && rng.Float64() < v.p {
			images[k] = cs[rng.IntN(len(cs))]
		}
	}
	return images, photos
}

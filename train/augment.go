package train

import (
	"math/rand/v2"
	"strings"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/tensor"
)

// trainBatch is BatchOf for the training step iter, with the config's
// batch-level regularisation applied: views (non-nil with
// training.augment-draw) puts one of a photo's augmented copies in place of
// the photo, training.word-drop drops words of the captions before they
// are tokenised, training.region-drop masks regions of the images
// (Images.Valid). All are drawn from the seed and the iteration alone, so
// a resumed run sees the same batches.
func trainBatch(m model.Model, s *data.Split, caps []int, tc TrainingConfig, iter int, views *viewPool) Batch {
	if tc.WordDrop == 0 && tc.RegionDrop == 0 && views == nil {
		return BatchOf(m, s, caps)
	}
	// The streams of the step: "drop" and "view" in ASCII keep them apart
	// from each other, the epoch orders' (EpochOrder) and the tape's
	// dropout's.
	rng := rand.New(rand.NewPCG(tc.Seed, 0x64726f70^uint64(iter)))
	var images, photos []int
	if views != nil {
		images, photos = views.images(s, caps, rand.New(rand.NewPCG(tc.Seed, 0x76696577^uint64(iter))))
	}
	var edit func(string) string
	if tc.WordDrop > 0 {
		edit = func(c string) string { return dropWords(rng, c, tc.WordDrop) }
	}
	b := batchOf(m, s, caps, images, edit)
	b.Photos = photos
	dropRegions(rng, b.Images.Valid, tc.RegionDrop)
	return b
}

// dropWords drops each space-separated word of caption with probability
// p, keeping at least one word (a random one when all were drawn).
func dropWords(rng *rand.Rand, caption string, p float64) string {
	if p <= 0 {
		return caption
	}
	words := strings.Fields(caption)
	kept := words[:0:0]
	for _, w := range words {
		if rng.Float64() >= p {
			kept = append(kept, w)
		}
	}
	if len(kept) == 0 && len(words) > 0 {
		kept = append(kept, words[rng.IntN(len(words))])
	}
	return strings.Join(kept, " ")
}

// dropRegions sets to 0 each real region of valid (B, R) with
// probability p, keeping at least one region of each image (a random
// one of its real regions when all were drawn).
func dropRegions(rng *rand.Rand, valid *tensor.Tensor, p float64) {
	if p <= 0 || valid == nil {
		return
	}
	b, r := valid.Shape[0], valid.Shape[1]
	present := make([]int, 0, r) // the slots of a row's real regions
	for i := 0; i < b; i++ {
		row := valid.Data[i*r : (i+1)*r]
		present = present[:0]
		kept := 0
		for j, v := range row {
			if v == 0 {
				continue
			}
			present = append(present, j)
			if rng.Float64() < p {
				row[j] = 0
			} else {
				kept++
			}
		}
		if kept == 0 && len(present) > 0 {
			row[present[rng.IntN(len(present))]] = 1 // every one was drawn: one comes back
		}
	}
}

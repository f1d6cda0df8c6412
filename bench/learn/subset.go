package learn

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"

	"github.com/xmr-project/xmr/data"
)

// pickImages returns n of the indices 0..total-1, in increasing order,
// drawn without replacement by a generator seeded with seed: the same
// arguments always give the same images.
func pickImages(n, total int, seed uint64) []int {
	idx := rand.New(rand.NewPCG(seed, 0x7375627365)).Perm(total)[:n]
	slices.Sort(idx)
	return idx
}

// subsetSplit returns a copy of the images idx of s (in that order) with
// all their captions, ids, sizes, boxes and region counts.
func subsetSplit(s *data.Split, idx []int) *data.Split {
	g, k := s.Images, s.CapsPerImage
	img := &data.Regions{N: len(idx), R: g.R, D: g.D, Feat: make([]float32, 0, len(idx)*g.R*g.D)}
	out := &data.Split{Name: s.Name, Images: img, Global: s.Global, CapsPerImage: k, Captions: make([]string, 0, len(idx)*k)}
	if g.Boxes != nil {
		img.Boxes = make([]float32, 0, len(idx)*g.R*4)
	}
	if g.Count != nil {
		img.Count = make([]int, 0, len(idx))
	}
	if s.ImageIDs != nil {
		out.ImageIDs = make([]string, 0, len(idx))
	}
	if s.Sizes != nil {
		out.Sizes = make([][2]float32, 0, len(idx))
	}
	for _, i := range idx {
		img.Feat = append(img.Feat, g.Image(i)...)
		if g.Boxes != nil {
			img.Boxes = append(img.Boxes, g.Boxes[i*g.R*4:(i+1)*g.R*4]...)
		}
		if g.Count != nil {
			img.Count = append(img.Count, g.Count[i])
		}
		out.Captions = append(out.Captions, s.CaptionsOf(i)...)
		if s.ImageIDs != nil {
			out.ImageIDs = append(out.ImageIDs, s.ImageIDs[i])
		}
		if s.Sizes != nil {
			out.Sizes = append(out.Sizes, s.Sizes[i])
		}
	}
	return out
}

// writeSubset writes a precomp copy of src to a new temporary directory in
// which the train split holds only n of its images (pickImages with seed),
// each with all its captions, and the dev and test splits are src's
// unchanged. It returns the directory, which the caller removes, and the
// number of train images of src. n must lie in 1..that number.
func writeSubset(ctx context.Context, src data.Source, n int, seed uint64) (dir string, total int, err error) {
	tr, err := src.Load(ctx, "train")
	if err != nil {
		return "", 0, fmt.Errorf("learn: %w", err)
	}
	defer tr.Close()
	total = tr.NumImages()
	if n < 1 || n > total {
		return "", total, fmt.Errorf("learn: train-images=%d: want 1 to %d, the number of train images in %s", n, total, src.Path)
	}
	dir, err = os.MkdirTemp("", "xmr-learn-data-*")
	if err != nil {
		return "", total, fmt.Errorf("learn: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
			dir = ""
		}
	}()
	idx := pickImages(n, total, seed)
	if err := data.WritePrecomp(ctx, dir, subsetSplit(tr, idx)); err != nil {
		return "", total, fmt.Errorf("learn: %w", err)
	}
	for _, name := range []string{"dev", "test"} {
		s, err := src.Load(ctx, name)
		if err != nil {
			return "", total, fmt.Errorf("learn: %w", err)
		}
		err = data.WritePrecomp(ctx, dir, s)
		s.Close()
		if err != nil {
			return "", total, fmt.Errorf("learn: %w", err)
		}
	}
	slog.Info("learn: training on a subset of the train split", "images", n, "of", total, "seed", seed, "dir", dir)
	return dir, total, nil
}

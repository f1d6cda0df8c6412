package extract

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/progress"
)

// Collect extracts the images of items in memory, workers at a time (0:
// 2), with a progress bar when showProgress. It returns the features of
// the images it could read, in order, with their items, and the ones it
// skipped. Errors of the detector, and ctx's, stop it.
func Collect(ctx context.Context, e *Extractor, items []Item, workers int, lim Limits, showProgress bool) ([]*Features, []Item, []Skip, error) {
	workers = cmpOr(workers, 2)
	var bar *progress.Bar
	if showProgress {
		bar = progress.New("extract", int64(len(items)), "images")
	}
	defer bar.Finish()
	feats, errs, err := extractEach(ctx, e, items, workers, lim, bar)
	if err != nil {
		return nil, nil, nil, err
	}
	var out []*Features
	var kept []Item
	var skips []Skip
	for i, f := range feats {
		if f == nil {
			skips = append(skips, Skip{Path: items[i].Path, Err: errs[i]})
			continue
		}
		out = append(out, f)
		kept = append(kept, items[i])
	}
	return out, kept, skips, nil
}

// Pack puts the features of images into a data.Regions of r slots of
// width d, with boxes normalised by each image's size.
func Pack(fs []*Features, r, d int) *data.Regions {
	n := len(fs)
	g := &data.Regions{N: n, R: r, D: d, Feat: make([]float32, n*r*d), Boxes: make([]float32, n*r*4), Count: make([]int, n)}
	for i, f := range fs {
		k := min(len(f.Boxes), r)
		copy(g.Feat[i*r*d:], f.Regions[:k*d])
		g.Count[i] = k
		w, h := float32(f.Width), float32(f.Height)
		for j, b := range f.Boxes[:k] {
			o := (i*r + j) * 4
			g.Boxes[o], g.Boxes[o+1], g.Boxes[o+2], g.Boxes[o+3] = b[0]/w, b[1]/h, b[2]/w, b[3]/h
		}
	}
	return g
}

// PackGlobal puts the global vectors of images into a data.Regions with
// one slot each.
func PackGlobal(fs []*Features, d int) *data.Regions {
	n := len(fs)
	g := &data.Regions{N: n, R: 1, D: d, Feat: make([]float32, n*d), Count: make([]int, n)}
	for i, f := range fs {
		copy(g.Feat[i*d:], f.Global)
		g.Count[i] = 1
	}
	return g
}

// extractEach loads and extracts every item with workers goroutines
// (their features in order, nil for an image it could not read or that
// has no region, whose reason is in skipped). An unreadable image, and
// one without a region (Options.NoFill, nothing detected), is logged and
// skipped; the
// first error of the detector stops the others and is returned, as is
// ctx's error once it is cancelled. bar, if not nil, counts the images.
func extractEach(ctx context.Context, e *Extractor, items []Item, workers int, lim Limits, bar *progress.Bar) (feats []*Features, skipped []string, err error) {
	feats = make([]*Features, len(items))
	skipped = make([]string, len(items))
	run, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				pic, err := LoadFileContext(run, items[i].Path, lim)
				if err != nil && run.Err() != nil {
					continue // stopped (Ctrl-C, or another worker's error): nothing is recorded of this image
				}
				if err != nil {
					slog.Warn("extract: skipping an unreadable image", "file", items[i].Path, "err", err)
					skipped[i] = err.Error()
					bar.Add(1)
					continue
				}
				if items[i].Mirror {
					pic.Mirror()
				}
				if items[i].Augment != 0 {
					pic.Augment(items[i].Augment)
				}
				f, err := e.Run(run, pic)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("extract %s: %w", items[i].Path, err)
					}
					mu.Unlock()
					cancel()
					continue
				}
				if len(f.Boxes) == 0 {
					// Options.NoFill with nothing detected: an image
					// without a region has no vector, and would score 0
					// against every caption.
					err := fmt.Errorf("extract %s: no region: nothing was detected at the minimum score, and the slots are not filled: an image without a region has no vector to search or train on", items[i].Path)
					slog.Warn("extract: skipping an image without regions", "file", items[i].Path)
					skipped[i] = err.Error()
					bar.Add(1)
					continue
				}
				feats[i] = f
				bar.Add(1)
			}
		}()
	}
feed:
	for i := range items {
		select {
		case jobs <- i:
		case <-run.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("extract: %w", err)
	}
	if firstErr != nil {
		return nil, nil, firstErr
	}
	return feats, skipped, nil
}

// Package spice is `xmr bench spice`: the SPICE relevance of package
// eval/spice (imported here under the same name) over 25,000 synthetic
// COCO-like captions x 5,000 images, parsing and scoring, pair by pair and
// row by row.
package spice

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/eval/evaltest"
	"github.com/xmr-project/xmr/eval/spice"
)

// Benchmark is `xmr bench spice`.
var Benchmark = bench.Benchmark{
	Name:    "spice",
	Summary: "SPICE relevance: parse 25,000 synthetic COCO-like captions and score all 125M caption-image pairs",
	Run:     run,
}

// run times PrepareScorer (parsing and indexing every caption) and the
// score of every caption against every image, once pair by pair through
// Score and once row by row through ScoreRows, on all cores.
func run(ctx context.Context, opts bench.Options) error {
	nImg, per := 5000, 5
	if opts.Quick {
		nImg = 500
	}
	caps := evaltest.SceneCaptions(nImg, per, 1)
	nCap := len(caps)
	shape := fmt.Sprintf("%d captions x %d images", nCap, nImg)
	note := fmt.Sprintf("%s, %d threads", shape, runtime.GOMAXPROCS(0))
	m, err := spice.New()
	if err != nil {
		return err
	}
	t0 := time.Now()
	s, err := m.PrepareScorer(ctx, caps, per)
	if err != nil {
		return err
	}
	prep := time.Since(t0).Seconds()
	opts.Emit(bench.Result{Name: "spice", Metric: "prepare (parse+index)", Value: prep, Unit: "s", Note: note})
	opts.Emit(bench.Result{Name: "spice", Metric: "parse rate", Value: float64(nCap) / prep, Unit: "captions/s", Note: note})

	pairs := float64(nCap) * float64(nImg)
	// Pair by pair.
	t1 := time.Now()
	sumPairs, err := scoreAll(ctx, s, false)
	if err != nil {
		return err
	}
	secPairs := time.Since(t1).Seconds()
	opts.Emit(bench.Result{Name: "spice", Metric: "Score pairs/s", Value: pairs / secPairs, Unit: "pairs/s", Note: note})
	opts.Emit(bench.Result{Name: "spice", Metric: "Score all pairs", Value: secPairs, Unit: "s", Note: note})
	// Row by row.
	t2 := time.Now()
	sumRows, err := scoreAll(ctx, s, true)
	if err != nil {
		return err
	}
	secRows := time.Since(t2).Seconds()
	if sumRows != sumPairs {
		return fmt.Errorf("spice: ScoreRows and Score disagree: checksums %v and %v", sumRows, sumPairs)
	}
	opts.Emit(bench.Result{Name: "spice", Metric: "ScoreRows pairs/s", Value: pairs / secRows, Unit: "pairs/s", Note: note})
	opts.Emit(bench.Result{Name: "spice", Metric: "ScoreRows all pairs", Value: secRows, Unit: "s", Note: note})
	opts.Emit(bench.Result{Name: "spice", Metric: "total (prepare+ScoreRows)", Value: prep + secRows, Unit: "s", Note: note})
	return nil
}

// scoreAll computes every score, in parallel over rows, and returns the sum
// of the scores (as float64 of float32 values summed in row order, so that
// both paths give bit-identical sums).
func scoreAll(ctx context.Context, s *spice.Scorer, rows bool) (float64, error) {
	nCap, nImg := s.NumCaptions(), s.NumImages()
	const chunk = 64
	sums := make([]float64, (nCap+chunk-1)/chunk)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]float32, chunk*nImg)
			for ctx.Err() == nil {
				k := int(next.Add(1) - 1)
				if k >= len(sums) {
					return
				}
				i0, i1 := k*chunk, min((k+1)*chunk, nCap)
				out := buf[:(i1-i0)*nImg]
				if rows {
					if s.ScoreRows(ctx, i0, i1, out) != nil {
						return // ctx's error, returned after Wait
					}
				} else {
					for i := i0; i < i1; i++ {
						row := out[(i-i0)*nImg : (i-i0+1)*nImg]
						for j := range row {
							row[j] = s.Score(i, j)
						}
					}
				}
				var sum float64
				for _, x := range out {
					sum += float64(x)
				}
				sums[k] = sum
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var total float64
	for _, x := range sums {
		total += x
	}
	return total, nil
}

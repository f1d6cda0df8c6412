package eval

import (
	"context"
	"fmt"
	"runtime"
	"sync"
)

// RelevanceMatrices computes, in memory, the caption x image relevance
// matrix of every registered metric (ROUGE-L, and SPICE when its package is
// linked in) for a collection of perImage consecutive captions per image.
// It is meant for validation and test splits (a 25,000 x 5,000 matrix takes
// 500 MB); ComputeRelevance writes larger ones to disk, resumably.
func RelevanceMatrices(ctx context.Context, captions []string, perImage int) ([]Relevance, error) {
	if perImage <= 0 || len(captions)%perImage != 0 {
		return nil, fmt.Errorf("relevance: %d captions are not groups of %d per image", len(captions), perImage)
	}
	nCap, nImg := len(captions), len(captions)/perImage
	var out []Relevance
	for _, name := range MetricNames() {
		mt, err := LookupMetric(name)
		if err != nil {
			return nil, err
		}
		sc, err := mt.Prepare(ctx, captions, perImage)
		if err != nil {
			return nil, fmt.Errorf("relevance %s: %w", name, err)
		}
		m := NewMatrix(nCap, nImg)
		workers := runtime.GOMAXPROCS(0)
		var wg sync.WaitGroup
		chunk := (nCap + workers - 1) / workers
		for lo := 0; lo < nCap; lo += chunk {
			hi := min(lo+chunk, nCap)
			wg.Add(1)
			go func(lo, hi int) {
				defer wg.Done()
				if rs, ok := sc.(RowScorer); ok {
					// An error is ctx's, checked after Wait.
					_ = rs.ScoreRows(ctx, lo, hi, m.Data[lo*nImg:hi*nImg])
					return
				}
				for i := lo; i < hi; i++ {
					if ctx.Err() != nil {
						return
					}
					row := m.Row(i)
					for j := range row {
						row[j] = sc.Score(i, j)
					}
				}
			}(lo, hi)
		}
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out = append(out, Relevance{Name: name, Matrix: m})
	}
	return out, nil
}

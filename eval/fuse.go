package eval

import (
	"fmt"
	"math"
)

// Fused is the similarity of a fusion of models (Fuse), one matrix per
// direction: each query's scores are standardised over what it ranks, so
// an image's row and a caption's column of the fused scores come from
// different standardisations.
type Fused struct {
	// ByImage (images x captions) ranks the captions for each image: each
	// model's row standardised over the captions, then weighted and summed.
	ByImage *Matrix
	// ByCaption (images x captions) ranks the images for each caption:
	// each model's column standardised over the images, then weighted and
	// summed.
	ByCaption *Matrix
}

// Fuse combines the similarity matrices (images x captions, one per model,
// of the same split) of models that score differently: a region model and
// a global-vector model, say, whose scores have different scales. For
// each query, each model's scores over the split are standardised (their
// mean subtracted, divided by their deviation) and the standardised scores
// are summed with the models' weights. Package index fuses a search the
// same way (index.Fusion), with each query's mean and deviation taken
// over a sample of the collection.
func Fuse(sims []*Matrix, weights []float32) (*Fused, error) {
	if len(sims) == 0 || len(sims) != len(weights) {
		return nil, fmt.Errorf("fuse: %d matrices and %d weights: want one weight a matrix, at least one", len(sims), len(weights))
	}
	rows, cols := sims[0].Rows, sims[0].Cols
	for k, s := range sims {
		if err := s.check(fmt.Sprintf("fuse: matrix %d", k+1)); err != nil {
			return nil, err
		}
		if s.Rows != rows || s.Cols != cols {
			return nil, fmt.Errorf("fuse: matrix %d is %d x %d, matrix 1 %d x %d: want the same split", k+1, s.Rows, s.Cols, rows, cols)
		}
		if w := weights[k]; !(w > 0) || math.IsInf(float64(w), 0) {
			return nil, fmt.Errorf("fuse: weight %d is %v: want a finite number > 0", k+1, w)
		}
	}
	out := &Fused{ByImage: NewMatrix(rows, cols), ByCaption: NewMatrix(rows, cols)}
	col := make([]float32, rows)
	for k, s := range sims {
		w := float64(weights[k])
		for i := 0; i < rows; i++ {
			addStandardised(out.ByImage.Row(i), s.Row(i), w)
		}
		for j := 0; j < cols; j++ {
			for i := range col {
				col[i] = s.Data[i*cols+j]
			}
			mean, inv := standardiser(col)
			for i, x := range col {
				out.ByCaption.Data[i*cols+j] += float32(w * (float64(x) - mean) * inv)
			}
		}
	}
	return out, nil
}

// addStandardised adds w times the standardised x to dst.
func addStandardised(dst, x []float32, w float64) {
	mean, inv := standardiser(x)
	for i, v := range x {
		dst[i] += float32(w * (float64(v) - mean) * inv)
	}
}

// standardiser returns the mean of x and the inverse of its standard
// deviation (1 when x is constant: its scores then add nothing).
func standardiser(x []float32) (mean, inv float64) {
	if len(x) == 0 {
		return 0, 1
	}
	var s, ss float64
	for _, v := range x {
		s += float64(v)
	}
	mean = s / float64(len(x))
	for _, v := range x {
		d := float64(v) - mean
		ss += d * d
	}
	sd := math.Sqrt(ss / float64(len(x)))
	if sd == 0 || math.IsNaN(sd) {
		return mean, 1
	}
	return mean, 1 / sd
}

// EvaluateFused evaluates a fusion (Fuse) as Evaluate evaluates one
// matrix: the image-to-text ranks and NDCG from f.ByImage's rows, the
// text-to-image ones from f.ByCaption's columns.
func EvaluateFused(f *Fused, opts Options) (*Report, error) {
	if f == nil || f.ByImage == nil || f.ByCaption == nil {
		return nil, fmt.Errorf("evaluate: no fused matrices")
	}
	if err := f.ByCaption.check("fused similarity by caption"); err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	if f.ByCaption.Rows != f.ByImage.Rows || f.ByCaption.Cols != f.ByImage.Cols {
		return nil, fmt.Errorf("evaluate: fused matrices of %d x %d and %d x %d: want the same shape", f.ByImage.Rows, f.ByImage.Cols, f.ByCaption.Rows, f.ByCaption.Cols)
	}
	if i, ok := firstNonFinite(f.ByCaption.Data); ok {
		return nil, fmt.Errorf("evaluate: fused similarity by caption has %v at [%d, %d]: want finite similarities", f.ByCaption.Data[i], i/f.ByCaption.Cols, i%f.ByCaption.Cols)
	}
	return evaluate(f.ByImage, f.ByCaption, opts)
}

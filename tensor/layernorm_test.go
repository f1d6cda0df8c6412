package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestLayerNormValues compares LayerNorm's forward with a float64 reference
// for row lengths around the kernels' lane counts, a row whose mean is
// exactly 0 and a constant row.
func TestLayerNormValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	rows := [][]float32{{1, -1, 2, -2}, {3, 3, 3, 3, 3}}
	for _, d := range []int{1, 3, 8, 9, 17, 768, 2048} {
		row := make([]float32, d)
		for i := range row {
			row[i] = float32(rng.NormFloat64()*2 + 5)
		}
		rows = append(rows, row)
	}
	const eps = 1e-5
	for _, row := range rows {
		d := len(row)
		gamma, beta := RandN(rng, d), RandN(rng, d)
		out := (*Tape)(nil).LayerNorm(FromData(row, 1, d), gamma, beta, eps)
		var mean, vr float64
		for _, v := range row {
			mean += float64(v)
		}
		mean /= float64(d)
		for _, v := range row {
			vr += (float64(v) - mean) * (float64(v) - mean)
		}
		vr /= float64(d)
		for i, v := range row {
			want := (float64(v)-mean)/math.Sqrt(vr+eps)*float64(gamma.Data[i]) + float64(beta.Data[i])
			if got := float64(out.Data[i]); math.Abs(got-want) > 1e-5*(1+math.Abs(want)) {
				t.Errorf("d=%d, element %d: %g, want %g", d, i, got, want)
			}
		}
	}
}

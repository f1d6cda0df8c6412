package eval

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// noisySims returns an images x per*images similarity matrix whose matching
// pairs score signal higher than the rest, plus Gaussian noise, all times
// scale.
func noisySims(rng *rand.Rand, images, per int, signal, scale float64) *Matrix {
	m := NewMatrix(images, per*images)
	for i := 0; i < images; i++ {
		for j := 0; j < per*images; j++ {
			v := rng.NormFloat64()
			if j/per == i {
				v += signal
			}
			m.Data[i*m.Cols+j] = float32(scale * v)
		}
	}
	return m
}

func TestFuseStandardisesEachQuery(t *testing.T) {
	a := &Matrix{Rows: 2, Cols: 4, Data: []float32{1, 2, 3, 4, 10, 0, 0, 10}}
	b := &Matrix{Rows: 2, Cols: 4, Data: []float32{0, 0, 0, 0, 5, 6, 7, 8}}
	f, err := Fuse([]*Matrix{a, b}, []float32{1, 0.5})
	if err != nil {
		t.Fatal(err)
	}
	// The definition, in float64: each row (by image) and each column (by
	// caption) of each model standardised, then weighted and summed. A
	// constant row (b's first) adds nothing.
	z := func(x []float64) []float64 {
		var s, ss float64
		for _, v := range x {
			s += v
		}
		mean := s / float64(len(x))
		for _, v := range x {
			ss += (v - mean) * (v - mean)
		}
		sd := math.Sqrt(ss / float64(len(x)))
		out := make([]float64, len(x))
		for i, v := range x {
			if sd > 0 {
				out[i] = (v - mean) / sd
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		got  *Matrix
		want func(m *Matrix, i, j int) float64
	}{
		{"by image", f.ByImage, func(m *Matrix, i, j int) float64 {
			row := make([]float64, m.Cols)
			for c := range row {
				row[c] = float64(m.At(i, c))
			}
			return z(row)[j]
		}},
		{"by caption", f.ByCaption, func(m *Matrix, i, j int) float64 {
			col := make([]float64, m.Rows)
			for r := range col {
				col[r] = float64(m.At(r, j))
			}
			return z(col)[i]
		}},
	} {
		for i := 0; i < 2; i++ {
			for j := 0; j < 4; j++ {
				want := tc.want(a, i, j) + 0.5*tc.want(b, i, j)
				if got := float64(tc.got.At(i, j)); math.Abs(got-want) > 1e-5 {
					t.Errorf("%s [%d, %d] = %v, want %v", tc.name, i, j, got, want)
				}
			}
		}
	}
}

func TestFuseOneModelRanksAsAlone(t *testing.T) {
	sims := noisySims(rand.New(rand.NewPCG(1, 2)), 40, 5, 1.5, 3)
	alone, err := Evaluate(sims, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Fuse([]*Matrix{sims}, []float32{2})
	if err != nil {
		t.Fatal(err)
	}
	fused, err := EvaluateFused(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if alone.Metrics.I2T != fused.Metrics.I2T || alone.Metrics.T2I != fused.Metrics.T2I {
		t.Errorf("one model fused ranks differently: %+v / %+v, alone %+v / %+v", fused.Metrics.I2T, fused.Metrics.T2I, alone.Metrics.I2T, alone.Metrics.T2I)
	}
}

// Two models whose errors are independent and whose scores differ 100-fold
// in scale: averaging the raw scores hears the loud one only, the fusion
// hears both and ranks better than either.
func TestFuseBeatsEitherModelAndTheRawAverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	quiet := noisySims(rng, 200, 5, 1.2, 0.01)
	loud := noisySims(rng, 200, 5, 1.2, 1)
	rsum := func(r *Report, err error) float64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r.Metrics.RSum
	}
	q := rsum(Evaluate(quiet, Options{}))
	l := rsum(Evaluate(loud, Options{}))
	avg := NewMatrix(quiet.Rows, quiet.Cols)
	for i := range avg.Data {
		avg.Data[i] = (quiet.Data[i] + loud.Data[i]) / 2
	}
	a := rsum(Evaluate(avg, Options{}))
	f, err := Fuse([]*Matrix{quiet, loud}, []float32{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	fused := rsum(EvaluateFused(f, Options{}))
	t.Logf("rsum: quiet %.1f, loud %.1f, raw average %.1f, fused %.1f", q, l, a, fused)
	if fused < max(q, l)+20 {
		t.Errorf("fused rsum %.1f, want at least 20 above the better model's %.1f", fused, max(q, l))
	}
	if fused < a+20 {
		t.Errorf("fused rsum %.1f, want at least 20 above the raw average's %.1f", fused, a)
	}
}

func TestFuseRefuses(t *testing.T) {
	a := NewMatrix(2, 4)
	for _, tc := range []struct {
		name    string
		sims    []*Matrix
		weights []float32
		want    string
	}{
		{"no matrix", nil, nil, "at least one"},
		{"weights short", []*Matrix{a, a}, []float32{1}, "one weight a matrix"},
		{"shapes", []*Matrix{a, NewMatrix(2, 6)}, []float32{1, 1}, "want the same split"},
		{"zero weight", []*Matrix{a, a}, []float32{1, 0}, "weight 2 is 0"},
		{"NaN weight", []*Matrix{a}, []float32{float32(math.NaN())}, "weight 1 is NaN"},
		{"bad matrix", []*Matrix{{Rows: 2, Cols: 4, Data: make([]float32, 3)}}, []float32{1}, "3 values for a 2 x 4 matrix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Fuse(tc.sims, tc.weights)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Fuse: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

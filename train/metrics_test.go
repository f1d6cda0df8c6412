package train

import (
	"bytes"
	"image/png"
	"math"
	"strconv"
	"testing"
)

func TestIntTicks(t *testing.T) {
	for _, c := range []struct{ lo, hi float64 }{{0, 10}, {250, 1909}, {1, 3}, {0, 1}, {100, 100000}} {
		ticks := intTicks{}.Ticks(c.lo, c.hi)
		labelled := 0
		for _, tk := range ticks {
			if tk.Value != math.Trunc(tk.Value) {
				t.Errorf("[%g, %g]: tick at %g is not an iteration", c.lo, c.hi, tk.Value)
			}
			if tk.Label == "" {
				continue
			}
			labelled++
			if want := strconv.FormatFloat(tk.Value, 'f', -1, 64); tk.Label != want {
				t.Errorf("[%g, %g]: tick %g labelled %q, want %q", c.lo, c.hi, tk.Value, tk.Label, want)
			}
		}
		if labelled == 0 {
			t.Errorf("[%g, %g]: no labelled tick in %v", c.lo, c.hi, ticks)
		}
	}
}

func TestPlotCurves(t *testing.T) {
	hist := []Record{
		{Iter: 250, Loss: 600, R1T2I: 30, R1I2T: 18, AlignAcc: 0.5, AlignN: 10, NDCG: map[string]float64{"rouge-l/i2t": 0.5, "rouge-l/t2i": 0.6}},
		{Iter: 500, Loss: 40, R1T2I: 55, R1I2T: 64, AlignAcc: 0.75, AlignN: 10, NDCG: map[string]float64{"rouge-l/i2t": 0.65, "rouge-l/t2i": 0.69}},
		{Iter: 750, Loss: 8, R1T2I: 61, R1I2T: 73, AlignAcc: 0.8, AlignN: 10, NDCG: map[string]float64{"rouge-l/i2t": 0.68, "rouge-l/t2i": 0.7}},
	}
	for _, c := range []struct {
		name  string
		hist  []Record
		logOK bool
	}{
		{"positive losses", hist, true},
		{"a zero loss", append([]Record{{Iter: 1, Loss: 0}}, hist...), false},
		{"one record", hist[:1], true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := logOK(c.hist); got != c.logOK {
				t.Errorf("logOK = %v, want %v", got, c.logOK)
			}
			var buf bytes.Buffer
			if err := PlotCurves(&buf, c.hist); err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(&buf)
			if err != nil {
				t.Fatalf("curves are not a PNG: %v", err)
			}
			if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 800 {
				t.Errorf("curves image %v: want three stacked panels", b)
			}
		})
	}
}

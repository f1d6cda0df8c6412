package train

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/xmr-project/xmr/atomicfile"
)

// writeMetrics writes the validation history as metrics.csv, metrics.json
// and the training curves curves.png (loss, R@1, NDCG per validation, like
// Figure 3 of the TERAN paper).
func writeMetrics(dir string, hist []Record) error {
	if err := atomicfile.Write(filepath.Join(dir, "metrics.json"), func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(hist)
	}); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, "metrics.csv"), func(w io.Writer) error { return writeCSV(w, hist) }); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, "curves.png"), func(w io.Writer) error { return PlotCurves(w, hist) })
}

func ndcgKeys(hist []Record) []string {
	set := map[string]bool{}
	for _, r := range hist {
		for k := range r.NDCG {
			set[k] = true
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func writeCSV(w io.Writer, hist []Record) error {
	cw := csv.NewWriter(w)
	keys := ndcgKeys(hist)
	head := []string{"iter", "epoch", "seconds", "loss", "lr", "r1_i2t", "r5_i2t", "r10_i2t", "r1_t2i", "r5_t2i", "r10_t2i", "rsum", "align_acc", "examples_per_s"}
	for _, k := range keys {
		head = append(head, "ndcg_"+k)
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, r := range hist {
		row := []string{strconv.Itoa(r.Iter), strconv.Itoa(r.Epoch), f(r.Seconds), f(r.Loss), f(r.LR), f(r.R1I2T), f(r.R5I2T), f(r.R10I2T),
			f(r.R1T2I), f(r.R5T2I), f(r.R10T2I), f(r.RSum), f(r.AlignAcc), f(r.ExamplesS)}
		for _, k := range keys {
			row = append(row, f(r.NDCG[k]))
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// PlotCurves draws three stacked panels against the iteration: training
// loss; R@1 in both directions (and alignment accuracy when measured);
// NDCG in both directions for each relevance.
func PlotCurves(w io.Writer, hist []Record) error {
	palette := []color.Color{
		color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255},
		color.RGBA{214, 39, 40, 255}, color.RGBA{148, 103, 189, 255}, color.RGBA{140, 86, 75, 255},
	}
	series := func(p *plot.Plot, names []string, get []func(Record) float64, legendTop bool) error {
		for i, name := range names {
			pts := make(plotter.XYs, 0, len(hist))
			for _, r := range hist {
				// A value that is not finite (an undefined metric, a
				// diverged loss) has no point on the curve.
				if y := get[i](r); !math.IsNaN(y) && !math.IsInf(y, 0) {
					pts = append(pts, plotter.XY{X: float64(r.Iter), Y: y})
				}
			}
			l, sc, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			l.Color = palette[i%len(palette)]
			l.Width = vg.Points(1.5)
			sc.Color = l.Color
			sc.Radius = vg.Points(2)
			p.Add(l, sc)
			p.Legend.Add(name, l, sc)
		}
		p.Legend.Top = legendTop
		p.X.Label.Text = "iteration"
		p.X.Tick.Marker = intTicks{}
		p.Add(plotter.NewGrid())
		return nil
	}
	lossP := plot.New()
	lossP.Title.Text = "training loss"
	if err := series(lossP, []string{"loss"}, []func(Record) float64{func(r Record) float64 { return r.Loss }}, true); err != nil {
		return err
	}
	// The loss falls by orders of magnitude (and drops again where the
	// hardest negatives take over): a log axis shows both.
	if logOK(hist) {
		lossP.Y.Scale = plot.LogScale{}
		lossP.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		lossP.Y.Label.Text = "log scale"
	}
	recP := plot.New()
	recP.Title.Text = "validation R@1 (%)"
	names := []string{"image retrieval (t2i)", "sentence retrieval (i2t)"}
	gets := []func(Record) float64{func(r Record) float64 { return r.R1T2I }, func(r Record) float64 { return r.R1I2T }}
	if len(hist) > 0 && hist[len(hist)-1].AlignN > 0 {
		names = append(names, "word-region alignment acc.")
		gets = append(gets, func(r Record) float64 { return 100 * r.AlignAcc })
	}
	if err := series(recP, names, gets, false); err != nil {
		return err
	}
	ndP := plot.New()
	ndP.Title.Text = "validation NDCG@25"
	var ndNames []string
	var ndGets []func(Record) float64
	for _, k := range ndcgKeys(hist) {
		k := k
		ndNames = append(ndNames, k)
		ndGets = append(ndGets, func(r Record) float64 { return r.NDCG[k] })
	}
	if err := series(ndP, ndNames, ndGets, false); err != nil {
		return err
	}
	const width, rowH = 7 * vg.Inch, 3 * vg.Inch
	img := vgimg.New(width, 3*rowH)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 3, Cols: 1, PadX: vg.Millimeter, PadY: 2 * vg.Millimeter, PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: 2 * vg.Millimeter}
	for i, p := range []*plot.Plot{lossP, recP, ndP} {
		p.Draw(tiles.At(dc, 0, i))
	}
	png := vgimg.PngCanvas{Canvas: img}
	if _, err := png.WriteTo(w); err != nil {
		return fmt.Errorf("encode curves: %w", err)
	}
	return nil
}

// logOK reports whether every loss is positive and finite, as a log axis
// needs.
func logOK(hist []Record) bool {
	for _, r := range hist {
		if !(r.Loss > 0) || math.IsInf(r.Loss, 1) {
			return false
		}
	}
	return len(hist) > 0
}

// intTicks labels the iteration axis with whole numbers ("250", not
// "250.00"), dropping the ticks that fall between integers.
type intTicks struct{}

// Ticks implements plot.Ticker.
func (intTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, t := range (plot.DefaultTicks{}).Ticks(lo, hi) {
		if t.Value != math.Trunc(t.Value) {
			continue
		}
		if t.Label != "" {
			t.Label = strconv.FormatFloat(t.Value, 'f', -1, 64)
		}
		out = append(out, t)
	}
	return out
}

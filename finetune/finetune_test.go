package finetune

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/internal/detecttest"
	"github.com/xmr-project/xmr/npy"
	"github.com/xmr-project/xmr/optim"
	"github.com/xmr-project/xmr/tensor"
)

// testDetector is the real detector (detecttest).
func testDetector(t testing.TB) *detect.Detector { return detecttest.Detector(t) }

// photo is a random image with a bright square, for the detector.
func photo(seed uint64) *extract.Picture {
	rng := rand.New(rand.NewPCG(seed, 3))
	const S = detect.InputSize
	rgb := make([]float32, S*S*3)
	for i := range rgb {
		rgb[i] = float32(rng.IntN(64))
	}
	x0, y0 := 100+rng.IntN(200), 100+rng.IntN(200)
	for y := y0; y < y0+120; y++ {
		for x := x0; x < x0+150; x++ {
			rgb[(y*S+x)*3], rgb[(y*S+x)*3+1] = 240, float32(rng.IntN(256))
		}
	}
	return &extract.Picture{RGB: rgb, Width: S, Height: S}
}

// world is a few images extracted with the detector tapped at cut: their
// regions (as a data set holds them) and activations.
type world struct {
	reg  *data.Regions
	taps []float32 // N x H x W x C
	in   []int
}

func extractWorld(t *testing.T, d *detect.Detector, cut detect.Cut, n int) *world {
	t.Helper()
	tapped, err := d.WithTaps(cut.Node)
	if err != nil {
		t.Fatal(err)
	}
	e, err := extract.New(tapped, extract.Options{MaxBoxes: 6, Taps: cut.Name})
	if err != nil {
		t.Fatal(err)
	}
	const R = 6
	D := e.Width()
	w := &world{reg: &data.Regions{N: n, R: R, D: D, Feat: make([]float32, n*R*D), Boxes: make([]float32, n*R*4), Count: make([]int, n)}}
	for i := range n {
		f, err := e.Run(context.Background(), photo(uint64(i)))
		if err != nil {
			t.Fatal(err)
		}
		copy(w.reg.Feat[i*R*D:], f.Regions)
		for r, b := range f.Boxes {
			for k := range 4 {
				w.reg.Boxes[(i*R+r)*4+k] = b[k] / detect.InputSize
			}
		}
		w.reg.Count[i] = len(f.Boxes)
		if f.Tap == nil {
			t.Fatal("the extractor returned no tap")
		}
		w.in = []int{f.Tap.H, f.Tap.W, f.Tap.C}
		w.taps = append(w.taps, f.Tap.Data...)
	}
	return w
}

// writeTaps writes w's activations as xmr extract does (float16).
func (w *world) writeTaps(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	wr, err := npy.Create(path, npy.DType{Kind: 'f', Size: 2}, append([]int{w.reg.N}, w.in...))
	if err != nil {
		t.Fatal(err)
	}
	if err := wr.WriteFloat32(w.taps); err != nil {
		t.Fatal(err)
	}
	if err := wr.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPartRecomputesExtractedFeatures checks that the part, with the
// detector's weights, recomputes from the cached (float16) activations the
// columns of the maps it computes, within float16's rounding, and leaves
// the other columns as they are; and that Refeature does so for a whole
// split in batches.
func TestPartRecomputesExtractedFeatures(t *testing.T) {
	d := testDetector(t)
	cut, _ := detect.CutNamed("s32")
	w := extractWorld(t, d, cut, 3)
	if _, err := NewPart(d, cut, []string{"neck_s4"}); err == nil || !strings.Contains(err.Error(), "backbone_s32") {
		t.Fatalf("NewPart of features without the cut's map: %v", err)
	}
	var maps []string
	for _, m := range detect.Maps {
		maps = append(maps, m.Name)
	}
	p, err := NewPart(d, cut, maps)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "taps.npy")
	w.writeTaps(t, path)
	taps, err := OpenTaps(path, w.reg, p.InShape())
	if err != nil {
		t.Fatal(err)
	}
	defer taps.Close()
	if err := p.Check(taps, w.reg); err != nil {
		t.Fatal(err)
	}
	got, err := p.Refeature(taps, w.reg)
	if err != nil {
		t.Fatal(err)
	}
	lo := w.reg.D - 480 // backbone_s32's columns, last
	var maxErr, maxAbs float64
	for i := range w.reg.N {
		for r := range w.reg.NumRegions(i) {
			a, b := got.Region(i, r), w.reg.Region(i, r)
			if !slices.Equal(a[:lo], b[:lo]) {
				t.Fatalf("image %d region %d: the columns the part does not compute changed", i, r)
			}
			for j := lo; j < len(a); j++ {
				maxErr = math.Max(maxErr, math.Abs(float64(a[j]-b[j])))
				maxAbs = math.Max(maxAbs, math.Abs(float64(b[j])))
			}
		}
	}
	if maxAbs == 0 || maxErr > 5e-3*maxAbs {
		t.Fatalf("recomputed backbone_s32: largest difference %.3g of values up to %.3g", maxErr, maxAbs)
	}

	// Activations of other images fail the check.
	other := *w.reg
	other.Feat = slices.Clone(w.reg.Feat)
	for i := range other.Feat {
		other.Feat[i] += 1
	}
	if err := p.Check(taps, &other); err == nil || !strings.Contains(err.Error(), "--taps") {
		t.Fatalf("Check of mismatched activations: %v", err)
	}
}

// TestPartLearns trains the part alone through ROI-Align: the pooled
// backbone_s32 of every region is pulled towards a target, and the loss
// falls.
func TestPartLearns(t *testing.T) {
	d := testDetector(t)
	cut, _ := detect.CutNamed("s32")
	w := extractWorld(t, d, cut, 2)
	p, err := NewPart(d, cut, []string{"backbone_s32"})
	if err != nil {
		t.Fatal(err)
	}
	var params []*tensor.Tensor
	for _, q := range p.Params() {
		if !strings.HasPrefix(q.Name, Prefix) {
			t.Fatalf("parameter %q without the prefix %q", q.Name, Prefix)
		}
		params = append(params, q.T)
	}
	opt, err := optim.NewAdam([]optim.Group{{Params: params, LR: 1e-3}}, optim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	R, D := w.reg.R, 480
	x := tensor.FromData(w.taps, append([]int{w.reg.N}, w.in...)...)
	var boxes [][][4]float32
	for i := range w.reg.N {
		var bs [][4]float32
		for r := range w.reg.NumRegions(i) {
			b := w.reg.Boxes[(i*R+r)*4:]
			bs = append(bs, [4]float32{b[0] * 512, b[1] * 512, b[2] * 512, b[3] * 512})
		}
		boxes = append(boxes, bs)
	}
	target := tensor.New(w.reg.N, R, D)
	rng := rand.New(rand.NewPCG(5, 5))
	for i := range target.Data {
		target.Data[i] = float32(rng.NormFloat64())
	}
	tp := tensor.NewTape()
	var first, last float64
	for it := range 25 {
		feat := tensor.New(w.reg.N, R, D)
		y := p.Features(tp, x, boxes, feat)
		diff := tp.Sub(y, target)
		loss := tp.SumAll(tp.Mul(diff, diff))
		l := float64(loss.Item())
		tp.BackwardAndReset(loss)
		opt.StepAndZeroGrad()
		if it == 0 {
			first = l
		}
		last = l
	}
	if !(last < 0.8*first) {
		t.Fatalf("the part's loss went from %.4f to %.4f in 25 steps: it does not learn", first, last)
	}
}

// TestCheckpointPart checks the part's round trip through a checkpoint:
// Carried and LoadPart read what was saved, Tuned runs it, and a
// checkpoint whose metadata names a part it lacks, or an unknown cut, is
// refused.
func TestCheckpointPart(t *testing.T) {
	d := testDetector(t)
	cut, _ := detect.CutNamed("s32")
	p, err := NewPart(d, cut, []string{"backbone_s32"})
	if err != nil {
		t.Fatal(err)
	}
	var entries []checkpoint.Entry
	for _, q := range p.Params() {
		for i := range q.T.Data {
			q.T.Data[i] *= 0.9 // "trained"
		}
		entries = append(entries, checkpoint.Entry{Name: q.Name, Shape: q.T.Shape, Data: q.T.Data})
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	if err := checkpoint.Save(path, append(entries, checkpoint.Entry{Name: "model.w", Shape: []int{1}, Data: []float32{1}}), map[string]string{MetaKey: "s32"}); err != nil {
		t.Fatal(err)
	}
	f, err := checkpoint.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ts, md, err := Carried(f)
	if err != nil || len(ts) != len(entries) || md[MetaKey] != "s32" {
		t.Fatalf("Carried: %d tensors, %v, %v", len(ts), md, err)
	}
	loaded, err := LoadPart(f, d, []string{"backbone_s32"})
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range loaded.Params() {
		if !slices.Equal(q.T.Data, entries[i].Data) {
			t.Fatalf("LoadPart: %s differs from the saved weights", q.Name)
		}
	}
	tuned, err := Tuned(f, d)
	if err != nil {
		t.Fatal(err)
	}
	img := photo(9).RGB
	out, err := tuned.Run(context.Background(), img, detect.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tap := out.Taps[len(out.Taps)-1]
	x := tensor.FromData(tap.Data, 1, tap.H, tap.W, tap.C)
	want := loaded.net.Forward(nil, x)[0]
	if !slices.Equal(out.Maps[3].Data, want.Data) {
		t.Fatal("the tuned detector's backbone_s32 is not the loaded part's")
	}

	// A checkpoint without a part, one that names a part it lacks, one
	// with an unknown cut.
	for _, tc := range []struct {
		name string
		md   map[string]string
		want string
	}{
		{"none", nil, ""},
		{"missing", map[string]string{MetaKey: "s32"}, "no weights named vision."},
		{"unknown", map[string]string{MetaKey: "s64"}, `no cut named "s64"`},
	} {
		path := filepath.Join(dir, tc.name+".safetensors")
		if err := checkpoint.Save(path, []checkpoint.Entry{{Name: "model.w", Shape: []int{1}, Data: []float32{1}}}, tc.md); err != nil {
			t.Fatal(err)
		}
		f, err := checkpoint.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		ts, _, err := Carried(f)
		if tc.want == "" {
			if err != nil || ts != nil {
				t.Errorf("%s: Carried %d tensors, %v", tc.name, len(ts), err)
			}
			if tt, err := Tuned(f, d); tt != nil || err != nil {
				t.Errorf("%s: Tuned %v, %v", tc.name, tt, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Carried: %v, want an error with %q", tc.name, err, tc.want)
		}
		f.Close()
	}
}

// TestOpenTaps checks that activations of another shape, or a split
// without boxes, are refused with the file and the fix named, and that
// float32 and float16 activations give the same batches.
func TestOpenTaps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "train.npy")
	if err := npy.WriteFile(path, []int{2, 4, 4, 3}, make([]float32, 2*4*4*3)); err != nil {
		t.Fatal(err)
	}
	reg := &data.Regions{N: 3, R: 1, D: 1, Feat: make([]float32, 3), Boxes: make([]float32, 12)}
	if _, err := OpenTaps(path, reg, []int{4, 4, 3}); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "--taps") {
		t.Errorf("3 images, activations of 2: %v", err)
	}
	reg = &data.Regions{N: 2, R: 1, D: 1, Feat: make([]float32, 2)}
	if _, err := OpenTaps(path, reg, []int{4, 4, 3}); err == nil || !strings.Contains(err.Error(), "no region boxes") {
		t.Errorf("no boxes: %v", err)
	}
	if _, err := OpenTaps(filepath.Join(dir, "none.npy"), reg, []int{4, 4, 3}); err == nil {
		t.Error("a missing file was accepted")
	}

	// float32 activations (mapped) and float16 ones (kept as bits) give
	// the same batches, to float16's rounding.
	vals := make([]float32, 2*4*4*3)
	for i := range vals {
		vals[i] = float32(i)/7 - 3
	}
	f32, f16 := filepath.Join(dir, "f32.npy"), filepath.Join(dir, "f16.npy")
	if err := npy.WriteFile(f32, []int{2, 4, 4, 3}, vals); err != nil {
		t.Fatal(err)
	}
	w, err := npy.Create(f16, npy.Float16, []int{2, 4, 4, 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFloat32(vals); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	reg = &data.Regions{N: 2, R: 1, D: 1, Feat: make([]float32, 2), Boxes: []float32{0, 0, 1, 1, 0, 0, 0.5, 0.5}}
	for _, path := range []string{f32, f16} {
		tp, err := OpenTaps(path, reg, []int{4, 4, 3})
		if err != nil {
			t.Fatal(err)
		}
		x, boxes := tp.batch([]int{1})
		for j, v := range x.Data {
			if want := vals[48+j]; math.Abs(float64(v-want)) > 2e-3*math.Abs(float64(want))+1e-6 {
				t.Fatalf("%s: image 1 value %d = %v, want %v", filepath.Base(path), j, v, want)
			}
		}
		if len(boxes) != 1 || boxes[0][0] != [4]float32{0, 0, 256, 256} {
			t.Errorf("%s: boxes %v, want image 1's in input pixels", filepath.Base(path), boxes)
		}
		tp.Close()
	}
}

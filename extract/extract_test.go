package extract

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/detect"
)

func linMap() *detect.FeatureMap {
	m := &detect.FeatureMap{Name: "lin", H: 64, W: 64, C: 2, Stride: 8}
	m.Data = make([]float32, m.H*m.W*m.C)
	for y := range m.H {
		for x := range m.W {
			m.Data[(y*m.W+x)*2] = float32(x + 10*y)
			m.Data[(y*m.W+x)*2+1] = float32(100 + x - y)
		}
	}
	return m
}

func TestROIAlign(t *testing.T) {
	m := linMap()
	// Bilinear sampling of a linear map on a grid symmetric about the
	// box's centre averages to the map at the centre, in map coordinates
	// (pixel/stride - 0.5), as long as no sample is clamped.
	tests := []struct {
		box  [4]float32
		x, y float64 // the centre in map cells
	}{
		{[4]float32{40, 80, 120, 200}, 80.0/8 - 0.5, 140.0/8 - 0.5},
		{[4]float32{100, 100, 103, 102}, 101.5/8 - 0.5, 101.0/8 - 0.5}, // smaller than a cell
		{[4]float32{8, 8, 504, 504}, 256.0/8 - 0.5, 256.0/8 - 0.5},
	}
	for _, tc := range tests {
		out := make([]float32, 2)
		ROIAlign(m, tc.box, out)
		want := []float64{tc.x + 10*tc.y, 100 + tc.x - tc.y}
		for c := range 2 {
			if math.Abs(float64(out[c])-want[c]) > 1e-3 {
				t.Errorf("box %v channel %d: %v, want %v", tc.box, c, out[c], want[c])
			}
		}
	}
	// Clamped at the border: a box off the top-left corner reads the
	// corner cell.
	out := make([]float32, 2)
	ROIAlign(m, [4]float32{0, 0, 2, 2}, out)
	if out[0] != 0 || out[1] != 100 {
		t.Errorf("corner box: %v, want [0 100]", out)
	}
	// ROIAlign adds to out.
	out = []float32{1, 1}
	ROIAlign(m, [4]float32{0, 0, 2, 2}, out)
	if out[0] != 1 || out[1] != 101 {
		t.Errorf("ROIAlign does not add: %v", out)
	}
}

// TestBilinearAddBitForBit: the vector kernel's samples equal the scalar
// loop's bit for bit, for widths that fill its blocks of 8 and leave
// channels over, at points inside the map and clamped to its border.
func TestBilinearAddBitForBit(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, C := range []int{1, 3, 8, 13, 64, 120} {
		m := &detect.FeatureMap{Name: "r", H: 7, W: 9, C: C, Stride: 8}
		m.Data = make([]float32, m.H*m.W*C)
		for i := range m.Data {
			m.Data[i] = float32(rng.NormFloat64() * 5)
		}
		for _, pt := range [][2]float64{{0.3, 0.7}, {4.25, 2.5}, {8.9, 6.1}, {-1, 3.3}, {3.71, 9}} {
			got, want := make([]float32, C), make([]float32, C)
			for c := range got {
				got[c] = float32(c) / 7
				want[c] = got[c]
			}
			bilinearAdd(m, pt[0], pt[1], got)
			x, y := min(max(pt[0], 0), float64(m.W-1)), min(max(pt[1], 0), float64(m.H-1))
			x0, y0 := int(x), int(y)
			x1, y1 := min(x0+1, m.W-1), min(y0+1, m.H-1)
			fx, fy := float32(x-float64(x0)), float32(y-float64(y0))
			w00, w01, w10, w11 := (1-fx)*(1-fy), fx*(1-fy), (1-fx)*fy, fx*fy
			at := func(yy, xx, c int) float32 { return m.Data[(yy*m.W+xx)*C+c] }
			for c := range want {
				want[c] += w00*at(y0, x0, c) + w01*at(y0, x1, c) + w10*at(y1, x0, c) + w11*at(y1, x1, c)
			}
			for c := range want {
				if math.Float32bits(got[c]) != math.Float32bits(want[c]) {
					t.Fatalf("C %d at %v: channel %d is %v, the scalar loop %v", C, pt, c, got[c], want[c])
				}
			}
		}
	}
}

func TestMeanMap(t *testing.T) {
	out := make([]float32, 2)
	meanMap(linMap(), out)
	// mean of x + 10 y over 0..63 is 31.5 * 11; of 100 + x - y is 100.
	if math.Abs(float64(out[0])-346.5) > 1e-3 || math.Abs(float64(out[1])-100) > 1e-3 {
		t.Errorf("mean %v", out)
	}
}

func TestChooseBoxes(t *testing.T) {
	det := func(score float32, x1, y1, x2, y2 float32) detect.Detection {
		return detect.Detection{Box: [4]float32{x1, y1, x2, y2}, Class: 1, Score: score}
	}
	dets := []detect.Detection{
		det(0.3, 10, 10, 100, 100),
		det(0.9, -20, 5, 600, 50),  // clipped to 0..512
		det(0.1, 0, 0, 10, 10),     // below the threshold
		det(0.5, 10, 10, 10.5, 90), // empty after all
		det(0.6, 200, 200, 300, 300),
	}
	got := ChooseBoxes(dets, 36, 0.2, true)
	if len(got) != 3+14 {
		t.Fatalf("%d boxes, want 3 detections and 14 fill boxes", len(got))
	}
	if got[0].Score != 0.9 || got[0].Box != [4]float32{0, 5, 512, 50} || got[1].Score != 0.6 || got[2].Score != 0.3 {
		t.Errorf("detections %v", got[:3])
	}
	if got[3].Class != FillWhole || got[3].Box != [4]float32{0, 0, 512, 512} {
		t.Errorf("first fill box %v, want the whole image", got[3])
	}
	if got[4].Box != [4]float32{0, 0, 256, 256} || got[7].Box != [4]float32{256, 256, 512, 512} || got[7].Class != FillGrid {
		t.Errorf("2x2 grid %v .. %v", got[4], got[7])
	}
	if b := got[16].Box; b[0] < 341 || b[2] != 512 || b[3] != 512 {
		t.Errorf("last 3x3 cell %v", b)
	}
	if n := len(ChooseBoxes(dets, 36, 0.2, false)); n != 3 {
		t.Errorf("no fill: %d boxes, want 3", n)
	}
	if n := len(ChooseBoxes(dets, 2, 0.2, true)); n != 2 {
		t.Errorf("max 2: %d boxes", n)
	}
	if n := len(ChooseBoxes(nil, 5, 0.2, true)); n != 5 {
		t.Errorf("no detections, max 5: %d boxes", n)
	}
}

func TestExtractorRun(t *testing.T) {
	det := &fakeDetector{dets: []detect.Detection{{Box: [4]float32{0, 0, 256, 512}, Class: 17, Score: 0.8}}}
	e := newFake(t, det, Options{})
	id := e.Identity()
	if id.Width != 5 || strings.Join(id.Maps, ",") != "lin,rgb" || id.Name != detect.Name || id.Pooling != Pooling {
		t.Fatalf("identity %+v", id)
	}
	// A 1000 x 500 picture: red left half, blue right half.
	p := &Picture{RGB: make([]float32, 512*512*3), Width: 1000, Height: 500}
	for y := range 512 {
		for x := range 512 {
			if x < 256 {
				p.RGB[(y*512+x)*3] = 255
			} else {
				p.RGB[(y*512+x)*3+2] = 255
			}
		}
	}
	f, err := e.Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Boxes) != 15 || len(f.Regions) != 15*5 || len(f.Global) != 5 {
		t.Fatalf("%d boxes, %d region values, %d global", len(f.Boxes), len(f.Regions), len(f.Global))
	}
	// The detection in original pixels: x scaled by 1000/512, y by 500/512.
	if f.Boxes[0] != [4]float32{0, 0, 500, 500} || f.Classes[0] != 17 || f.Classes[1] != FillWhole {
		t.Errorf("box %v class %v", f.Boxes[0], f.Classes[:2])
	}
	// Region 0 lies on the red half: its "rgb" part is red.
	r0 := f.Regions[:5]
	if r0[2] < 250 || r0[4] > 5 {
		t.Errorf("region 0 colour %v, want red", r0[2:])
	}
	// The whole image's global vector: half red, half blue.
	if math.Abs(float64(f.Global[2])-127.5) > 0.5 || math.Abs(float64(f.Global[4])-127.5) > 0.5 {
		t.Errorf("global colour %v", f.Global[2:])
	}

	// A subset of the maps, in another order.
	e2 := newFake(t, det, Options{Maps: []string{"rgb"}})
	if e2.Width() != 3 || e2.Identity().Equal(id) {
		t.Errorf("rgb-only identity %v", e2.Identity())
	}
	if _, err := New(det, Options{Maps: []string{"nope"}}); err == nil || !strings.Contains(err.Error(), "it has lin, rgb") {
		t.Errorf("unknown map: %v", err)
	}
}

// infoDetector is fakeDetector with another MapInfo.
type infoDetector struct {
	*fakeDetector
	info []detect.MapSpec
}

func (d infoDetector) MapInfo() []detect.MapSpec { return d.info }

// TestNewMapInfo checks that New learns the maps from MapInfo without
// running the detector, refuses a MapInfo it cannot use, and that Run
// refuses maps that disagree with it.
func TestNewMapInfo(t *testing.T) {
	det := &fakeDetector{}
	e, err := New(det, Options{Maps: []string{"rgb", "lin"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := det.calls.Load(); n != 0 {
		t.Errorf("New ran the detector %d times", n)
	}
	if e.Width() != 5 || !slices.Equal(e.Identity().Maps, []string{"rgb", "lin"}) {
		t.Errorf("identity %v", e.Identity())
	}
	tests := []struct {
		info   []detect.MapSpec
		newErr string // New's error
		runErr string // else Run's
	}{
		{nil, "the detector has no feature maps", ""},
		{[]detect.MapSpec{{Name: "lin", Stride: 8, C: 0}}, `detector map "lin" has 0 channels`, ""},
		{[]detect.MapSpec{{Name: "lin", Stride: 0, C: 2}}, `detector map "lin" has 2 channels and stride 0`, ""},
		{[]detect.MapSpec{{Name: "lin", Stride: 8, C: 2}, {Name: "lin", Stride: 32, C: 3}}, `names two maps "lin"`, ""},
		{[]detect.MapSpec{{Name: "lin", Stride: 8, C: 2}, {Name: "depth", Stride: 8, C: 1}}, "", `the detector returned no map "depth"`},
		{[]detect.MapSpec{{Name: "lin", Stride: 8, C: 2}, {Name: "rgb", Stride: 32, C: 4}}, "", `detector map "rgb" is 16x16x3 at stride 32 with 768 values; its MapInfo says 4 channels at stride 32`},
		{[]detect.MapSpec{{Name: "lin", Stride: 16, C: 2}, {Name: "rgb", Stride: 32, C: 3}}, "", `its MapInfo says 2 channels at stride 16`},
	}
	pic := &Picture{RGB: make([]float32, detect.InputSize*detect.InputSize*3), Width: 10, Height: 10}
	for _, tc := range tests {
		e, err := New(infoDetector{&fakeDetector{}, tc.info}, Options{})
		if tc.newErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.newErr) {
				t.Errorf("%v: New: %v, want %q", tc.info, err, tc.newErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: New: %v", tc.info, err)
			continue
		}
		if _, err := e.Run(context.Background(), pic); err == nil || !strings.Contains(err.Error(), tc.runErr) {
			t.Errorf("%v: Run: %v, want %q", tc.info, err, tc.runErr)
		}
	}
}

// TestOptionalMap checks that a map the detector marks Optional (as
// detect.ClassMap) is pooled only when Options.Maps names it: the default
// identity leaves it out, and named it adds its channels after the others,
// ROI-Aligned over each box like them.
func TestOptionalMap(t *testing.T) {
	info := []detect.MapSpec{{Name: "lin", Stride: 8, C: 2}, {Name: "rgb", Stride: 32, C: 3}, {Name: "cls", Stride: 4, C: 1, Optional: true}}
	const S = float32(detect.InputSize)
	dets := []detect.Detection{
		{Box: [4]float32{0, 0, S / 4, S}, Class: 1, Score: 0.9},     // in the left half: cls 1
		{Box: [4]float32{S * 3 / 4, 0, S, S}, Class: 2, Score: 0.8}, // in the right half: cls 0
	}
	pic := &Picture{RGB: make([]float32, detect.InputSize*detect.InputSize*3), Width: 10, Height: 10}
	tests := []struct {
		maps      []string
		wantMaps  []string
		wantWidth int
	}{
		{nil, []string{"lin", "rgb"}, 5},
		{[]string{"lin", "rgb", "cls"}, []string{"lin", "rgb", "cls"}, 6},
		{[]string{"cls", "lin"}, []string{"cls", "lin"}, 3},
	}
	for _, tc := range tests {
		e, err := New(infoDetector{&fakeDetector{dets: dets}, info}, Options{Maps: tc.maps, MaxBoxes: 3})
		if err != nil {
			t.Fatalf("%v: %v", tc.maps, err)
		}
		if id := e.Identity(); !slices.Equal(id.Maps, tc.wantMaps) || id.Width != tc.wantWidth {
			t.Errorf("%v: identity maps %v width %d, want %v width %d", tc.maps, id.Maps, id.Width, tc.wantMaps, tc.wantWidth)
		}
		f, err := e.Run(context.Background(), pic)
		if err != nil {
			t.Fatalf("%v: Run: %v", tc.maps, err)
		}
		i := slices.Index(tc.wantMaps, "cls")
		if i < 0 {
			continue
		}
		col := 0
		for _, m := range tc.wantMaps[:i] {
			col += info[slices.IndexFunc(info, func(s detect.MapSpec) bool { return s.Name == m })].C
		}
		D := tc.wantWidth
		// Regions: the two detections, then the whole image (half in the left).
		for r, want := range []float32{1, 0, 0.5} {
			if got := f.Regions[r*D+col]; math.Abs(float64(got-want)) > 0.02 {
				t.Errorf("%v: region %d: cls %.3f, want %.1f", tc.maps, r, got, want)
			}
		}
		if got := f.Global[col]; math.Abs(float64(got-0.5)) > 1e-6 {
			t.Errorf("%v: global cls %.4f, want 0.5", tc.maps, got)
		}
	}
}

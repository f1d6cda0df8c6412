package extract

import (
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/xmr-project/xmr/detect"
)

// fakeDetector is a deterministic stand-in for the CenterNet detector:
//
//   - map "lin" (stride 8, 64x64x2) holds a linear function of position,
//     x + 10 y in channel 0 and 100 + x - y in channel 1, whatever the image;
//   - map "rgb" (stride 32, 16x16x3) holds the mean colour of each 32x32
//     cell of the input, so that features follow the pixels;
//   - the detections are dets, whatever the image;
//   - for each graph node named in taps, Output.Taps has a map of that
//     name (16x16x4, fakeTap), as detect.Detector.WithTaps gives it.
//
// When cancelAfter is set, the call after that many calls cancels cancel
// and fails with its error (a Ctrl-C in the middle of a run).
type fakeDetector struct {
	dets        []detect.Detection
	calls       atomic.Int64
	cancelAfter int64
	cancel      context.CancelFunc
	taps        []string

	mu      sync.Mutex
	lastTap []float32 // the data of the last tap returned
}

// fakeClasses is the optional map "cls" (stride 4, 128x128x1) that the
// fake returns when RunOptions.Maps names it, as detect.ClassMap: 1 in the
// input's left half, 0 in its right half.
func fakeClasses() detect.FeatureMap {
	const S = detect.InputSize
	m := detect.FeatureMap{Name: "cls", H: S / 4, W: S / 4, C: 1, Stride: 4}
	m.Data = make([]float32, m.H*m.W)
	for y := range m.H {
		for x := range m.W / 2 {
			m.Data[y*m.W+x] = 1
		}
	}
	return m
}

// fakeTap is the tap at node of the picture rgb: 16x16x4, channels 0 to 2
// the mean colour of each 32x32 cell (values that float16 rounds), channel
// 3 a function of the cell and of the node's name.
func fakeTap(node string, rgb []float32) detect.FeatureMap {
	const S = detect.InputSize
	m := detect.FeatureMap{Name: node, H: S / 32, W: S / 32, C: 4, Stride: 32}
	m.Data = make([]float32, m.H*m.W*m.C)
	for y := range S {
		for x := range S {
			for k := range 3 {
				m.Data[((y/32)*m.W+x/32)*4+k] += rgb[(y*S+x)*3+k] / (32 * 32)
			}
		}
	}
	for y := range m.H {
		for x := range m.W {
			m.Data[(y*m.W+x)*4+3] = float32(len(node)) + 0.37*float32(x) - 1.01*float32(y)
		}
	}
	return m
}

func (f *fakeDetector) Run(ctx context.Context, rgb []float32, opt detect.RunOptions) (*detect.Output, error) {
	n := f.calls.Add(1)
	if f.cancelAfter > 0 && n > f.cancelAfter {
		f.cancel()
		return nil, ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	const S = detect.InputSize
	lin := detect.FeatureMap{Name: "lin", H: S / 8, W: S / 8, C: 2, Stride: 8}
	lin.Data = make([]float32, lin.H*lin.W*lin.C)
	for y := range lin.H {
		for x := range lin.W {
			lin.Data[(y*lin.W+x)*2] = float32(x + 10*y)
			lin.Data[(y*lin.W+x)*2+1] = float32(100 + x - y)
		}
	}
	c := detect.FeatureMap{Name: "rgb", H: S / 32, W: S / 32, C: 3, Stride: 32}
	c.Data = make([]float32, c.H*c.W*3)
	for y := range S {
		for x := range S {
			for k := range 3 {
				c.Data[((y/32)*c.W+x/32)*3+k] += rgb[(y*S+x)*3+k] / (32 * 32)
			}
		}
	}
	var dets []detect.Detection
	for _, d := range f.dets {
		if d.Score >= opt.MinScore {
			dets = append(dets, d)
		}
	}
	out := &detect.Output{Detections: dets, Maps: []detect.FeatureMap{lin, c}}
	if slices.Contains(opt.Maps, "cls") {
		out.Maps = append(out.Maps, fakeClasses())
	}
	for _, node := range f.taps {
		out.Taps = append(out.Taps, fakeTap(node, rgb))
	}
	if len(out.Taps) > 0 {
		f.mu.Lock()
		f.lastTap = out.Taps[len(out.Taps)-1].Data
		f.mu.Unlock()
	}
	return out, nil
}

// MapInfo describes the maps Run returns.
func (f *fakeDetector) MapInfo() []detect.MapSpec {
	return []detect.MapSpec{{Name: "lin", Stride: 8, C: 2}, {Name: "rgb", Stride: 32, C: 3}}
}

func newFake(t *testing.T, det *fakeDetector, opt Options) *Extractor {
	t.Helper()
	e, err := New(det, opt)
	if err != nil {
		t.Fatal(err)
	}
	det.calls.Store(0)
	return e
}

// writePNG writes a w x h PNG of colour c with a white square in its top
// left quarter.
func writePNG(t *testing.T, path string, w, h int, c color.RGBA) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			if x < w/2 && y < h/2 {
				img.Set(x, y, color.RGBA{255, 255, 255, 255})
			} else {
				img.Set(x, y, c)
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// collection writes n PNGs to dir and returns them as a split with
// captions.
func collection(t *testing.T, dir, name string, n int) SplitSpec {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := SplitSpec{Name: name}
	for i := range n {
		id := name + "-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		p := filepath.Join(dir, id+".png")
		writePNG(t, p, 40+7*i, 30+3*i, color.RGBA{uint8(20 * i), uint8(255 - 9*i), 128, 255})
		s.Items = append(s.Items, Item{Path: p, ID: id})
		var caps []string
		for k := range 5 {
			caps = append(caps, id+" caption "+string(rune('0'+k)))
		}
		s.Captions = append(s.Captions, caps)
	}
	return s
}

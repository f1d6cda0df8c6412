package extract

import (
	"context"
	"image"
	"image/color"
	"slices"
	"testing"

	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/internal/detecttest"
)

// TestUntuned checks that an extractor whose detector has a changed
// fine-tuned part gives, with Options.Untuned, the regions and global
// vector of the detector as published from the same run, bit for bit,
// beside its own, which differ in the part's map only.
func TestUntuned(t *testing.T) {
	d := detecttest.Detector(t)
	cut, err := detect.CutNamed("s32")
	if err != nil {
		t.Fatal(err)
	}
	halved := ""
	tuned, err := d.Tune(cut, func(p detect.Param) error {
		if len(p.T.Shape) == 4 && halved == "" || p.Name == halved {
			halved = p.Name
			for i := range p.T.Data {
				p.T.Data[i] *= 0.5
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	img := image.NewRGBA(image.Rect(0, 0, 96, 64))
	for y := 0; y < 64; y++ {
		for x := 0; x < 96; x++ {
			img.Set(x, y, color.RGBA{uint8(3 * x), uint8(4 * y), uint8(x * y), 255})
		}
	}
	pic := Prepare(img, 1)
	ctx := context.Background()
	plain, err := New(d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := plain.Run(ctx, pic)
	if err != nil {
		t.Fatal(err)
	}
	both, err := New(tuned, Options{Untuned: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := both.Run(ctx, pic)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.UntunedGlobal, want.Global) {
		t.Fatal("UntunedGlobal differs from the published detector's global vector")
	}
	if !slices.Equal(got.UntunedRegions, want.Regions) || !slices.Equal(got.Boxes, want.Boxes) {
		t.Fatal("UntunedRegions differ from the published detector's regions")
	}
	if slices.Equal(got.Global, want.Global) || slices.Equal(got.Regions, want.Regions) {
		t.Fatal("the tuned extractor's own features equal the published ones: the part's change did not reach them")
	}
	// Features.Untuned: the published detector's view of the same run.
	u := got.Untuned()
	if u == nil || !slices.Equal(u.Regions, want.Regions) || !slices.Equal(u.Global, want.Global) || !slices.Equal(u.Boxes, want.Boxes) || u.UntunedRegions != nil {
		t.Fatal("Untuned(): want the published detector's regions, global vector and boxes, and no untuned ones of its own")
	}
	if slices.Equal(got.Regions, want.Regions) {
		t.Fatal("Untuned() changed the features it was called on")
	}
	alone, err := New(tuned, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := alone.Run(ctx, pic)
	if err != nil {
		t.Fatal(err)
	}
	if f.UntunedGlobal != nil || f.UntunedRegions != nil || !slices.Equal(f.Global, got.Global) || !slices.Equal(f.Regions, got.Regions) {
		t.Fatal("without Untuned: want the same features and no untuned ones")
	}
	if f.Untuned() != nil {
		t.Fatal("Untuned() of features without untuned ones: want nil")
	}
	asked, err := New(d, Options{Untuned: true})
	if err != nil {
		t.Fatal(err)
	}
	g, err := asked.Run(ctx, pic)
	if err != nil {
		t.Fatal(err)
	}
	if g.UntunedGlobal != nil || g.UntunedRegions != nil {
		t.Fatalf("the published detector with no part: %d untuned values; want none", len(g.UntunedGlobal)+len(g.UntunedRegions))
	}
}

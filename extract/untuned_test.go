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

// TestUntunedGlobal checks that an extractor whose detector has a changed
// fine-tuned part gives, with Options.UntunedGlobal, the global vector of
// the detector as published from the same run, bit for bit, beside its
// own, which differs in the part's map only.
func TestUntunedGlobal(t *testing.T) {
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
	both, err := New(tuned, Options{UntunedGlobal: true})
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
	if slices.Equal(got.Global, want.Global) {
		t.Fatal("the tuned extractor's own global vector equals the published one: the part's change did not reach it")
	}
	alone, err := New(tuned, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := alone.Run(ctx, pic)
	if err != nil {
		t.Fatal(err)
	}
	if f.UntunedGlobal != nil || !slices.Equal(f.Global, got.Global) || !slices.Equal(f.Regions, got.Regions) {
		t.Fatal("without UntunedGlobal: want the same features and no untuned vector")
	}
	asked, err := New(d, Options{UntunedGlobal: true})
	if err != nil {
		t.Fatal(err)
	}
	if g, err := asked.Run(ctx, pic); err != nil || g.UntunedGlobal != nil {
		t.Fatalf("the published detector with no part: %v, %d untuned values; want none", err, len(g.UntunedGlobal))
	}
}

package viz

import (
	"image"
	"image/color"
	"path/filepath"
	"testing"
)

func TestAlignmentOverlayDrawsBoxesInWordColours(t *testing.T) {
	src := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for i := range src.Pix {
		src.Pix[i] = 200
	}
	right, wrong := true, false
	words := []WordRegion{
		{Word: "red", Box: [4]float32{2, 2, 20, 14}, Score: 0.8, Correct: &right},
		{Word: "circle", Box: [4]float32{22, 10, 38, 28}, Score: 0.6, Correct: &wrong},
	}
	out := AlignmentOverlay(src, "a red circle", words, 4)
	if out.Bounds().Dx() < 160 || out.Bounds().Dy() < 120+3*lineH {
		t.Fatalf("overlay is %v, too small for a 4x image and its legend", out.Bounds())
	}
	// The bottom edge of each box (scaled by 4, inset by the word's index
	// mod 3) is drawn in the word's colour.
	for i, w := range words {
		y := int(w.Box[3]*4) - i%3
		x := int((w.Box[0]+w.Box[2])/2*4) + 5
		if got := out.RGBAAt(x, y); got != Palette[i] {
			t.Errorf("word %q: pixel (%d,%d) is %v, want %v", w.Word, x, y, got, Palette[i])
		}
	}
	// Inside the first box, the scaled image shows through.
	if got := out.RGBAAt(40, 40); got != (color.RGBA{200, 200, 200, 200}) {
		t.Errorf("image pixel = %v", got)
	}
	path := filepath.Join(t.TempDir(), "a.png")
	if err := SavePNG(path, out); err != nil {
		t.Fatal(err)
	}
	back, err := LoadPNG(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Bounds() != out.Bounds() {
		t.Fatalf("PNG round trip: %v, want %v", back.Bounds(), out.Bounds())
	}
}

func TestResultGridFramesRelevant(t *testing.T) {
	imgs := []image.Image{image.NewRGBA(image.Rect(0, 0, 20, 10)), image.NewRGBA(image.Rect(0, 0, 20, 10))}
	out := ResultGrid("a query", imgs, []string{"#1", "#2"}, []bool{false, true}, 2)
	const pad = 8
	top := lineH + 2*pad
	cellW := 40
	x2 := pad + 1*(cellW+pad)
	if got := out.RGBAAt(x2-3, top+5); got != (color.RGBA{40, 170, 40, 255}) {
		t.Errorf("relevant result not framed: %v", got)
	}
	if got := out.RGBAAt(pad-3, top+5); got == (color.RGBA{40, 170, 40, 255}) {
		t.Errorf("irrelevant result framed")
	}
}

func TestWrap(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"a b c", 10, "a b c"},
		{"aaa bbb ccc", 7, "aaa bbb\nccc"},
		{"aaaaaaaaaa b", 4, "aaaaaaaaaa\nb"},
	}
	for _, c := range cases {
		if got := wrap(c.in, c.n); got != c.want {
			t.Errorf("wrap(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

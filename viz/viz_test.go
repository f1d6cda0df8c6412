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

// TestResultGridMarksGroundTruth checks that the ground-truth result is
// framed and labelled in green, and the others are not.
func TestResultGridMarksGroundTruth(t *testing.T) {
	imgs := []image.Image{image.NewRGBA(image.Rect(0, 0, 50, 40)), image.NewRGBA(image.Rect(0, 0, 50, 40))}
	out := ResultGrid("a query", imgs, []string{"#1", "#2"}, []bool{false, true}, 2)
	const pad = 8
	top := lineH + 2*pad
	cellW, cellH := 100, 80
	green := func(x0, y0, x1, y1 int) int {
		n := 0
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				if out.RGBAAt(x, y) == GroundTruth {
					n++
				}
			}
		}
		return n
	}
	for i, want := range []bool{false, true} {
		x := pad + i*(cellW+pad)
		frame := green(x-4, top-4, x+cellW+4, top)                         // the band above the cell
		label := green(x, top+cellH+lineH+4, x+cellW, top+cellH+2*lineH+4) // the line under the label
		if (frame >= 4*cellW) != want || (label > 20) != want {
			t.Errorf("result %d (ground truth %v): %d green pixels in the frame, %d in the label line", i, want, frame, label)
		}
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

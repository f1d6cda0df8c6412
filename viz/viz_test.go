package viz

import (
	"context"
	"errors"
	"image"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"
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

// TestAlignmentOverlayWildBoxes draws boxes with huge, infinite and NaN
// coordinates (as a detector's file may hold): the drawing must finish
// (it looped for ever on a box of 1e30), draw the visible edges and leave
// the canvas its normal size.
func TestAlignmentOverlayWildBoxes(t *testing.T) {
	src := image.NewRGBA(image.Rect(0, 0, 40, 30))
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	boxes := [][4]float32{
		{0, 0, 1e30, 1e30},
		{2, 2, inf, inf},
		{-inf, -inf, 10, 10},
		{-1e30, 5, 1e30, 6},
		{nan, nan, nan, nan},
		{1e30, 1e30, -1e30, -1e30},
		{-3e9, -3e9, 3e9, 3e9},
	}
	var words []WordRegion
	for _, b := range boxes {
		words = append(words, WordRegion{Word: "w", Box: b})
	}
	out := AlignmentOverlay(src, "a caption", words, 2)
	want := AlignmentOverlay(src, "a caption", nil, 2).Bounds().Dy() + len(words)*lineH
	if out.Bounds().Dx() != 420 || out.Bounds().Dy() != want {
		t.Fatalf("overlay is %v, want 420 x %d", out.Bounds(), want)
	}
	// Box 0 starts at (0, 0): its top edge runs along the image.
	if got := out.RGBAAt(50, 0); got != Palette[0] {
		t.Errorf("top edge of box 0: pixel (50, 0) is %v, want %v", got, Palette[0])
	}
	// Box 2 ends at (10, 10), scaled by 2 and inset by 2.
	if got := out.RGBAAt(5, 18); got != Palette[2] {
		t.Errorf("right edge of box 2: pixel (5, 18) is %v, want %v", got, Palette[2])
	}
}

// TestAlignmentOverlayContext checks that a done context stops the drawing
// and the PNG writing, which leaves no file.
func TestAlignmentOverlayContext(t *testing.T) {
	src := image.NewRGBA(image.Rect(0, 0, 400, 300))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := AlignmentOverlayContext(ctx, src, "a caption", nil, 4); !errors.Is(err, context.Canceled) {
		t.Fatalf("AlignmentOverlayContext: err = %v, want context.Canceled", err)
	}
	path := filepath.Join(t.TempDir(), "a.png")
	if err := SavePNGContext(ctx, path, src); !errors.Is(err, context.Canceled) {
		t.Fatalf("SavePNGContext: err = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s exists after a cancelled write (stat: %v)", path, err)
	}
}

// TestAlignmentOverlayLongCaption checks that a caption of a megabyte
// gives a canvas of at most maxCaptionLines lines of text.
func TestAlignmentOverlayLongCaption(t *testing.T) {
	src := image.NewRGBA(image.Rect(0, 0, 40, 30))
	out := AlignmentOverlay(src, strings.Repeat("word ", 200_000), nil, 1)
	if max := 30 + (2+maxCaptionLines)*lineH + 8; out.Bounds().Dy() > max {
		t.Fatalf("overlay is %d pixels high, want at most %d", out.Bounds().Dy(), max)
	}
}

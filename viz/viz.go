// Package viz draws the pictures xmr shows people: word-region alignment
// overlays (each caption word's best region, boxed on the image in the
// word's colour) and retrieval result grids.
package viz

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/internal/infile"
)

// Palette holds distinct colours for words and boxes.
var Palette = []color.RGBA{
	{230, 25, 75, 255}, {60, 180, 75, 255}, {0, 130, 200, 255}, {245, 130, 48, 255},
	{145, 30, 180, 255}, {70, 240, 240, 255}, {240, 50, 230, 255}, {210, 245, 60, 255},
	{0, 128, 128, 255}, {170, 110, 40, 255}, {128, 0, 0, 255}, {0, 0, 128, 255},
}

var (
	white = color.RGBA{255, 255, 255, 255}
	black = color.RGBA{0, 0, 0, 255}
	grey  = color.RGBA{110, 110, 110, 255}
)

const lineH = 15 // pixel height of a text line in basicfont.Face7x13

// WordRegion is one caption word with the region it aligns to best.
type WordRegion struct {
	Word  string
	Box   [4]float32 // x1, y1, x2, y2 in the image's pixels
	Score float32    // cosine similarity of the word and the region
	// Correct, when known (ground truth), marks a right (true) or wrong
	// (false) grounding; nil when unknown.
	Correct *bool
}

// AlignmentOverlay draws img scaled by scale with the box of every word
// outlined in the word's colour and labelled, and the caption below with
// each word in its colour and its score. Boxes may lie partly or wholly
// outside the image, or hold huge or non-finite coordinates: what falls
// outside the canvas is not drawn, and the work is bounded by the canvas
// size whatever the boxes. A caption of more than maxCaptionLines lines is
// cut short.
func AlignmentOverlay(img image.Image, caption string, words []WordRegion, scale int) *image.RGBA {
	out, _ := AlignmentOverlayContext(context.Background(), img, caption, words, scale)
	return out
}

// maxCaptionLines bounds the caption text drawn under an overlay.
const maxCaptionLines = 40

// AlignmentOverlayContext is AlignmentOverlay checking ctx while it draws
// (a row of pixels at a time): once ctx is done it returns ctx's error.
func AlignmentOverlayContext(ctx context.Context, img image.Image, caption string, words []WordRegion, scale int) (*image.RGBA, error) {
	scale = max(scale, 1)
	b := img.Bounds()
	w, h := b.Dx()*scale, b.Dy()*scale
	width := max(w, 420)
	capText := wrap(caption, width/7-1)
	if lines := strings.SplitN(capText, "\n", maxCaptionLines+1); len(lines) > maxCaptionLines {
		capText = strings.Join(lines[:maxCaptionLines], "\n") + " ..."
	}
	capLines := strings.Count(capText, "\n") + 1
	out := image.NewRGBA(image.Rect(0, 0, width, h+(1+capLines+len(words))*lineH+8))
	draw.Draw(out, out.Bounds(), &image.Uniform{white}, image.Point{}, draw.Src)
	if err := scaleInto(ctx, out, img, scale); err != nil {
		return nil, err
	}
	for i, wr := range words {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c := Palette[i%len(Palette)]
		x1, y1 := canvasCoord(wr.Box[0], scale)+i%3, canvasCoord(wr.Box[1], scale)+i%3
		x2, y2 := canvasCoord(wr.Box[2], scale)-i%3, canvasCoord(wr.Box[3], scale)-i%3
		rect(out, x1, y1, x2, y2, 2, c)
		// The label stays near the canvas: fixed.Point26_6 holds 2^25 pixels.
		label(out, min(max(x1+3, -width), width), min(max(y1+lineH-2, -lineH), out.Bounds().Dy()+lineH), wr.Word, c)
	}
	y := h + lineH + 2
	text(out, 4, y, capText, black)
	y += capLines * lineH
	for i, wr := range words {
		y += lineH
		mark := ""
		if wr.Correct != nil {
			mark = "  wrong"
			if *wr.Correct {
				mark = "  right"
			}
		}
		text(out, 4, y, fmt.Sprintf("%-12s cos %.2f%s", wr.Word, wr.Score, mark), Palette[i%len(Palette)])
	}
	return out, nil
}

// coordLimit bounds the canvas coordinates of a box: far beyond any
// canvas, and far from the overflow of int arithmetic.
const coordLimit = 1 << 30

// canvasCoord converts a box coordinate in image pixels to a pixel of a
// canvas magnified scale times: NaN becomes 0, and huge or infinite values
// are clamped to +-coordLimit (Go's conversion of an out-of-range float to
// int gives an arbitrary value).
func canvasCoord(v float32, scale int) int {
	f := float64(v) * float64(scale)
	switch {
	case math.IsNaN(f):
		return 0
	case f < -coordLimit:
		return -coordLimit
	case f > coordLimit:
		return coordLimit
	}
	return int(f)
}

// GroundTruth is the colour that marks ground-truth results.
var GroundTruth = color.RGBA{40, 170, 40, 255}

// ResultGrid lays out a query and its results in one row: each result
// image scaled by scale, with its label (rank, score, id) below it. The
// results marked relevant (the ground truth) get a thick green frame and
// "ground truth" written in green under their label, so that a reader sees
// at once whether and where the right image came.
func ResultGrid(query string, imgs []image.Image, labels []string, relevant []bool, scale int) *image.RGBA {
	scale = max(scale, 1)
	cellW, cellH := 0, 0
	for _, im := range imgs {
		cellW = max(cellW, im.Bounds().Dx()*scale)
		cellH = max(cellH, im.Bounds().Dy()*scale)
	}
	const pad = 8
	cellW = max(cellW, 12*7) // room for the "ground truth" line
	width := max(len(imgs)*(cellW+pad)+pad, 400)
	out := image.NewRGBA(image.Rect(0, 0, width, cellH+4*lineH+3*pad))
	draw.Draw(out, out.Bounds(), &image.Uniform{white}, image.Point{}, draw.Src)
	text(out, pad, lineH, wrap("query: "+query, width/7-2), black)
	top := lineH + 2*pad
	for i, im := range imgs {
		x := pad + i*(cellW+pad)
		sub := out.SubImage(image.Rect(x, top, x+cellW, top+cellH)).(*image.RGBA)
		scaleInto(context.Background(), sub, im, scale)
		if i < len(labels) {
			text(out, x, top+cellH+lineH+2, labels[i], grey)
		}
		if i < len(relevant) && relevant[i] {
			rect(out, x-4, top-4, x+cellW+3, top+cellH+3, 4, GroundTruth)
			text(out, x, top+cellH+2*lineH+2, "ground truth", GroundTruth)
		}
	}
	return out
}

// SavePNG writes img as a PNG file atomically.
func SavePNG(path string, img image.Image) error {
	return SavePNGContext(context.Background(), path, img)
}

// SavePNGContext is SavePNG checking ctx at every write of the encoder:
// once ctx is done it stops, leaves no file and returns ctx's error.
func SavePNGContext(ctx context.Context, path string, img image.Image) error {
	return atomicfile.Write(path, func(w io.Writer) error { return png.Encode(ctxWriter{ctx, w}, img) })
}

// ctxWriter fails its writes once ctx is done.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// LoadPNG reads a PNG image.
func LoadPNG(path string) (image.Image, error) {
	f, err := infile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return img, nil
}

// scaleInto copies src into dst (at dst's origin) enlarged by scale,
// nearest neighbour, so that pixels stay crisp. It checks ctx before each
// row and returns ctx's error once ctx is done.
func scaleInto(ctx context.Context, dst *image.RGBA, src image.Image, scale int) error {
	b := src.Bounds()
	o := dst.Bounds().Min
	for y := 0; y < b.Dy()*scale && o.Y+y < dst.Bounds().Max.Y; y++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		for x := 0; x < b.Dx()*scale && o.X+x < dst.Bounds().Max.X; x++ {
			dst.Set(o.X+x, o.Y+y, src.At(b.Min.X+x/scale, b.Min.Y+y/scale))
		}
	}
	return nil
}

// rect outlines the box (x1, y1)-(x2, y2) with lines thick pixels wide.
// Only the part inside img is visited: the work is bounded by img's size
// whatever the coordinates.
func rect(img *image.RGBA, x1, y1, x2, y2, thick int, c color.Color) {
	b := img.Bounds()
	xa, xb := max(x1, b.Min.X), min(x2, b.Max.X-1)
	ya, yb := max(y1, b.Min.Y), min(y2, b.Max.Y-1)
	for t := 0; t < thick; t++ {
		for x := xa; x <= xb; x++ {
			img.Set(x, y1+t, c)
			img.Set(x, y2-t, c)
		}
		for y := ya; y <= yb; y++ {
			img.Set(x1+t, y, c)
			img.Set(x2-t, y, c)
		}
	}
}

// label writes s on a white background box for legibility.
func label(img *image.RGBA, x, y int, s string, c color.Color) {
	w := len(s) * 7
	draw.Draw(img, image.Rect(x-1, y-lineH+3, x+w+1, y+3), &image.Uniform{color.RGBA{255, 255, 255, 220}}, image.Point{}, draw.Over)
	text(img, x, y, s, c)
}

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	for i, line := range strings.Split(s, "\n") {
		d := &font.Drawer{Dst: img, Src: &image.Uniform{c}, Face: basicfont.Face7x13, Dot: fixed.P(x, y+i*lineH)}
		d.DrawString(line)
	}
}

// wrap breaks s into lines of at most n characters at spaces.
func wrap(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	var b strings.Builder
	col := 0
	for i, w := range strings.Fields(s) {
		if i > 0 {
			if col+1+len(w) > n {
				b.WriteByte('\n')
				col = 0
			} else {
				b.WriteByte(' ')
				col++
			}
		}
		b.WriteString(w)
		col += len(w)
	}
	return b.String()
}

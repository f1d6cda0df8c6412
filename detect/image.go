package detect

import (
	"image"

	"golang.org/x/image/draw"
)

// Prepare scales img to InputSize x InputSize (stretching it, as the
// reference pipeline resizes without keeping the aspect ratio) with a
// bilinear filter and returns its pixels as HWC float32 RGB values 0..255,
// the input Run takes. A box from Run maps back to img by scaling x by
// width/InputSize and y by height/InputSize.
func Prepare(img image.Image) []float32 {
	dst := image.NewRGBA(image.Rect(0, 0, InputSize, InputSize))
	draw.BiLinear.Scale(dst, dst.Bounds(), img, img.Bounds(), draw.Src, nil)
	out := make([]float32, InputSize*InputSize*3)
	for p := 0; p < InputSize*InputSize; p++ {
		out[3*p] = float32(dst.Pix[4*p])
		out[3*p+1] = float32(dst.Pix[4*p+1])
		out[3*p+2] = float32(dst.Pix[4*p+2])
	}
	return out
}

package server

import (
	"bytes"
	"container/list"
	"context"
	"image"
	"image/color"
	_ "image/jpeg" // image.DecodeConfig reads the headers of uploads
	_ "image/png"
	"math"
	"sync"
)

// DefaultUploadPixelBudget is the default Options.UploadPixelBudget: 64
// million pixels, one photo at the largest size xmr decodes (50
// megapixels, extract.DefaultMaxPixels) or five 12-megapixel phone
// photos at once. The budget counts pixels of 8-bit colour, 7 bytes each
// while decoded (the decoded image, at most 4 bytes a pixel for an 8-bit
// PNG or JPEG, and the detector's packed RGB copy, 3), so it keeps the
// decoded pixels under about 450 MB. An image whose format needs more
// than 7 bytes a pixel is charged for the bytes it needs (see
// decodeBytesPerPixel): a 16-bit PNG, 11 bytes a pixel, is charged 11/7
// of its pixels. Several of the largest photos at once is what the
// budget is for: 20 uploads of a 7000x7000 PNG, two decoded at a time
// (one search turn per CPU on 2 CPUs), took 1.76 GB of RSS; with this
// budget, 0.6 GB.
const DefaultUploadPixelBudget = 64_000_000

// pixelBudget is a weighted semaphore of decoded pixels shared by the
// uploads in flight: each holds its image's pixels while it is decoded.
// Waiters are served in arrival order, so a large image is not passed
// over for ever by a stream of small ones; a waiter gives up when its
// context is done.
type pixelBudget struct {
	size int64

	mu      sync.Mutex
	held    int64
	peak    int64     // the most ever held at once, for the tests
	waiters list.List // of *pixelWaiter, in arrival order
}

type pixelWaiter struct {
	n     int64
	ready chan struct{} // closed once the pixels are held for the waiter
}

func newPixelBudget(size int64) *pixelBudget { return &pixelBudget{size: size} }

// acquire holds n pixels (at most b.size), waiting for them as long as ctx
// allows; it returns ctx's error, holding nothing, if ctx is done first.
func (b *pixelBudget) acquire(ctx context.Context, n int64) error {
	b.mu.Lock()
	if b.waiters.Len() == 0 && n <= b.size-b.held { // held <= size: no sum to wrap
		b.take(n)
		b.mu.Unlock()
		return nil
	}
	w := &pixelWaiter{n: n, ready: make(chan struct{})}
	e := b.waiters.PushBack(w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready:
		// Granted while ctx ended: give the pixels back.
		b.held -= n
	default:
		b.waiters.Remove(e)
	}
	// Either way the waiters behind it may now fit.
	b.grant()
	return ctx.Err()
}

// release gives back n pixels that acquire held.
func (b *pixelBudget) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held -= n
	b.grant()
}

// inUse returns the pixels held now.
func (b *pixelBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// highWater returns the most pixels ever held at once.
func (b *pixelBudget) highWater() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// take holds n pixels; b.mu is held.
func (b *pixelBudget) take(n int64) {
	b.held += n
	b.peak = max(b.peak, b.held)
}

// grant hands pixels to the waiters at the front that fit; b.mu is held.
func (b *pixelBudget) grant() {
	for e := b.waiters.Front(); e != nil; e = b.waiters.Front() {
		w := e.Value.(*pixelWaiter)
		if w.n > b.size-b.held {
			return
		}
		b.take(w.n)
		b.waiters.Remove(e)
		close(w.ready)
	}
}

// budgetBytesPerPixel is what the budget counts a pixel of 8-bit colour
// as: 4 bytes of decoded image and 3 of the detector's RGB copy.
const budgetBytesPerPixel = 7

// rgbBytesPerPixel is the detector's packed RGB copy of the decoded image
// (extract's toRGB), the same for every format. The detector's input
// itself, 512x512 float32 RGB, is a fixed 3 MB per upload decoding, not
// counted here.
const rgbBytesPerPixel = 3

// decodeBytesPerPixel returns the bytes a pixel takes in the image that
// Go's decoders return for a colour model (image.DecodeConfig's, read
// from the PNG header's bit depth and colour type, or the JPEG's
// components): 8 for 16-bit colour, 2 for 16-bit grey, 4 for 8-bit
// colour, 1 for 8-bit grey or a palette, 3 at most for a YCbCr JPEG (1.5
// with 4:2:0 chroma), 8 for a CMYK JPEG (its four planes and the CMYK
// image), and 8 for anything else.
func decodeBytesPerPixel(m color.Model) int64 {
	switch m {
	case color.RGBA64Model, color.NRGBA64Model:
		return 8
	case color.Gray16Model:
		return 2
	case color.RGBAModel, color.NRGBAModel:
		return 4
	case color.GrayModel:
		return 1
	case color.YCbCrModel:
		return 3
	case color.CMYKModel:
		return 8
	}
	if _, ok := m.(color.Palette); ok {
		return 1
	}
	return 8
}

// decodeCost is what an upload of w x h pixels of colour model m holds
// from the budget while it is decoded: its pixels, or, where its format
// needs more than budgetBytesPerPixel bytes a pixel, the pixels of 8-bit
// colour that take as many bytes (rounded up). It also returns the bytes
// a pixel takes. It saturates at math.MaxInt64.
func decodeCost(w, h int, m color.Model) (cost, bytesPerPixel int64) {
	px := int64(w) * int64(h)
	bytesPerPixel = decodeBytesPerPixel(m) + rgbBytesPerPixel
	if bytesPerPixel <= budgetBytesPerPixel {
		return px, bytesPerPixel
	}
	if px > math.MaxInt64/bytesPerPixel {
		return math.MaxInt64, bytesPerPixel
	}
	return (px*bytesPerPixel + budgetBytesPerPixel - 1) / budgetBytesPerPixel, bytesPerPixel
}

// declaredSize returns the width, height and colour model that an
// image's header declares, read without decoding a pixel; ok is false
// when the header is not that of a JPEG or PNG image, or does not parse.
func declaredSize(img []byte) (w, h int, m color.Model, ok bool) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(img))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0, nil, false
	}
	return cfg.Width, cfg.Height, cfg.ColorModel, true
}

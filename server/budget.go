package server

import (
	"bytes"
	"container/list"
	"context"
	"image"
	_ "image/jpeg" // image.DecodeConfig reads the headers of uploads
	_ "image/png"
	"sync"
)

// DefaultUploadPixelBudget is the default Options.UploadPixelBudget: 64
// million pixels, one photo at the largest size xmr decodes (50
// megapixels, extract.DefaultMaxPixels) or five 12-megapixel phone
// photos at once. Decoding holds about 7 bytes a pixel (the decoded
// image, 4 for an 8-bit PNG or JPEG, and the detector's packed RGB copy,
// 3), so the budget keeps the decoded pixels under about 450 MB. Several
// of the largest photos at once is what the budget is for: 20 uploads of
// a 7000x7000 PNG, two decoded at a time (one search turn per CPU on 2
// CPUs), took 1.76 GB of RSS; with this budget, 0.6 GB.
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
	if b.waiters.Len() == 0 && b.held+n <= b.size {
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
		if b.held+w.n > b.size {
			return
		}
		b.take(w.n)
		b.waiters.Remove(e)
		close(w.ready)
	}
}

// declaredSize returns the width and height that an image's header
// declares, read without decoding a pixel; ok is false when the header is
// not that of a JPEG or PNG image, or does not parse.
func declaredSize(img []byte) (w, h int, ok bool) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(img))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0, false
	}
	return cfg.Width, cfg.Height, true
}

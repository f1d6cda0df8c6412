package extract

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"runtime"
	"strings"
	"testing"
	"time"
)

// scanRepeatJPEG returns a w x h baseline JPEG whose one scan (its SOS
// header and entropy-coded data) is repeated n times in all before EOI:
// the shape of a hostile progressive JPEG that repeats its last scan, each
// repeat a full pass of the decoder over the image.
func scanRepeatJPEG(t testing.TB, w, h, n int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x * 7), uint8(y * 13), uint8(x ^ y), 255})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	// Walk the header segments to the SOS.
	i := 2
	for b[i] == 0xFF && b[i+1] != 0xDA {
		i += 2 + (int(b[i+2])<<8 | int(b[i+3]))
	}
	if b[i] != 0xFF || b[i+1] != 0xDA || !bytes.HasSuffix(b, []byte{0xFF, 0xD9}) {
		t.Fatalf("unexpected layout of Go's JPEG encoding at byte %d", i)
	}
	scan := b[i : len(b)-2]
	out := append([]byte(nil), b[:i]...)
	for range n {
		out = append(out, scan...)
	}
	return append(out, 0xFF, 0xD9)
}

// TestJPEGScanLimit: a JPEG with more scans than MaxJPEGScans, within
// every size and pixel limit, is refused before it is decoded, quickly
// and naming the file; one at the limit decodes.
func TestJPEGScanLimit(t *testing.T) {
	hostile := scanRepeatJPEG(t, 64, 48, 5000)
	if n := jpegScans(hostile, 1<<20); n != 5000 {
		t.Errorf("the marker walk counted %d scans, want 5000", n)
	}
	start := time.Now()
	_, err := Decode(hostile, "hostile.jpg", Limits{})
	if !errors.Is(err, ErrTooManyScans) || !strings.Contains(err.Error(), "hostile.jpg") {
		t.Errorf("decoding a JPEG of 5000 scans: %v, want ErrTooManyScans naming hostile.jpg", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refusing it took %v", d)
	}
	ok := scanRepeatJPEG(t, 64, 48, MaxJPEGScans)
	if n := jpegScans(ok, 1<<20); n != MaxJPEGScans {
		t.Errorf("the marker walk counted %d scans, want %d", n, MaxJPEGScans)
	}
	if p, err := Decode(ok, "ok.jpg", Limits{}); err != nil || p.Width != 64 || p.Height != 48 {
		t.Errorf("a JPEG of %d scans: %v", MaxJPEGScans, err)
	}
	// Stuffed 0xFF00 bytes and RSTn markers in the entropy-coded data
	// are not markers; fill bytes before a marker are skipped.
	seg := []byte{0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x02, 1, 0xFF, 0x00, 2, 0xFF, 0xD3, 3, 0xFF, 0xFF, 0xDA, 0x00, 0x02, 4, 0xFF, 0xD9}
	if n := jpegScans(seg, 10); n != 2 {
		t.Errorf("the marker walk counted %d scans in %x, want 2", n, seg)
	}
	// A walk stops where the file ends or a length does not parse.
	for _, b := range [][]byte{nil, {0xFF, 0xD8}, {0xFF, 0xD8, 0xFF, 0xDA}, {0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x00}, {0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x02, 0xFF}, {0xFF, 0xD8, 0x12}} {
		if n := jpegScans(b, 10); n > 1 {
			t.Errorf("%x: %d scans", b, n)
		}
	}
	// Stray bytes where a marker is due do not hide the scans after them
	// (Go's decoder skips them): a byte after each scan of the hostile
	// file.
	marked := bytes.ReplaceAll(hostile, []byte{0xFF, 0xDA}, []byte{0x12, 0xFF, 0xDA})
	if n := jpegScans(marked, 1<<20); n != 5000 {
		t.Errorf("with a stray byte before each scan, the marker walk counted %d scans, want 5000", n)
	}
	if _, err := Decode(marked, "stray.jpg", Limits{}); !errors.Is(err, ErrTooManyScans) {
		t.Errorf("decoding it: %v, want ErrTooManyScans", err)
	}
}

// TestDecodeContextCancelled: a decode whose context is cancelled returns
// promptly with the context's error, whatever the decode still has to do
// (here a JPEG of MaxJPEGScans full scans of 1024x1024 pixels).
func TestDecodeContextCancelled(t *testing.T) {
	b := scanRepeatJPEG(t, 1024, 1024, MaxJPEGScans)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := DecodeContext(ctx, b, "slow.jpg", Limits{}); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "slow.jpg") {
		t.Errorf("decoding under a cancelled context: %v, want context.Canceled naming the file", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	cancelledAt := make(chan time.Time, 1)
	time.AfterFunc(50*time.Millisecond, func() { cancelledAt <- time.Now(); cancel() })
	_, _, err := DecodeUprightContext(ctx, b, "slow.jpg", Limits{})
	end := time.Now()
	if err == nil {
		t.Skip("the decode finished before the context was cancelled")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("decoding while the context is cancelled: %v, want context.Canceled", err)
	}
	if d := end.Sub(<-cancelledAt); d > 2*time.Second {
		t.Errorf("the decode returned %v after its context was cancelled", d)
	}
}

// TestResizeTallStrip: a tall strip of pixels, 1 x 50,000 (a PNG of a
// few KB), is resized without an intermediate image of h x 512 pixels
// (300 MB; 300 GB at 50 million pixels), and the same as the horizontal
// pass first would make it.
func TestResizeTallStrip(t *testing.T) {
	const w, h = 1, 50_000
	src := make([]uint8, w*h*3)
	for i := range src {
		src[i] = uint8(i * 31)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := resizeArea(src, w, h, 512, 512)
	runtime.ReadMemStats(&after)
	if a := after.TotalAlloc - before.TotalAlloc; a > 64<<20 {
		t.Errorf("resizing a %dx%d strip allocated %d MB", w, h, a>>20)
	}
	if len(got) != 512*512*3 {
		t.Fatalf("resized to %d values, want 512x512x3", len(got))
	}
	// The same result as the horizontal pass first, on a strip small
	// enough for it.
	const sh = 5_000
	want := resizeArea(src[:w*sh*3], w, sh, 512, 512)
	got = resizeAreaVertical(src[:w*sh*3], w, sh, 512, 512, areaWeights(w, 512), areaWeights(sh, 512))
	for i := range want {
		if d := got[i] - want[i]; d > 1e-2 || d < -1e-2 {
			t.Fatalf("value %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// TestToRGB16: 16-bit images are converted as every other image is
// (over white), through their own fast path.
func TestToRGB16(t *testing.T) {
	r := image.Rect(0, 0, 7, 5)
	imgs := []image.Image{image.NewNRGBA64(r), image.NewRGBA64(r), image.NewGray16(r)}
	for _, img := range imgs {
		m := img.(draw16)
		for y := range 5 {
			for x := range 7 {
				v := uint16(x*9000 + y*3001)
				m.Set(x, y, color.NRGBA64{v, v / 2, v / 3, uint16(65535 - x*4000)})
			}
		}
		got := toRGB(img)
		for y := range 5 {
			for x := range 7 {
				cr, cg, cb, ca := img.At(x, y).RGBA()
				wh := 0xFFFF - ca
				want := []uint8{uint8((cr + wh) >> 8), uint8((cg + wh) >> 8), uint8((cb + wh) >> 8)}
				if o := (y*7 + x) * 3; !bytes.Equal(got[o:o+3], want) {
					t.Errorf("%T at %d,%d: %v, want %v", img, x, y, got[o:o+3], want)
				}
			}
		}
	}
}

type draw16 interface {
	image.Image
	Set(x, y int, c color.Color)
}

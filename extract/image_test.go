package extract

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xmr-project/xmr/detect"
)

// halves returns a w x h image, left half a, right half b.
func halves(w, h int, a, b color.RGBA) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			if x < w/2 {
				img.Set(x, y, a)
			} else {
				img.Set(x, y, b)
			}
		}
	}
	return img
}

func encodeJPEG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// withOrientation inserts an APP1 Exif segment with orientation o right
// after the JPEG's SOI marker, in byte order bo ("II" or "MM").
func withOrientation(jpg []byte, o uint16, bo string) []byte {
	var order binary.AppendByteOrder = binary.LittleEndian
	if bo == "MM" {
		order = binary.BigEndian
	}
	tiff := []byte(bo)
	tiff = order.AppendUint16(tiff, 42)
	tiff = order.AppendUint32(tiff, 8)
	tiff = order.AppendUint16(tiff, 1) // one entry
	tiff = order.AppendUint16(tiff, 0x0112)
	tiff = order.AppendUint16(tiff, 3)
	tiff = order.AppendUint32(tiff, 1)
	tiff = order.AppendUint16(tiff, o)
	tiff = order.AppendUint16(tiff, 0)
	tiff = order.AppendUint32(tiff, 0) // no next IFD
	seg := append([]byte("Exif\x00\x00"), tiff...)
	out := []byte{0xFF, 0xD8, 0xFF, 0xE1}
	out = binary.BigEndian.AppendUint16(out, uint16(len(seg)+2))
	out = append(out, seg...)
	return append(out, jpg[2:]...)
}

// pngHeader returns a PNG signature and IHDR chunk declaring w x h RGB
// pixels, and nothing else.
func pngHeader(w, h uint32) []byte {
	b := []byte("\x89PNG\r\n\x1a\n")
	ihdr := []byte("IHDR")
	ihdr = binary.BigEndian.AppendUint32(ihdr, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 2, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, 13)
	b = append(b, ihdr...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(ihdr))
}

// at returns the RGB of pixel (x, y) of a picture.
func at(p *Picture, x, y int) [3]float32 {
	o := (y*detect.InputSize + x) * 3
	return [3]float32{p.RGB[o], p.RGB[o+1], p.RGB[o+2]}
}

func near(a, b [3]float32, tol float32) bool {
	for i := range a {
		if d := a[i] - b[i]; d > tol || d < -tol {
			return false
		}
	}
	return true
}

func TestDecodePNG(t *testing.T) {
	var buf bytes.Buffer
	if err := png.Encode(&buf, halves(100, 50, color.RGBA{255, 0, 0, 255}, color.RGBA{0, 0, 255, 255})); err != nil {
		t.Fatal(err)
	}
	p, err := Decode(buf.Bytes(), "x.png", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Width != 100 || p.Height != 50 || len(p.RGB) != detect.InputSize*detect.InputSize*3 {
		t.Fatalf("size %dx%d, %d values", p.Width, p.Height, len(p.RGB))
	}
	if c := at(p, 100, 300); !near(c, [3]float32{255, 0, 0}, 0.5) {
		t.Errorf("left pixel %v, want red", c)
	}
	if c := at(p, 400, 10); !near(c, [3]float32{0, 0, 255}, 0.5) {
		t.Errorf("right pixel %v, want blue", c)
	}
}

func TestDecodeOrientation(t *testing.T) {
	red, blue := [3]float32{255, 0, 0}, [3]float32{0, 0, 255}
	src := encodeJPEG(t, halves(64, 32, color.RGBA{255, 0, 0, 255}, color.RGBA{0, 0, 255, 255}))
	// Where red is (top, bottom, left, right of the upright picture) and
	// its size, for each orientation.
	tests := []struct {
		o      uint16
		bo     string
		w, h   int
		redAt  [2]int
		blueAt [2]int
	}{
		{1, "II", 64, 32, [2]int{100, 256}, [2]int{400, 256}},
		{2, "MM", 64, 32, [2]int{400, 256}, [2]int{100, 256}},
		{3, "II", 64, 32, [2]int{400, 256}, [2]int{100, 256}},
		{4, "II", 64, 32, [2]int{100, 256}, [2]int{400, 256}},
		{5, "MM", 32, 64, [2]int{256, 100}, [2]int{256, 400}},
		{6, "II", 32, 64, [2]int{256, 100}, [2]int{256, 400}},
		{7, "II", 32, 64, [2]int{256, 400}, [2]int{256, 100}},
		{8, "MM", 32, 64, [2]int{256, 400}, [2]int{256, 100}},
	}
	for _, tc := range tests {
		b := withOrientation(src, tc.o, tc.bo)
		if got := JPEGOrientation(b); got != int(tc.o) {
			t.Errorf("orientation %d: read %d", tc.o, got)
		}
		p, err := Decode(b, "x.jpg", Limits{})
		if err != nil {
			t.Fatalf("orientation %d: %v", tc.o, err)
		}
		if p.Width != tc.w || p.Height != tc.h {
			t.Errorf("orientation %d: size %dx%d, want %dx%d", tc.o, p.Width, p.Height, tc.w, tc.h)
		}
		if c := at(p, tc.redAt[0], tc.redAt[1]); !near(c, red, 12) {
			t.Errorf("orientation %d: pixel %v is %v, want red", tc.o, tc.redAt, c)
		}
		if c := at(p, tc.blueAt[0], tc.blueAt[1]); !near(c, blue, 12) {
			t.Errorf("orientation %d: pixel %v is %v, want blue", tc.o, tc.blueAt, c)
		}
	}
}

// TestUpright checks that the upright image DecodeUpright returns is the
// one the detector's input was made of.
func TestUpright(t *testing.T) {
	src := image.NewRGBA(image.Rect(0, 0, 48, 20))
	for y := range 20 {
		for x := range 48 {
			src.Set(x, y, color.RGBA{uint8(5 * x), uint8(12 * y), 77, 255})
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, src)
	for o := 1; o <= 8; o++ {
		up := Upright(src, o)
		want := Prepare(up, 1)
		got := Prepare(src, o)
		if got.Width != want.Width || got.Height != want.Height || up.Bounds().Dx() != got.Width {
			t.Fatalf("orientation %d: sizes %dx%d, %dx%d", o, got.Width, got.Height, want.Width, want.Height)
		}
		for i := 0; i < len(got.RGB); i += 997 {
			if d := got.RGB[i] - want.RGB[i]; d > 1e-3 || d < -1e-3 {
				t.Fatalf("orientation %d: value %d is %v, upright %v", o, i, got.RGB[i], want.RGB[i])
			}
		}
	}
	jpg := withOrientation(encodeJPEG(t, src), 6, "II")
	pic, img, err := DecodeUpright(jpg, "x.jpg", Limits{})
	if err != nil || img.Bounds().Dx() != 20 || img.Bounds().Dy() != 48 || pic.Width != 20 {
		t.Errorf("DecodeUpright: %v, %v", img.Bounds(), err)
	}
	// LoadUpright (xmr align's drawing) decodes a file the same way, with
	// the same limits.
	path := filepath.Join(t.TempDir(), "x.jpg")
	if err := os.WriteFile(path, jpg, 0o644); err != nil {
		t.Fatal(err)
	}
	up, err := LoadUpright(path, Limits{})
	if err != nil || up.Bounds() != img.Bounds() || up.At(3, 40) != img.At(3, 40) {
		t.Errorf("LoadUpright: %v, %v", up, err)
	}
	if _, err := LoadUpright(path, Limits{MaxPixels: 48*20 - 1}); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), path) {
		t.Errorf("LoadUpright over MaxPixels: %v", err)
	}
}

func TestJPEGOrientationMalformed(t *testing.T) {
	good := withOrientation(encodeJPEG(t, halves(8, 8, color.RGBA{A: 255}, color.RGBA{A: 255})), 6, "II")
	tests := map[string][]byte{
		"empty":          nil,
		"png":            pngHeader(4, 4),
		"cut in segment": good[:20],
		"cut in header":  good[:5],
		"bad tiff magic": append(append([]byte{}, good[:12]...), append([]byte("XX"), good[14:]...)...),
		"value 9":        withOrientation(encodeJPEG(t, halves(8, 8, color.RGBA{A: 255}, color.RGBA{A: 255})), 9, "II"),
		"no exif":        encodeJPEG(t, halves(8, 8, color.RGBA{A: 255}, color.RGBA{A: 255})),
	}
	for name, b := range tests {
		if got := JPEGOrientation(b); got != 1 {
			t.Errorf("%s: orientation %d, want 1", name, got)
		}
	}
	// The first Exif segment's valid tag wins over a later bad one.
	if got := JPEGOrientation(withOrientation(good, 9, "II")); got != 6 {
		t.Errorf("bad tag before a good one: %d, want 6", got)
	}
}

func TestDecodeRefuses(t *testing.T) {
	jpg := encodeJPEG(t, halves(300, 200, color.RGBA{255, 0, 0, 255}, color.RGBA{0, 255, 0, 255}))
	tests := []struct {
		name   string
		b      []byte
		lim    Limits
		want   string
		tooBig bool
	}{
		{"bomb", pngHeader(100000, 100000), Limits{}, "declares 100000x100000 = 10000000000 pixels", true},
		{"over a small pixel limit", jpg, Limits{MaxPixels: 1000}, "300x200", true},
		{"over the byte limit", jpg, Limits{MaxBytes: 100}, "bytes, the limit is 100", true},
		{"truncated jpeg", jpg[:len(jpg)/2], Limits{}, "corrupt or truncated JPEG", false},
		{"jpeg header only", jpg[:4], Limits{}, "corrupt JPEG header", false},
		{"png without data", pngHeader(10, 10), Limits{}, "corrupt or truncated PNG", false},
		{"text", []byte("hello, world\n"), Limits{}, "not a JPEG or PNG image (it starts with text, not with an image's signature)", false},
		{"empty", nil, Limits{}, "the file is empty", false},
		{"gif", []byte("GIF89a\x01\x00\x01\x00"), Limits{}, "not a JPEG or PNG image (it is a GIF image: convert it to JPEG or PNG)", false},
		{"webp", []byte("RIFF\x10\x00\x00\x00WEBPVP8 "), Limits{}, "it is a WebP image", false},
		{"heic", []byte("\x00\x00\x00\x18ftypheic\x00\x00"), Limits{}, "it is a HEIF or AVIF image", false},
		{"binary", []byte("\x7fELF\x02\x01\x01\x00"), Limits{}, "its first bytes are no image format's signature", false},
		{"text cut in a character", []byte("caf\xc3"), Limits{}, "it starts with text", false},
	}
	for _, tc := range tests {
		_, err := Decode(tc.b, "photos/x.jpg", tc.lim)
		if err == nil {
			t.Errorf("%s: decoded", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), "photos/x.jpg") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q, want the file and %q", tc.name, err, tc.want)
		}
		if errors.Is(err, ErrTooLarge) != tc.tooBig {
			t.Errorf("%s: errors.Is(ErrTooLarge) = %v", tc.name, !tc.tooBig)
		}
	}
}

// TestDecodeNeverEchoesTheFile: the error about a file that is no image
// says what it is not, never what it holds (a Karpathy file or a folder
// may name /etc/passwd: its first bytes were printed, "root:x:0").
func TestDecodeNeverEchoesTheFile(t *testing.T) {
	for _, b := range []string{"root:x:0:0:root:/root:/bin/bash\n", "secret-token-1234", "pw", "\x00\x01secret", "PK\x03\x04secret.txt"} {
		_, err := Decode([]byte(b), "photos/x.jpg", Limits{})
		if err == nil {
			t.Fatalf("%q decoded", b)
		}
		for _, frag := range []string{b[:2], "root", "secret", `\x`} {
			if strings.Contains(err.Error(), frag) {
				t.Errorf("the error about %q holds %q: %v", b, frag, err)
			}
		}
	}
}

// TestReadLimitWraps: a byte limit of the largest int64 reads the whole
// file (one past it wrapped to a negative count: nothing was read, and
// every upload was "empty"); one less too.
func TestReadLimitWraps(t *testing.T) {
	jpg := encodeJPEG(t, halves(40, 30, color.RGBA{255, 0, 0, 255}, color.RGBA{0, 255, 0, 255}))
	p := filepath.Join(t.TempDir(), "x.jpg")
	if err := os.WriteFile(p, jpg, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, max := range []int64{math.MaxInt64, math.MaxInt64 - 1} {
		lim := Limits{MaxBytes: max}
		b, err := ReadLimited(bytes.NewReader(jpg), "upload", lim)
		if err != nil || len(b) != len(jpg) {
			t.Errorf("ReadLimited with MaxBytes %d: %d bytes, %v", max, len(b), err)
		}
		if b, err := ReadFile(p, lim); err != nil || len(b) != len(jpg) {
			t.Errorf("ReadFile with MaxBytes %d: %d bytes, %v", max, len(b), err)
		}
		if _, err := Decode(jpg, "upload", lim); err != nil {
			t.Errorf("Decode with MaxBytes %d: %v", max, err)
		}
	}
	// The limit itself still holds.
	if _, err := ReadLimited(bytes.NewReader(jpg), "upload", Limits{MaxBytes: int64(len(jpg)) - 1}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("one byte over: %v", err)
	}
}

func TestLoadFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadFile(filepath.Join(dir, "none.jpg"), Limits{}); err == nil || !strings.Contains(err.Error(), "none.jpg") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := LoadFile(dir, Limits{}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
	big := filepath.Join(dir, "big.png")
	if err := os.WriteFile(big, make([]byte, 2000), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(big, Limits{MaxBytes: 1000}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("big file: %v", err)
	}
}

// TestReadFileFIFO: a FIFO named like a photo, with no writer, is refused
// at once as not a regular file; it used to block in open(2) for good.
func TestReadFileFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "photo.jpg")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ReadFile(fifo, Limits{})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "photo.jpg: not a regular file (a FIFO)") {
			t.Errorf("ReadFile of a FIFO: %v, want it refused as not a regular file", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ReadFile of a FIFO with no writer still waits after 30 s")
	}
}

func TestResizeArea(t *testing.T) {
	// A 4x1 ramp shrunk to 2x1 averages pairs; a 2x1 enlarged to 4x1
	// interpolates between the pixel centres.
	src := []uint8{0, 0, 0, 100, 100, 100, 200, 200, 200, 250, 250, 250}
	got := resizeArea(src, 4, 1, 2, 1)
	if got[0] != 50 || got[3] != 225 {
		t.Errorf("shrink: %v", got)
	}
	up := resizeArea([]uint8{0, 0, 0, 100, 100, 100}, 2, 1, 4, 1)
	want := []float32{0, 25, 75, 100}
	for i, w := range want {
		if d := up[3*i] - w; d > 1e-4 || d < -1e-4 {
			t.Errorf("enlarge: pixel %d is %v, want %v", i, up[3*i], w)
		}
	}
}

func FuzzJPEGOrientation(f *testing.F) {
	jpg := encodeJPEG(f, halves(8, 8, color.RGBA{A: 255}, color.RGBA{A: 255}))
	f.Add(withOrientation(jpg, 6, "II"))
	f.Add(withOrientation(jpg, 3, "MM"))
	f.Add(jpg)
	f.Fuzz(func(t *testing.T, b []byte) {
		if o := JPEGOrientation(b); o < 1 || o > 8 {
			t.Fatalf("orientation %d", o)
		}
	})
}

func FuzzDecode(f *testing.F) {
	jpg := encodeJPEG(f, halves(16, 8, color.RGBA{255, 0, 0, 255}, color.RGBA{0, 0, 255, 255}))
	f.Add(withOrientation(jpg, 6, "II"))
	f.Add(pngHeader(100000, 100000))
	var buf bytes.Buffer
	png.Encode(&buf, halves(8, 8, color.RGBA{A: 255}, color.RGBA{A: 255}))
	f.Add(buf.Bytes())
	// The scan-repeat JPEG: one scan more than MaxJPEGScans.
	f.Add(scanRepeatJPEG(f, 16, 8, MaxJPEGScans+1))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b, "fuzz", Limits{MaxPixels: 1 << 16})
		if err == nil && (p.Width <= 0 || p.Height <= 0 || len(p.RGB) != detect.InputSize*detect.InputSize*3) {
			t.Fatalf("decoded %dx%d with %d values", p.Width, p.Height, len(p.RGB))
		}
	})
}

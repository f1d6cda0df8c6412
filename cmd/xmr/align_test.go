package main

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/npy"
)

// jpegWithOrientation encodes img as a JPEG with an APP1 Exif segment
// giving orientation o (little-endian TIFF), right after the SOI marker.
func jpegWithOrientation(t *testing.T, img image.Image, o uint16) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	tiff := []byte("II")
	tiff = le.AppendUint16(tiff, 42)
	tiff = le.AppendUint32(tiff, 8)
	tiff = le.AppendUint16(tiff, 1) // one entry: Orientation, SHORT, 1 value
	tiff = le.AppendUint16(tiff, 0x0112)
	tiff = le.AppendUint16(tiff, 3)
	tiff = le.AppendUint32(tiff, 1)
	tiff = le.AppendUint16(tiff, o)
	tiff = le.AppendUint16(tiff, 0)
	tiff = le.AppendUint32(tiff, 0) // no next IFD
	seg := append([]byte("Exif\x00\x00"), tiff...)
	out := binary.BigEndian.AppendUint16([]byte{0xFF, 0xD8, 0xFF, 0xE1}, uint16(len(seg)+2))
	out = append(out, seg...)
	return append(out, buf.Bytes()[2:]...)
}

// tinyAlignModel saves an untrained TERAN of 16-d region features in dir.
func tinyAlignModel(t *testing.T, dir string) string {
	t.Helper()
	m := tinyTERAN(t, []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "red", "blue", "circle", "square"})
	ck := filepath.Join(dir, "tiny.safetensors")
	if err := model.Save(ck, m, nil, nil); err != nil {
		t.Fatal(err)
	}
	return ck
}

// TestAlignImageOrientation draws an alignment on a JPEG stored 64 x 32
// (left half red, right half blue) whose EXIF orientation 6 says to turn
// it clockwise: xmr align decodes it as xmr extract does, so the drawing
// shows it upright, 32 x 64 with red on top; and --max-pixels, the bomb
// limit of extract, refuses it before decoding.
func TestAlignImageOrientation(t *testing.T) {
	dir := t.TempDir()
	ck := tinyAlignModel(t, dir)
	stored := image.NewRGBA(image.Rect(0, 0, 64, 32))
	for y := range 32 {
		for x := range 64 {
			c := color.RGBA{255, 0, 0, 255}
			if x >= 32 {
				c = color.RGBA{0, 0, 255, 255}
			}
			stored.Set(x, y, c)
		}
	}
	photo := filepath.Join(dir, "photo.jpg")
	if err := os.WriteFile(photo, jpegWithOrientation(t, stored, 6), 0o644); err != nil {
		t.Fatal(err)
	}
	feat, boxes := filepath.Join(dir, "f.npy"), filepath.Join(dir, "b.npy")
	if err := npy.WriteFile(feat, []int{2, 16}, make([]float32, 32)); err != nil {
		t.Fatal(err)
	}
	// Both regions in the bottom-right corner of the upright image, away
	// from the pixels looked at below (and beyond the stored image's
	// height: within the image only once it is upright).
	if err := npy.WriteFile(boxes, []int{2, 4}, []float32{26, 56, 30, 62, 27, 57, 31, 63}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "align.png")
	args := []string{"align", "--checkpoint", ck, "--features", feat, "--boxes", boxes, "--image", photo, "--text", "a red square", "--scale", "1", "--out", out}
	if stdout, stderr, code := run(t, args...); code != 0 {
		t.Fatalf("align: exit %d: %s%s", code, stdout, stderr)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	drawn, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	isRed := func(c color.Color) bool { r, g, b, _ := c.RGBA(); return r > 0xC000 && g < 0x4000 && b < 0x4000 }
	isBlue := func(c color.Color) bool { r, g, b, _ := c.RGBA(); return b > 0xC000 && r < 0x4000 && g < 0x4000 }
	// Upright, (16, 16) is in the red top half and (16, 48) in the blue
	// bottom one; drawn as stored, (16, 16) would be red but (16, 48)
	// below the 32-pixel-high image, and (40, 16) blue.
	for _, p := range []struct {
		x, y int
		want string
		ok   func(color.Color) bool
	}{{16, 16, "red", isRed}, {16, 48, "blue", isBlue}, {8, 60, "blue", isBlue}} {
		if c := drawn.At(p.x, p.y); !p.ok(c) {
			t.Errorf("drawing's pixel (%d, %d) is %v, want %s (the photo upright)", p.x, p.y, c, p.want)
		}
	}
	if c := drawn.At(40, 16); isBlue(c) {
		t.Errorf("drawing's pixel (40, 16) is blue: the photo was drawn as stored, not upright")
	}

	// The decompression-bomb limit is extract's, from --max-pixels.
	args = append(args, "--max-pixels", "2000")
	_, stderr, code := run(t, args...)
	if code != 1 || !strings.Contains(stderr, "image too large") || !strings.Contains(stderr, photo) || !strings.Contains(stderr, "the limit is 2000") {
		t.Errorf("--max-pixels 2000 on a 64x32 photo: exit %d, want 1 and extract's error naming the photo:\n%s", code, stderr)
	}
	args[len(args)-1] = "0"
	if _, stderr, code := run(t, args...); code != 2 || !strings.Contains(stderr, "--max-pixels 0") {
		t.Errorf("--max-pixels 0: exit %d, want 2:\n%s", code, stderr)
	}
}

package extract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/internal/infile"
)

// Limits bound what an image may cost before it is decoded. The zero value
// gives the defaults.
type Limits struct {
	// MaxBytes bounds the size of the encoded file (0: DefaultMaxBytes).
	MaxBytes int64
	// MaxPixels bounds width*height as the file's header declares it,
	// checked before any pixel is allocated (0: DefaultMaxPixels).
	MaxPixels int64
}

// Default limits: 64 MiB of file and 50 megapixels, above any camera's
// photo but far below what a decompression bomb claims.
const (
	DefaultMaxBytes  = 64 << 20
	DefaultMaxPixels = 50_000_000
)

func (l Limits) maxBytes() int64 {
	if l.MaxBytes > 0 {
		return l.MaxBytes
	}
	return DefaultMaxBytes
}

// readLimit is how many bytes ReadFile and ReadLimited read: one past
// MaxBytes, to tell a file over the limit, without wrapping past the
// largest int64 (MaxBytes math.MaxInt64 read nothing, and every file was
// "empty").
func (l Limits) readLimit() int64 {
	if m := l.maxBytes(); m < math.MaxInt64 {
		return m + 1
	}
	return math.MaxInt64
}

func (l Limits) maxPixels() int64 {
	if l.MaxPixels > 0 {
		return l.MaxPixels
	}
	return DefaultMaxPixels
}

// Picture is an image ready for the detector: stretched to
// detect.InputSize x detect.InputSize and turned upright as its EXIF
// orientation says.
type Picture struct {
	// RGB is InputSize*InputSize*3 values in 0..255, row-major HWC.
	RGB []float32
	// Width and Height are the upright image's size in pixels (after the
	// EXIF orientation): a box in input pixels maps back by Width/InputSize
	// in x and Height/InputSize in y.
	Width, Height int
}

// Mirror flips the picture left to right, in place.
func (p *Picture) Mirror() {
	const S = detect.InputSize
	for y := 0; y < S; y++ {
		row := p.RGB[y*S*3 : (y+1)*S*3]
		for l, r := 0, S-1; l < r; l, r = l+1, r-1 {
			for c := 0; c < 3; c++ {
				row[l*3+c], row[r*3+c] = row[r*3+c], row[l*3+c]
			}
		}
	}
}

// ErrTooLarge is wrapped by the errors about files or images over Limits.
var ErrTooLarge = errors.New("image too large")

// LoadFile reads, checks and decodes the JPEG or PNG file at path and
// prepares it for the detector (see Prepare). Errors name the file.
func LoadFile(path string, lim Limits) (*Picture, error) {
	b, err := ReadFile(path, lim)
	if err != nil {
		return nil, err
	}
	return Decode(b, path, lim)
}

// LoadUpright reads, checks and decodes the JPEG or PNG file at path as
// LoadFile does (the same limits, the same EXIF orientation), and returns
// the image itself turned upright, for drawing on it. Errors name the
// file.
func LoadUpright(path string, lim Limits) (image.Image, error) {
	b, err := ReadFile(path, lim)
	if err != nil {
		return nil, err
	}
	img, orient, err := decode(b, path, lim)
	if err != nil {
		return nil, err
	}
	return Upright(img, orient), nil
}

// ReadFile reads the file at path whole, refusing what is not a regular
// file and a file over lim's MaxBytes. Errors name the file.
func ReadFile(path string, lim Limits) ([]byte, error) {
	// infile opens without blocking on a FIFO (one named like a photo
	// hung a whole folder) and refuses what is not a regular file.
	f, err := infile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read image %s: %w", path, unwrapPath(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read image %s: %w", path, unwrapPath(err))
	}
	if st.Size() > lim.maxBytes() {
		return nil, fmt.Errorf("read image %s: %w: %d bytes, the limit is %d", path, ErrTooLarge, st.Size(), lim.maxBytes())
	}
	// A file that grows while it is read is cut one byte past the limit:
	// decode refuses it.
	b, err := io.ReadAll(io.LimitReader(f, lim.readLimit()))
	if err != nil {
		return nil, fmt.Errorf("read image %s: %w", path, err)
	}
	return b, nil
}

// ReadLimited reads r whole, refusing more than lim's MaxBytes; name names
// the source in errors.
func ReadLimited(r io.Reader, name string, lim Limits) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, lim.readLimit()))
	if err != nil {
		return nil, fmt.Errorf("read image %s: %w", name, err)
	}
	if int64(len(b)) > lim.maxBytes() {
		return nil, fmt.Errorf("read image %s: %w: more than %d bytes", name, ErrTooLarge, lim.maxBytes())
	}
	return b, nil
}

// MaxJPEGScans bounds the scans (SOS segments) of a JPEG that Decode takes.
// Each scan is a pass over the whole image, so a JPEG's decoding work grows
// with its scans, not with its bytes or pixels: a 414 KB progressive JPEG
// that repeats its last scan thousands of times took minutes to decode.
// A baseline JPEG has 1 scan, a progressive one about 10 (libjpeg's
// standard progression: 10 for colour, 6 for grey), and even the rare
// custom progression scripts stay within a few dozen; 100 is far above any
// real photo and bounds a hostile one to about 10 times the work of a
// normal progressive decode. libjpeg-turbo's tools offer the same guard
// (-maxscans).
const MaxJPEGScans = 100

// ErrTooManyScans is wrapped by the error about a JPEG with more than
// MaxJPEGScans scans.
var ErrTooManyScans = errors.New("too many JPEG scans")

// jpegScans counts the scans (SOS markers) of the JPEG b, walking its
// markers: SOI, then segments, each a marker 0xFF xx and (but for the
// standalone RSTn and TEM) a 2-byte big-endian length that counts itself,
// an SOS followed by entropy-coded data up to the next marker that is
// neither RSTn nor a stuffed 0xFF00. As Go's decoder does, it skips bytes
// that are not a marker where one is due, and 0xFF00 there (a stray byte
// must not hide the scans after it). It stops at EOI, at the end of b, or
// at a segment length that does not parse (the decoder then says what is
// wrong), and as soon as it has counted more than limit scans.
func jpegScans(b []byte, limit int) int {
	if len(b) < 2 || b[0] != 0xFF || b[1] != 0xD8 {
		return 0
	}
	scans := 0
	i := 2
	for i+1 < len(b) {
		if b[i] != 0xFF {
			// Not a marker: skipped up to the next 0xFF, as Go's
			// decoder skips it.
			j := bytes.IndexByte(b[i:], 0xFF)
			if j < 0 {
				return scans
			}
			i += j
			continue
		}
		m := b[i+1]
		switch {
		case m == 0xFF: // fill byte before a marker
			i++
			continue
		case m == 0xD9: // EOI
			return scans
		case m >= 0xD0 && m <= 0xD7 || m == 0x00 || m == 0x01 || m == 0xD8: // standalone, or no marker
			i += 2
			continue
		}
		if i+3 >= len(b) {
			return scans
		}
		n := int(b[i+2])<<8 | int(b[i+3])
		if n < 2 {
			return scans
		}
		i += 2 + n
		if m != 0xDA {
			continue
		}
		if scans++; scans > limit {
			return scans
		}
		// Entropy-coded data: up to the next 0xFF that starts a marker
		// other than RSTn (0xFF00 is a stuffed 0xFF byte, 0xFFFF fill).
		for i < len(b) {
			j := bytes.IndexByte(b[i:], 0xFF)
			if j < 0 {
				return scans
			}
			i += j
			k := i + 1
			for k < len(b) && b[k] == 0xFF {
				k++
			}
			if k >= len(b) {
				return scans
			}
			if b[k] == 0x00 || b[k] >= 0xD0 && b[k] <= 0xD7 {
				i = k + 1
				continue
			}
			i = k - 1 // the marker's 0xFF
			break
		}
	}
	return scans
}

// DecodeContext is Decode that returns promptly, with ctx's error, once
// ctx is done: the decoder reads its input through a reader that fails
// once ctx is done, so it stops at its next read, and in the meantime
// DecodeContext has already returned (a decode left running ends on its
// own, bounded by MaxJPEGScans and lim's pixels).
func DecodeContext(ctx context.Context, b []byte, name string, lim Limits) (*Picture, error) {
	p, _, err := decodeContext(ctx, b, name, lim, false)
	return p, err
}

// DecodeUprightContext is DecodeUpright that returns promptly once ctx is
// done, as DecodeContext does.
func DecodeUprightContext(ctx context.Context, b []byte, name string, lim Limits) (*Picture, image.Image, error) {
	return decodeContext(ctx, b, name, lim, true)
}

// LoadFileContext is LoadFile that returns promptly once ctx is done, as
// DecodeContext does.
func LoadFileContext(ctx context.Context, path string, lim Limits) (*Picture, error) {
	b, err := ReadFile(path, lim)
	if err != nil {
		return nil, err
	}
	return DecodeContext(ctx, b, path, lim)
}

// decodeContext decodes and prepares b in a goroutine, and returns its
// result or, first, ctx's error.
func decodeContext(ctx context.Context, b []byte, name string, lim Limits, upright bool) (*Picture, image.Image, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("read image %s: %w", name, err)
	}
	type result struct {
		p   *Picture
		img image.Image
		err error
	}
	done := make(chan result, 1) // the goroutine never blocks on it
	go func() {
		var r result
		img, orient, err := decodeFrom(b, &ctxReader{ctx: ctx, r: bytes.NewReader(b)}, name, lim)
		if err != nil {
			r.err = err
		} else if ctx.Err() == nil {
			r.p = Prepare(img, orient)
			if upright {
				r.img = Upright(img, orient)
			}
		}
		done <- r
	}()
	select {
	case r := <-done:
		if r.err == nil && r.p == nil || ctx.Err() != nil && errors.Is(r.err, ctx.Err()) {
			return nil, nil, fmt.Errorf("read image %s: %w", name, ctx.Err())
		}
		return r.p, r.img, r.err
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("read image %s: %w", name, ctx.Err())
	}
}

// ctxReader reads from r until ctx is done, then fails with ctx's error:
// a decoder reading through it stops at its next read.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Decode decodes an encoded JPEG or PNG image and prepares it for the
// detector: the declared size is checked against lim before the pixels are
// decoded, the EXIF orientation of a JPEG is applied, and the image is
// stretched (not letterboxed: the detector was trained on stretched
// inputs) to InputSize x InputSize by area averaging. name names the image
// in errors.
func Decode(b []byte, name string, lim Limits) (*Picture, error) {
	img, orient, err := decode(b, name, lim)
	if err != nil {
		return nil, err
	}
	return Prepare(img, orient), nil
}

// DecodeUpright is Decode that also returns the decoded image itself,
// turned upright as its EXIF orientation says (for drawing on it).
func DecodeUpright(b []byte, name string, lim Limits) (*Picture, image.Image, error) {
	img, orient, err := decode(b, name, lim)
	if err != nil {
		return nil, nil, err
	}
	return Prepare(img, orient), Upright(img, orient), nil
}

// decode checks and decodes a JPEG or PNG, returning its EXIF orientation.
func decode(b []byte, name string, lim Limits) (image.Image, int, error) {
	return decodeFrom(b, bytes.NewReader(b), name, lim)
}

// decodeFrom is decode whose decoder reads b's bytes from src.
func decodeFrom(b []byte, src io.Reader, name string, lim Limits) (image.Image, int, error) {
	if int64(len(b)) > lim.maxBytes() {
		return nil, 0, fmt.Errorf("read image %s: %w: %d bytes, the limit is %d", name, ErrTooLarge, len(b), lim.maxBytes())
	}
	kind := sniff(b)
	if kind == "" {
		return nil, 0, fmt.Errorf("read image %s: not a JPEG or PNG image (%s)", name, describeStart(b))
	}
	var cfg image.Config
	var err error
	if kind == "jpeg" {
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(b))
	} else {
		cfg, err = png.DecodeConfig(bytes.NewReader(b))
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read image %s: corrupt %s header: %w", name, strings.ToUpper(kind), decodeErr(err))
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, 0, fmt.Errorf("read image %s: %s header declares %dx%d pixels", name, strings.ToUpper(kind), cfg.Width, cfg.Height)
	}
	if px := int64(cfg.Width) * int64(cfg.Height); px > lim.maxPixels() {
		return nil, 0, fmt.Errorf("read image %s: %w: its header declares %dx%d = %d pixels, the limit is %d (refused before decoding)",
			name, ErrTooLarge, cfg.Width, cfg.Height, px, lim.maxPixels())
	}
	orient := 1
	if kind == "jpeg" {
		// Bounded in work, not only in bytes and pixels: see MaxJPEGScans.
		if n := jpegScans(b, MaxJPEGScans); n > MaxJPEGScans {
			return nil, 0, fmt.Errorf("read image %s: %w: the JPEG has more than %d scans (a progressive photo has about 10); refused before decoding, as each scan is a pass over the whole image", name, ErrTooManyScans, MaxJPEGScans)
		}
		orient = JPEGOrientation(b)
	}
	var img image.Image
	if kind == "jpeg" {
		img, err = jpeg.Decode(src)
	} else {
		img, err = png.Decode(src)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, 0, fmt.Errorf("read image %s: %w", name, err)
		}
		return nil, 0, fmt.Errorf("read image %s: corrupt or truncated %s: %w", name, strings.ToUpper(kind), decodeErr(err))
	}
	return img, orient, nil
}

// sniff names the format by the file's magic bytes: "jpeg", "png" or "".
func sniff(b []byte) string {
	switch {
	case len(b) >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF:
		return "jpeg"
	case len(b) >= 8 && string(b[:8]) == "\x89PNG\r\n\x1a\n":
		return "png"
	}
	return ""
}

// describeStart says what a file that is neither a JPEG nor a PNG is,
// for the error, without a byte of it: the file may be anything (a Karpathy
// file or a folder may name /etc/passwd), and an error message is no place
// for its contents. It names the image formats it knows by their
// signature, and otherwise says whether the file starts as text.
func describeStart(b []byte) string {
	if len(b) == 0 {
		return "the file is empty"
	}
	for _, f := range otherFormats {
		if f.is(b) {
			return "it is " + f.name + ": convert it to JPEG or PNG"
		}
	}
	if looksLikeText(b[:min(len(b), 64)]) {
		return "it starts with text, not with an image's signature"
	}
	return "its first bytes are no image format's signature"
}

// looksLikeText reports whether b is printable UTF-8 text (tabs and line
// breaks allowed), but for a character cut at its end.
func looksLikeText(b []byte) bool {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return !utf8.FullRune(b[i:])
		}
		if !unicode.IsPrint(r) && r != '\t' && r != '\n' && r != '\r' {
			return false
		}
		i += size
	}
	return true
}

// otherFormats are the image and document formats that describeStart names.
var otherFormats = []struct {
	name string
	is   func(b []byte) bool
}{
	{"a GIF image", prefix("GIF87a", "GIF89a")},
	{"a WebP image", func(b []byte) bool { return len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP" }},
	{"a HEIF or AVIF image", func(b []byte) bool {
		return len(b) >= 12 && string(b[4:8]) == "ftyp" && slices.Contains([]string{"heic", "heix", "heif", "mif1", "avif", "avis"}, string(b[8:12]))
	}},
	{"a BMP image", func(b []byte) bool {
		return len(b) >= 14 && string(b[:2]) == "BM" && string(b[6:10]) == "\x00\x00\x00\x00"
	}},
	{"a TIFF image", prefix("II*\x00", "MM\x00*")},
	{"a PDF document", prefix("%PDF-")},
}

// prefix returns a test for files that start with one of sigs.
func prefix(sigs ...string) func(b []byte) bool {
	return func(b []byte) bool {
		for _, s := range sigs {
			if bytes.HasPrefix(b, []byte(s)) {
				return true
			}
		}
		return false
	}
}

// decodeErr words the decoders' errors about files that end early.
func decodeErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errors.New("the file ends early (truncated)")
	}
	return err
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Prepare stretches img to InputSize x InputSize by area averaging and
// turns it upright as EXIF orientation orient (1..8; others mean 1) says.
func Prepare(img image.Image, orient int) *Picture {
	const S = detect.InputSize
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	rgb := toRGB(img)
	small := resizeArea(rgb, w, h, S, S)
	p := &Picture{RGB: small}
	p.Width, p.Height, _ = orientation(orient, w, h)
	if orient >= 2 && orient <= 8 {
		p.RGB = orientSquare(small, S, orient)
	}
	return p
}

// Upright returns img turned as EXIF orientation o (1..8) says: img itself
// for 1 (or an unknown value), a new image otherwise.
func Upright(img image.Image, o int) image.Image {
	if o < 2 || o > 8 {
		return img
	}
	b := img.Bounds()
	ow, oh, at := orientation(o, b.Dx(), b.Dy())
	out := image.NewRGBA(image.Rect(0, 0, ow, oh))
	for y := range oh {
		for x := range ow {
			sx, sy := at(x, y)
			out.Set(x, y, img.At(b.Min.X+sx, b.Min.Y+sy))
		}
	}
	return out
}

// orientation is the one reading of the EXIF orientation tag: for an image
// stored w x h pixels, it returns the size the viewer sees once the image
// is turned as orientation o (1..8; others mean 1) says, and the map from
// a pixel (x, y) the viewer sees to where the camera stored it. Upright
// (the image itself) and Prepare (the detector's square input) both turn
// images through it.
func orientation(o, w, h int) (ow, oh int, at func(x, y int) (sx, sy int)) {
	switch o {
	case 2: // mirrored horizontally
		return w, h, func(x, y int) (int, int) { return w - 1 - x, y }
	case 3: // rotated 180
		return w, h, func(x, y int) (int, int) { return w - 1 - x, h - 1 - y }
	case 4: // mirrored vertically
		return w, h, func(x, y int) (int, int) { return x, h - 1 - y }
	case 5: // transposed
		return h, w, func(x, y int) (int, int) { return y, x }
	case 6: // stored rotated 90 counter-clockwise: turn clockwise
		return h, w, func(x, y int) (int, int) { return y, h - 1 - x }
	case 7: // transverse
		return h, w, func(x, y int) (int, int) { return w - 1 - y, h - 1 - x }
	case 8: // stored rotated 90 clockwise: turn counter-clockwise
		return h, w, func(x, y int) (int, int) { return w - 1 - y, x }
	}
	return w, h, func(x, y int) (int, int) { return x, y }
}

// toRGB returns the pixels of img as packed 8-bit RGB, row-major, with
// fast paths for what the JPEG and PNG decoders return.
func toRGB(img image.Image) []uint8 {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	out := make([]uint8, w*h*3)
	switch m := img.(type) {
	case *image.YCbCr:
		for y := range h {
			o := y * w * 3
			for x := range w {
				yi := m.YOffset(b.Min.X+x, b.Min.Y+y)
				ci := m.COffset(b.Min.X+x, b.Min.Y+y)
				r, g, bb := color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
				out[o], out[o+1], out[o+2] = r, g, bb
				o += 3
			}
		}
	case *image.Gray:
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+w]
			o := y * w * 3
			for _, v := range row {
				out[o], out[o+1], out[o+2] = v, v, v
				o += 3
			}
		}
	case *image.RGBA:
		// Premultiplied: over black, which is what the colour is.
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+4*w]
			o := y * w * 3
			for x := range w {
				out[o], out[o+1], out[o+2] = row[4*x], row[4*x+1], row[4*x+2]
				o += 3
			}
		}
	case *image.NRGBA:
		// Transparent pixels are composed over white, as viewers show them.
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+4*w]
			o := y * w * 3
			for x := range w {
				a := uint32(row[4*x+3])
				for c := range 3 {
					out[o+c] = uint8((uint32(row[4*x+c])*a + 255*(255-a) + 127) / 255)
				}
				o += 3
			}
		}
	case *image.NRGBA64, *image.RGBA64, *image.Gray16:
		// 16-bit PNGs: as the default, without boxing each pixel's
		// colour in an interface (8 bytes of garbage a pixel).
		for y := range h {
			o := y * w * 3
			for x := range w {
				var r, g, bb, a uint32
				switch m := m.(type) {
				case *image.NRGBA64:
					r, g, bb, a = m.NRGBA64At(b.Min.X+x, b.Min.Y+y).RGBA()
				case *image.RGBA64:
					r, g, bb, a = m.RGBA64At(b.Min.X+x, b.Min.Y+y).RGBA()
				case *image.Gray16:
					r, g, bb, a = m.Gray16At(b.Min.X+x, b.Min.Y+y).RGBA()
				}
				wh := 0xFFFF - a
				out[o] = uint8((r + wh) >> 8)
				out[o+1] = uint8((g + wh) >> 8)
				out[o+2] = uint8((bb + wh) >> 8)
				o += 3
			}
		}
	default:
		for y := range h {
			o := y * w * 3
			for x := range w {
				r, g, bb, a := img.At(b.Min.X+x, b.Min.Y+y).RGBA()
				// Over white, as for NRGBA.
				wh := 0xFFFF - a
				out[o] = uint8((r + wh) >> 8)
				out[o+1] = uint8((g + wh) >> 8)
				out[o+2] = uint8((bb + wh) >> 8)
				o += 3
			}
		}
	}
	return out
}

// resizeArea resamples a packed RGB image of w x h to ow x oh floats
// (0..255) by averaging the source area each output pixel covers
// (bilinear-like when enlarging), one axis after the other.
func resizeArea(src []uint8, w, h, ow, oh int) []float32 {
	xs := areaWeights(w, ow)
	ys := areaWeights(h, oh)
	// The horizontal pass first keeps h rows of ow pixels, 12 bytes a
	// pixel: for a tall, narrow image (1 x 50,000,000 pixels, within the
	// pixel limit, a PNG of a few hundred KB) that was 300 GB. Where that
	// is large and the vertical pass first keeps less (oh rows of w
	// pixels), the vertical pass goes first; the result is the same but
	// for float32 rounding, and every photo up to the pixel limit but such
	// narrow strips keeps the horizontal pass first.
	if int64(h)*int64(ow)*12 > maxResizeTemp && int64(oh)*int64(w) < int64(h)*int64(ow) {
		return resizeAreaVertical(src, w, h, ow, oh, xs, ys)
	}
	// Horizontal pass: h rows of ow pixels.
	tmp := make([]float32, h*ow*3)
	for y := range h {
		row := src[y*w*3 : (y+1)*w*3]
		t := tmp[y*ow*3 : (y+1)*ow*3]
		for x, ws := range xs {
			var r, g, b float32
			for _, tw := range ws {
				p := row[tw.i*3:]
				r += tw.w * float32(p[0])
				g += tw.w * float32(p[1])
				b += tw.w * float32(p[2])
			}
			t[3*x], t[3*x+1], t[3*x+2] = r, g, b
		}
	}
	out := make([]float32, ow*oh*3)
	for y, ws := range ys {
		o := out[y*ow*3 : (y+1)*ow*3]
		for _, tw := range ws {
			t := tmp[tw.i*ow*3 : (tw.i+1)*ow*3]
			for k := range o {
				o[k] += tw.w * t[k]
			}
		}
	}
	return out
}

// maxResizeTemp bounds, in bytes, resizeArea's intermediate image when
// the other order of its passes keeps a smaller one.
const maxResizeTemp = 64 << 20

// resizeAreaVertical is resizeArea with the vertical pass first: its
// intermediate image is oh rows of w pixels.
func resizeAreaVertical(src []uint8, w, h, ow, oh int, xs, ys [][]tap) []float32 {
	tmp := make([]float32, oh*w*3)
	for y, ws := range ys {
		t := tmp[y*w*3 : (y+1)*w*3]
		for _, tw := range ws {
			row := src[tw.i*w*3 : (tw.i+1)*w*3]
			for k, v := range row {
				t[k] += tw.w * float32(v)
			}
		}
	}
	out := make([]float32, ow*oh*3)
	for y := range oh {
		row := tmp[y*w*3 : (y+1)*w*3]
		o := out[y*ow*3 : (y+1)*ow*3]
		for x, ws := range xs {
			var r, g, b float32
			for _, tw := range ws {
				p := row[tw.i*3:]
				r += tw.w * p[0]
				g += tw.w * p[1]
				b += tw.w * p[2]
			}
			o[3*x], o[3*x+1], o[3*x+2] = r, g, b
		}
	}
	return out
}

type tap struct {
	i int
	w float32
}

// areaWeights returns, for each of the m output samples along an axis of n
// source samples, the source samples and weights that make it: the
// overlap of the output pixel's span with each source pixel when
// shrinking, linear interpolation between pixel centres when enlarging.
func areaWeights(n, m int) [][]tap {
	out := make([][]tap, m)
	scale := float64(n) / float64(m)
	for j := range m {
		if scale <= 1 {
			c := (float64(j)+0.5)*scale - 0.5
			i0 := int(c)
			if c < 0 {
				i0 = 0
				c = 0
			}
			i1 := min(i0+1, n-1)
			f := float32(c - float64(i0))
			if i1 == i0 || f == 0 {
				out[j] = []tap{{i0, 1}}
			} else {
				out[j] = []tap{{i0, 1 - f}, {i1, f}}
			}
			continue
		}
		lo, hi := float64(j)*scale, float64(j+1)*scale
		var ts []tap
		for i := int(lo); i < n && float64(i) < hi; i++ {
			a := max(lo, float64(i))
			b := min(hi, float64(i+1))
			if b > a {
				ts = append(ts, tap{i, float32((b - a) / scale)})
			}
		}
		out[j] = ts
	}
	return out
}

// orientSquare applies EXIF orientation o (2..8) to an s x s RGB image
// (see orientation).
func orientSquare(src []float32, s, o int) []float32 {
	_, _, at := orientation(o, s, s)
	out := make([]float32, len(src))
	for y := range s {
		for x := range s {
			sx, sy := at(x, y)
			copy(out[(y*s+x)*3:(y*s+x)*3+3], src[(sy*s+sx)*3:])
		}
	}
	return out
}

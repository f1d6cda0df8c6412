package synth

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
	"image"
)

// pngWriter encodes opaque RGBA images as 8-bit RGB PNG files, faster than
// image/png for our purpose: every row uses the Sub filter (the images are
// smooth backgrounds with flat shapes) and the zlib writer is reused. The
// output is a standard PNG that any decoder reads.
type pngWriter struct {
	raw []byte // filtered scanlines
	z   *zlib.Writer
	buf bytes.Buffer // compressed data
}

// encode writes img as PNG to out.
func (p *pngWriter) encode(out *bytes.Buffer, img *image.RGBA) error {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	stride := 1 + 3*w
	if cap(p.raw) < h*stride {
		p.raw = make([]byte, h*stride)
	}
	raw := p.raw[:h*stride]
	for y := range h {
		src := img.Pix[y*img.Stride : y*img.Stride+4*w]
		dst := raw[y*stride : (y+1)*stride]
		dst[0] = 1 // Sub: each byte minus the same channel of the pixel to its left
		var pr, pg, pb byte
		for x := range w {
			r, g, b := src[4*x], src[4*x+1], src[4*x+2]
			dst[1+3*x], dst[2+3*x], dst[3+3*x] = r-pr, g-pg, b-pb
			pr, pg, pb = r, g, b
		}
	}
	p.buf.Reset()
	if p.z == nil {
		z, err := zlib.NewWriterLevel(&p.buf, zlib.BestSpeed)
		if err != nil {
			return err
		}
		p.z = z
	} else {
		p.z.Reset(&p.buf)
	}
	if _, err := p.z.Write(raw); err != nil {
		return err
	}
	if err := p.z.Close(); err != nil {
		return err
	}
	out.WriteString("\x89PNG\r\n\x1a\n")
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = 8, 2 // 8-bit truecolour; compression, filter, interlace 0
	pngChunk(out, "IHDR", ihdr[:])
	pngChunk(out, "IDAT", p.buf.Bytes())
	pngChunk(out, "IEND", nil)
	return nil
}

// pngChunk writes one PNG chunk: length, type, data, CRC of type and data.
func pngChunk(out *bytes.Buffer, typ string, data []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(data)))
	out.Write(n[:])
	out.WriteString(typ)
	out.Write(data)
	crc := crc32.NewIEEE()
	crc.Write([]byte(typ))
	crc.Write(data)
	binary.BigEndian.PutUint32(n[:], crc.Sum32())
	out.Write(n[:])
}

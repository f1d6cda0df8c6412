package extract

import "encoding/binary"

// JPEGOrientation returns the EXIF orientation (1..8) of a JPEG file: tag
// 0x0112 of the first image file directory in its APP1 "Exif" segment. It
// returns 1 (upright) when the file has no such tag or when the segment is
// malformed: a bad orientation tag never makes an image unreadable.
//
// Only the bytes before the first scan are looked at; every offset is
// checked against the segment's length.
func JPEGOrientation(b []byte) int {
	if len(b) < 4 || b[0] != 0xFF || b[1] != 0xD8 {
		return 1
	}
	p := 2
	for p+4 <= len(b) {
		if b[p] != 0xFF {
			return 1
		}
		marker := b[p+1]
		if marker == 0xFF { // fill byte
			p++
			continue
		}
		if marker == 0xD8 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7) {
			p += 2 // markers without a length
			continue
		}
		if marker == 0xDA || marker == 0xD9 { // start of scan, end of image
			return 1
		}
		n := int(binary.BigEndian.Uint16(b[p+2:]))
		if n < 2 || p+2+n > len(b) {
			return 1
		}
		seg := b[p+4 : p+2+n]
		if marker == 0xE1 && len(seg) >= 6 && string(seg[:6]) == "Exif\x00\x00" {
			if o := tiffOrientation(seg[6:]); o != 0 {
				return o
			}
		}
		p += 2 + n
	}
	return 1
}

// tiffOrientation reads the orientation tag of IFD0 of a TIFF structure
// (EXIF's payload); 0 when absent or malformed.
func tiffOrientation(t []byte) int {
	if len(t) < 8 {
		return 0
	}
	var bo binary.ByteOrder
	switch string(t[:2]) {
	case "II":
		bo = binary.LittleEndian
	case "MM":
		bo = binary.BigEndian
	default:
		return 0
	}
	if bo.Uint16(t[2:]) != 42 {
		return 0
	}
	ifd := int64(bo.Uint32(t[4:]))
	if ifd < 8 || ifd+2 > int64(len(t)) {
		return 0
	}
	n := int64(bo.Uint16(t[ifd:]))
	for i := range n {
		e := ifd + 2 + 12*i
		if e+12 > int64(len(t)) {
			return 0
		}
		if bo.Uint16(t[e:]) != 0x0112 {
			continue
		}
		typ, count := bo.Uint16(t[e+2:]), bo.Uint32(t[e+4:])
		if typ != 3 || count != 1 { // one SHORT, stored in the entry itself
			return 0
		}
		if v := int(bo.Uint16(t[e+8:])); v >= 1 && v <= 8 {
			return v
		}
		return 0
	}
	return 0
}

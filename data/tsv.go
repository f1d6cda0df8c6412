package data

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/xmr-project/xmr/internal/infile"
	"github.com/xmr-project/xmr/npy"
)

// TSV is the output of the bottom-up attention extractor (Anderson et al.,
// tools/generate_tsv.py): one image per line, six tab-separated fields
// image_id, image_w, image_h, num_boxes, boxes, features, where boxes and
// features are base64 of little-endian float32 arrays of num_boxes x 4
// (pixel x1, y1, x2, y2) and num_boxes x D.

// tsvFields are the column names, in order.
var tsvFields = [...]string{"image_id", "image_w", "image_h", "num_boxes", "boxes", "features"}

// MaxTSVLine bounds the length of a TSV line (one image); longer lines are
// an error rather than an unbounded allocation.
const MaxTSVLine = 256 << 20

// maxTSVBoxes bounds num_boxes.
const maxTSVBoxes = 1 << 16

// TSVRecord is one image of a bottom-up TSV file.
type TSVRecord struct {
	// Line is the 1-based line number of the record in its file.
	Line int
	// ImageID is the image_id field as written.
	ImageID string
	// Width and Height are the image size in pixels.
	Width, Height float32
	// NumBoxes is the number of regions and D the features per region.
	NumBoxes, D int
	// Boxes holds NumBoxes*4 pixel coordinates x1, y1, x2, y2.
	Boxes []float32
	// Feat holds NumBoxes*D features.
	Feat []float32
}

// TSVReader reads bottom-up TSV records one at a time in bounded memory:
// one line and one record, reused from call to call.
type TSVReader struct {
	// Dim, when set, is the expected feature dimension; it lets the reader
	// accept float64 arrays (twice the float32 size), which some newer
	// extractor versions write. With Dim zero, D is inferred from the
	// size of the features field assuming float32.
	Dim int

	name string
	br   *bufio.Reader
	line int
	buf  []byte // the current line when longer than br's buffer
	raw  []byte // base64-decoded field
	rec  TSVRecord
}

// NewTSVReader returns a reader of the TSV stream r; name is used in
// errors.
func NewTSVReader(r io.Reader, name string) *TSVReader {
	return &TSVReader{name: name, br: bufio.NewReaderSize(r, 1<<20)}
}

// readLine returns the next line without its line ending, valid until the
// next call.
func (t *TSVReader) readLine() ([]byte, error) {
	t.line++
	b, err := t.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		t.buf = append(t.buf[:0], b...)
		for err == bufio.ErrBufferFull {
			if len(t.buf) > MaxTSVLine {
				return nil, fmt.Errorf("read %s: line %d is longer than %d bytes", t.name, t.line, MaxTSVLine)
			}
			b, err = t.br.ReadSlice('\n')
			t.buf = append(t.buf, b...)
		}
		b = t.buf
	}
	if err == io.EOF && len(b) > 0 {
		err = nil
	}
	if err != nil {
		if err != io.EOF {
			err = fmt.Errorf("read %s: line %d: %w", t.name, t.line, err)
		}
		return nil, err
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r")), nil
}

// Next returns the next record, or io.EOF after the last. The record and
// its slices are reused by the next call: copy what must outlive it. A
// header line naming the columns and blank lines are skipped.
func (t *TSVReader) Next() (*TSVRecord, error) {
	for {
		line, err := t.readLine()
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if bytes.HasPrefix(line, []byte("image_id\t")) {
			continue
		}
		if err := t.parse(line); err != nil {
			return nil, err
		}
		return &t.rec, nil
	}
}

// parse decodes one line into t.rec.
func (t *TSVReader) parse(line []byte) error {
	var f [6][]byte
	rest := line
	for i := range f {
		j := bytes.IndexByte(rest, '\t')
		if i == len(f)-1 {
			if j >= 0 {
				return t.errf("", "has more than %d tab-separated fields", len(f))
			}
			f[i] = rest
			break
		}
		if j < 0 {
			return t.errf("", "has %d tab-separated fields, want %d (%s)", i+1, len(f), strings.Join(tsvFields[:], ", "))
		}
		f[i], rest = rest[:j], rest[j+1:]
	}
	r := &t.rec
	r.Line = t.line
	r.ImageID = string(bytes.TrimSpace(f[0]))
	if r.ImageID == "" {
		return t.errf("image_id", "is empty")
	}
	for i, p := range []*float32{&r.Width, &r.Height} {
		v, err := strconv.ParseFloat(string(bytes.TrimSpace(f[1+i])), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return t.errf(tsvFields[1+i], "is %q, want a positive number", clip(f[1+i]))
		}
		*p = float32(v)
	}
	nb, err := strconv.Atoi(string(bytes.TrimSpace(f[3])))
	if err != nil || nb < 0 || nb > maxTSVBoxes {
		return t.errf("num_boxes", "is %q, want an integer in [0,%d]", clip(f[3]), maxTSVBoxes)
	}
	r.NumBoxes = nb

	// boxes: float32, or float64 (twice the size)
	raw, err := t.decode(f[4])
	if err != nil {
		return t.errf("boxes", "%v", err)
	}
	r.Boxes, err = toFloat32s(r.Boxes, raw, nb*4)
	if err != nil {
		return t.errf("boxes", "%d bytes, num_boxes %d needs %d (float32) or %d (float64)", len(raw), nb, nb*16, nb*32)
	}

	raw, err = t.decode(f[5])
	if err != nil {
		return t.errf("features", "%v", err)
	}
	switch {
	case nb == 0:
		if len(raw) != 0 {
			return t.errf("features", "%d bytes for num_boxes 0", len(raw))
		}
		r.D = t.Dim
	case t.Dim > 0:
		r.D = t.Dim
	case len(raw)%(4*nb) != 0:
		return t.errf("features", "%d bytes is not num_boxes %d x D float32 values", len(raw), nb)
	default:
		r.D = len(raw) / (4 * nb)
	}
	r.Feat, err = toFloat32s(r.Feat, raw, nb*r.D)
	if err != nil {
		return t.errf("features", "%d bytes, num_boxes %d x %d features needs %d (float32) or %d (float64)", len(raw), nb, r.D, nb*r.D*4, nb*r.D*8)
	}
	return nil
}

// decode base64-decodes a field into t.raw. Python 3 versions of the
// extractor sometimes write the bytes' repr, b'...'; the wrapper is
// dropped.
func (t *TSVReader) decode(field []byte) ([]byte, error) {
	field = bytes.TrimSpace(field)
	if len(field) >= 3 && field[0] == 'b' && (field[1] == '\'' || field[1] == '"') && field[len(field)-1] == field[1] {
		field = field[2 : len(field)-1]
	}
	n := base64.StdEncoding.DecodedLen(len(field))
	if cap(t.raw) < n {
		t.raw = make([]byte, n)
	}
	m, err := base64.StdEncoding.Decode(t.raw[:n], field)
	if err != nil {
		return nil, fmt.Errorf("unreadable base64: %w", err)
	}
	return t.raw[:m], nil
}

// toFloat32s converts raw, n little-endian float32 or float64 values, into
// dst (reused when large enough).
func toFloat32s(dst []float32, raw []byte, n int) ([]float32, error) {
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	switch len(raw) {
	case 4 * n:
		npy.Float32.ToFloat32(dst, raw)
	case 8 * n:
		npy.DType{Kind: 'f', Size: 8}.ToFloat32(dst, raw)
	default:
		return nil, errors.New("size mismatch")
	}
	return dst, nil
}

// errf returns an error naming the file, line and field.
func (t *TSVReader) errf(field, format string, args ...any) error {
	where := fmt.Sprintf("read %s: line %d", t.name, t.line)
	if field != "" {
		where += " field " + field
	}
	return fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...))
}

// clip shortens a field for an error message.
func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// ReadTSV calls fn for every record of the TSV file at path, in order,
// stopping at the first error fn returns. The record is reused between
// calls. It checks ctx before each record and, once ctx is cancelled,
// stops with an error wrapping ctx's error.
func ReadTSV(ctx context.Context, path string, fn func(*TSVRecord) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	f, err := infile.Open(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, unwrapPathErr(err))
	}
	defer f.Close()
	tr := NewTSVReader(f, path)
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %s: after line %d: %w", path, tr.line, err)
		}
		rec, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
}

// TSVOptions tunes CollectTSV and LoadTSV. The zero value (and nil) gives
// the defaults.
type TSVOptions struct {
	// Dim is the expected feature dimension (see TSVReader.Dim); 0 infers
	// it from the first record.
	Dim int
	// Karpathy is the parsed split file for LoadTSV; when nil the
	// karpathyJSON argument is read.
	Karpathy *Karpathy
	// IDs picks the Karpathy field that matches image_id; IDAuto is the
	// COCO id for COCO and the file name without extension otherwise.
	IDs IDScheme
	// CapsPerImage is the number of captions per image; 0 means 5.
	CapsPerImage int
	// SkipFiniteCheck skips the check of the features for NaN and Inf.
	SkipFiniteCheck bool
}

// tsvImage is a collected record.
type tsvImage struct {
	feat, boxes []float32
	n           int
	size        [2]float32
	found       bool
}

// CollectTSV reads the TSV files paths and gathers the records whose
// image_id is in ids, in the order of ids, into Regions: R is the largest
// num_boxes, shorter images are zero-padded with Count set, and boxes are
// normalised by each record's image_w and image_h, which are returned as
// sizes. Records of other images are skipped, and reading stops once every
// id is found. Every id must be found.
//
// CollectTSV checks ctx before each record; once ctx is cancelled it
// returns an error wrapping ctx's error.
func CollectTSV(ctx context.Context, paths []string, ids []string, opt *TSVOptions) (*Regions, [][2]float32, error) {
	var o TSVOptions
	if opt != nil {
		o = *opt
	}
	want := make(map[string]int, len(ids))
	for i, id := range ids {
		if j, dup := want[id]; dup {
			return nil, nil, fmt.Errorf("collect TSV: image id %s requested twice (%d and %d)", id, j, i)
		}
		want[id] = i
	}
	imgs := make([]tsvImage, len(ids))
	left := len(ids)
	D := o.Dim
	dimFrom := ""
	bar := newBar("bottom-up TSV", len(ids))
	errDone := errors.New("done")
	for _, p := range paths {
		if left == 0 {
			break
		}
		err := ReadTSV(ctx, p, func(rec *TSVRecord) error {
			i, ok := want[rec.ImageID]
			if !ok || imgs[i].found {
				return nil
			}
			where := fmt.Sprintf("read %s: line %d (image %s)", p, rec.Line, rec.ImageID)
			if rec.NumBoxes == 0 {
				return fmt.Errorf("%s: num_boxes is 0: %w", where, ErrNoRegions)
			}
			if rec.NumBoxes > 0 {
				if D == 0 {
					D, dimFrom = rec.D, fmt.Sprintf("%s line %d", p, rec.Line)
				} else if rec.D != D {
					from := dimFrom
					if from == "" {
						from = "the Dim option"
					}
					return fmt.Errorf("%s: %d features per region, %s has %d", where, rec.D, from, D)
				}
			}
			if !o.SkipFiniteCheck {
				if j := firstNonFinite(rec.Feat); j >= 0 {
					return fmt.Errorf("%s: region %d feature %d is %v", where, j/rec.D, j%rec.D, rec.Feat[j])
				}
			}
			for j, x := range rec.Boxes {
				if !isFinite32(x) {
					return fmt.Errorf("%s: region %d box coordinate %d is %v", where, j/4, j%4, x)
				}
				size := rec.Width
				if j%2 == 1 {
					size = rec.Height
				}
				if n := x / size; !(n >= -boxSlack && n <= 1+boxSlack) {
					return fmt.Errorf("%s: region %d box coordinate %d is %v, %.3g image sizes from the %v x %v image (image_w, image_h): want a box within %g image size of it",
						where, j/4, j%4, x, n, rec.Width, rec.Height, float64(boxSlack))
				}
			}
			imgs[i] = tsvImage{
				feat:  append([]float32(nil), rec.Feat...),
				boxes: append([]float32(nil), rec.Boxes...),
				n:     rec.NumBoxes,
				size:  [2]float32{rec.Width, rec.Height},
				found: true,
			}
			bar.Add(1)
			if left--; left == 0 {
				return errDone
			}
			return nil
		})
		if err != nil && err != errDone {
			return nil, nil, err
		}
	}
	bar.Finish()
	if left > 0 {
		var miss []string
		for i := range imgs {
			if !imgs[i].found && len(miss) < 5 {
				miss = append(miss, ids[i])
			}
		}
		return nil, nil, fmt.Errorf("collect TSV: %d of %d image ids not found in %s, e.g. %s",
			left, len(ids), strings.Join(paths, ", "), strings.Join(miss, ", "))
	}
	R := 0
	for i := range imgs {
		R = max(R, imgs[i].n)
	}
	g := &Regions{N: len(ids), R: R, D: D, Feat: make([]float32, len(ids)*R*D), Boxes: make([]float32, len(ids)*R*4), Count: make([]int, len(ids))}
	sizes := make([][2]float32, len(ids))
	for i := range imgs {
		im := &imgs[i]
		copy(g.Feat[i*R*D:], im.feat)
		for j, x := range im.boxes {
			g.Boxes[i*R*4+j] = x / im.size[j%2]
		}
		g.Count[i] = im.n
		sizes[i] = im.size
		*im = tsvImage{} // let the copy go
	}
	return g, sizes, nil
}

// LoadTSV loads split from bottom-up TSV files: the split's images, their
// captions (the first CapsPerImage of each) and their ids come from the
// Karpathy split file karpathyJSON (or opt.Karpathy); the features and
// boxes of those images are collected from the TSV files with CollectTSV,
// which stops with an error wrapping ctx's error once ctx is cancelled.
func LoadTSV(ctx context.Context, paths []string, karpathyJSON, split string, opt *TSVOptions) (*Split, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("load TSV %s: %w", split, err)
	}
	var o TSVOptions
	if opt != nil {
		o = *opt
	}
	per := o.CapsPerImage
	if per <= 0 {
		per = DefaultCapsPerImage
	}
	k := o.Karpathy
	if k == nil {
		var err error
		if k, err = LoadKarpathy(karpathyJSON); err != nil {
			return nil, err
		}
	}
	scheme := o.IDs
	if scheme == IDAuto {
		scheme = IDFilename
		if k.IsCOCO() {
			scheme = IDCocoID
		}
	}
	_, _, caps, ids, err := karpathySplit(k, karpathyJSON, split, per, scheme)
	if err != nil {
		return nil, err
	}
	g, sizes, err := CollectTSV(ctx, paths, ids, &o)
	if err != nil {
		return nil, err
	}
	return &Split{Name: split, Images: g, Captions: caps, CapsPerImage: per, ImageIDs: ids, Sizes: sizes}, nil
}

// EncodeTSVRecord appends rec as one TSV line, in the extractor's layout
// (float32 arrays, standard base64, "\r\n" line end as Python's csv module
// writes), to dst.
func EncodeTSVRecord(dst []byte, rec *TSVRecord) []byte {
	dst = append(dst, rec.ImageID...)
	dst = append(dst, '\t')
	dst = strconv.AppendFloat(dst, float64(rec.Width), 'g', -1, 32)
	dst = append(dst, '\t')
	dst = strconv.AppendFloat(dst, float64(rec.Height), 'g', -1, 32)
	dst = append(dst, '\t')
	dst = strconv.AppendInt(dst, int64(rec.NumBoxes), 10)
	for _, arr := range [][]float32{rec.Boxes, rec.Feat} {
		dst = append(dst, '\t')
		raw := make([]byte, 0, 4*len(arr))
		for _, v := range arr {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
		}
		dst = base64.StdEncoding.AppendEncode(dst, raw)
	}
	return append(dst, '\r', '\n')
}

// Package checkpoint saves and loads named float32 tensors in the
// safetensors format, so that xmr's checkpoints open in other tools (Python's
// safetensors, HuggingFace) and HuggingFace weights (BERT's
// model.safetensors) load into xmr's models.
//
// A file is an 8-byte little-endian header length N, N bytes of JSON
//
//	{"__metadata__": {"config": "..."},
//	 "enc.fc.weight": {"dtype": "F32", "shape": [1024, 2048], "data_offsets": [0, 8388608]}, ...}
//
// padded with spaces to a multiple of 8, then the tensors' raw little-endian
// data, back to back, offsets counting from the end of the header. Save
// writes F32 tensors (F16 where Entry.Half asks) sorted by name; Open
// reads F32, F16, BF16 and F64, converting to float32, and validates the
// whole header first. String
// metadata travels in the header too: package model stores a model's
// configuration, tokenizer and vocabulary there, so that a checkpoint
// alone rebuilds its model.
package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"unicode/utf8"

	"github.com/xmr-project/xmr/internal/half"
)

// maxHeader bounds the JSON header, as the reference implementation does
// (100 MB), so that a corrupt length cannot make us allocate gigabytes.
const maxHeader = 100_000_000

// metadataKey is the reserved header key holding string metadata.
const metadataKey = "__metadata__"

// ErrFormat is wrapped by every error about a file that breaks the format.
var ErrFormat = errors.New("invalid safetensors file")

// dtypeSize gives the byte size of each element type of the format.
var dtypeSize = map[string]int64{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// Info describes one tensor of a file.
type Info struct {
	// Name is the tensor's name in the file.
	Name string
	// DType is the element type as the format spells it ("F32", "F16", ...).
	DType string
	// Shape is the tensor's shape; empty for a scalar.
	Shape []int
	// Begin and End are the byte range of the data, relative to the end of
	// the header.
	Begin, End int64
}

// Numel returns the number of elements.
func (in Info) Numel() int {
	n := 1
	for _, d := range in.Shape {
		n *= d
	}
	return n
}

// Float32 reports whether the tensor can be read as float32 (F32, F16, BF16
// or F64 data).
func (in Info) Float32() bool {
	switch in.DType {
	case "F32", "F16", "BF16", "F64":
		return true
	}
	return false
}

// header is a parsed and validated header.
type header struct {
	infos     map[string]Info
	names     []string // sorted
	meta      map[string]string
	dataStart int64     // 8 + N
	sums      Checksums // nil when the file has none
}

// rawInfo is a tensor's header entry as written; pointers detect missing
// fields. Unknown fields are ignored, as the reference implementation does.
type rawInfo struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))
}

// jsonErr words a JSON decoding error.
func jsonErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("header JSON ends early")
	}
	return err
}

// parseHeader validates the header of a file of size bytes whose first
// bytes are prefix (at least 8 + N of them): the length, the JSON, every
// entry's dtype, shape and offsets, and that the tensors tile the data
// section exactly, without overlaps or holes.
func parseHeader(prefix []byte, size int64) (*header, error) {
	if size < 8 || len(prefix) < 8 {
		return nil, formatErr("file of %d bytes is too short for the 8-byte header length", size)
	}
	n := binary.LittleEndian.Uint64(prefix[:8])
	if n > maxHeader {
		return nil, formatErr("header length %d exceeds the limit of %d bytes", n, maxHeader)
	}
	if int64(n) > size-8 {
		return nil, formatErr("header length %d exceeds the %d bytes after the length (truncated file?)", n, size-8)
	}
	if int64(len(prefix)) < 8+int64(n) {
		return nil, formatErr("header of %d bytes not read", n)
	}
	raw := prefix[8 : 8+n]
	if !utf8.Valid(raw) {
		return nil, formatErr("header is not valid UTF-8")
	}
	if len(bytes.TrimLeft(raw, " \t\r\n")) == 0 || bytes.TrimLeft(raw, " \t\r\n")[0] != '{' {
		return nil, formatErr("header is not a JSON object")
	}
	h := &header{infos: map[string]Info{}, meta: map[string]string{}, dataStart: 8 + int64(n)}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // '{'
		return nil, formatErr("header JSON: %v", jsonErr(err))
	}
	sawMeta := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, formatErr("header JSON: %v", jsonErr(err))
		}
		name, ok := tok.(string)
		if !ok {
			return nil, formatErr("header JSON: key %v is not a string", tok)
		}
		if _, dup := h.infos[name]; dup {
			return nil, formatErr("tensor %q: listed twice", name)
		}
		if name == metadataKey {
			if sawMeta {
				return nil, formatErr("metadata: listed twice")
			}
			sawMeta = true
			var meta map[string]string
			if err := dec.Decode(&meta); err != nil {
				return nil, formatErr("metadata: values must be strings: %v", jsonErr(err))
			}
			for k, v := range meta {
				h.meta[k] = v
			}
			continue
		}
		var ri rawInfo
		if err := dec.Decode(&ri); err != nil {
			return nil, formatErr("tensor %q: %v", name, jsonErr(err))
		}
		in, err := checkInfo(name, ri)
		if err != nil {
			return nil, err
		}
		h.infos[name] = in
		h.names = append(h.names, name)
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, formatErr("header JSON: %v", jsonErr(err))
	}
	if rest := raw[dec.InputOffset():]; len(bytes.TrimLeft(rest, " \t\r\n")) > 0 {
		return nil, formatErr("header JSON: data after the object")
	}
	sort.Strings(h.names)
	if err := checkTiling(h, size-h.dataStart); err != nil {
		return nil, err
	}
	if s, ok := h.meta[MetaChecksums]; ok {
		sums, err := ParseChecksums(s)
		if err != nil {
			return nil, formatErr("metadata %s: %v", MetaChecksums, err)
		}
		for _, name := range h.names {
			if _, ok := sums[name]; !ok {
				return nil, formatErr("tensor %q: no checksum in metadata %s", name, MetaChecksums)
			}
		}
		for name := range sums {
			if _, ok := h.infos[name]; !ok {
				return nil, formatErr("metadata %s: checksum of tensor %q, which the file lacks", MetaChecksums, name)
			}
		}
		h.sums = sums
	}
	return h, nil
}

// checkInfo validates one entry on its own.
func checkInfo(name string, ri rawInfo) (Info, error) {
	switch {
	case ri.DType == nil:
		return Info{}, formatErr("tensor %q: no dtype", name)
	case ri.Shape == nil:
		return Info{}, formatErr("tensor %q: no shape", name)
	case ri.DataOffsets == nil:
		return Info{}, formatErr("tensor %q: no data_offsets", name)
	}
	size, ok := dtypeSize[*ri.DType]
	if !ok {
		return Info{}, formatErr("tensor %q: unknown dtype %q", name, *ri.DType)
	}
	in := Info{Name: name, DType: *ri.DType, Shape: make([]int, len(*ri.Shape))}
	nbytes := size
	for i, d := range *ri.Shape {
		if d < 0 || d > math.MaxInt32 {
			return Info{}, formatErr("tensor %q: dimension %d in shape %v", name, d, *ri.Shape)
		}
		in.Shape[i] = int(d)
		if d != 0 && nbytes > math.MaxInt64/d {
			return Info{}, formatErr("tensor %q: shape %v overflows", name, *ri.Shape)
		}
		nbytes *= d
	}
	off := *ri.DataOffsets
	if len(off) != 2 {
		return Info{}, formatErr("tensor %q: data_offsets %v must hold two numbers", name, off)
	}
	in.Begin, in.End = off[0], off[1]
	if in.Begin < 0 || in.End < in.Begin {
		return Info{}, formatErr("tensor %q: data_offsets %v are not an interval", name, off)
	}
	if in.End-in.Begin != nbytes {
		return Info{}, formatErr("tensor %q: data_offsets %v hold %d bytes, %s %v needs %d", name, off, in.End-in.Begin, in.DType, in.Shape, nbytes)
	}
	return in, nil
}

// checkTiling verifies that the tensors cover [0, dataLen) back to back.
func checkTiling(h *header, dataLen int64) error {
	// From the sorted names, not the map: a map's random order would make
	// the sort's work, and the fuzzer's coverage, differ from run to run.
	byOff := make([]Info, 0, len(h.infos))
	for _, name := range h.names {
		byOff = append(byOff, h.infos[name])
	}
	sort.Slice(byOff, func(i, j int) bool {
		a, b := byOff[i], byOff[j]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		if a.End != b.End {
			return a.End < b.End
		}
		return a.Name < b.Name
	})
	var pos int64
	for i, in := range byOff {
		switch {
		case in.Begin > pos:
			return formatErr("tensor %q: hole of %d bytes before its data_offsets [%d, %d]", in.Name, in.Begin-pos, in.Begin, in.End)
		case in.Begin < pos:
			return formatErr("tensor %q: data_offsets [%d, %d] overlap tensor %q", in.Name, in.Begin, in.End, byOff[i-1].Name)
		}
		pos = in.End
	}
	if pos > dataLen {
		return formatErr("tensor data ends at byte %d but the file holds %d bytes of data (truncated file?)", pos, dataLen)
	}
	if pos < dataLen {
		return formatErr("%d bytes after the last tensor's data", dataLen-pos)
	}
	return nil
}

// Entry is a named float32 tensor: one to save, or one a model wants
// filled by LoadInto.
type Entry struct {
	Name  string
	Shape []int
	// Data holds prod(Shape) values, row-major.
	Data []float32
	// Half, when saving, stores the tensor in half precision (F16, each
	// value rounded to the nearest half, ties to even): half the bytes,
	// for weights shipped rather than trained on. Open reads it back as
	// float32, the rounded values exactly.
	Half bool
}

// bytes returns the encoded form of e's data: F32, or F16 with Half.
func (e Entry) bytes() []byte {
	if !e.Half {
		var b bytes.Buffer
		writeF32(&b, e.Data) // a bytes.Buffer never fails to write
		return b.Bytes()
	}
	b := make([]byte, 2*len(e.Data))
	for i, v := range e.Data {
		binary.LittleEndian.PutUint16(b[2*i:], half.FromFloat32(v))
	}
	return b
}

// Write writes tensors and metadata to w in the safetensors format: F32
// data (F16 for an Entry with Half), tensors sorted by name, the header padded with spaces to a multiple
// of 8. Names must be unique and non-empty, and each Data must fill its
// Shape. The metadata gains MetaChecksums, the CRC-32C of every tensor's
// data, unless there are no tensors.
func Write(w io.Writer, tensors []Entry, metadata map[string]string) error {
	sorted := append([]Entry(nil), tensors...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for i, e := range sorted {
		if e.Name == "" {
			return fmt.Errorf("tensor %d: empty name", i)
		}
		if e.Name == metadataKey {
			return fmt.Errorf("tensor %q: the name is reserved for metadata", e.Name)
		}
		if i > 0 && sorted[i-1].Name == e.Name {
			return fmt.Errorf("tensor %q: given twice", e.Name)
		}
		n := 1
		for _, d := range e.Shape {
			if d < 0 {
				return fmt.Errorf("tensor %q: negative dimension in shape %v", e.Name, e.Shape)
			}
			n *= d
		}
		if len(e.Data) != n {
			return fmt.Errorf("tensor %q: %d values for shape %v (%d)", e.Name, len(e.Data), e.Shape, n)
		}
		if e.Half {
			for j, v := range e.Data {
				if h := half.FromFloat32(v); h&0x7c00 == 0x7c00 {
					return fmt.Errorf("tensor %q: value %d (%v) has no half-precision value (beyond +-65504, or not finite): save it as float32", e.Name, j, v)
				}
			}
		}
	}
	if len(sorted) > 0 {
		sums := make(Checksums, len(sorted))
		for _, e := range sorted {
			if e.Half {
				sums[e.Name] = CRC32C(e.bytes())
			} else {
				sums[e.Name] = crcF32(e.Data)
			}
		}
		md := make(map[string]string, len(metadata)+1)
		for k, v := range metadata {
			md[k] = v
		}
		md[MetaChecksums] = sums.Marshal()
		metadata = md
	}
	hdr, err := buildHeader(sorted, metadata)
	if err != nil {
		return err
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(hdr)))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return err
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	for _, e := range sorted {
		var err error
		if e.Half {
			_, err = w.Write(e.bytes())
		} else {
			err = writeF32(w, e.Data)
		}
		if err != nil {
			return fmt.Errorf("tensor %q: %w", e.Name, err)
		}
	}
	return nil
}

// buildHeader returns the padded JSON header of sorted entries.
func buildHeader(sorted []Entry, metadata map[string]string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	if len(metadata) > 0 {
		m, err := json.Marshal(metadata) // keys sorted
		if err != nil {
			return nil, fmt.Errorf("metadata: %w", err)
		}
		b.WriteString(`"` + metadataKey + `":`)
		b.Write(m)
	}
	var off int64
	for i, e := range sorted {
		if i > 0 || len(metadata) > 0 {
			b.WriteByte(',')
		}
		name, err := json.Marshal(e.Name)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", e.Name, err)
		}
		shape := e.Shape
		if shape == nil {
			shape = []int{}
		}
		sh, _ := json.Marshal(shape)
		dtype, size := "F32", int64(4)
		if e.Half {
			dtype, size = "F16", 2
		}
		end := off + size*int64(len(e.Data))
		fmt.Fprintf(&b, `%s:{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}`, name, dtype, sh, off, end)
		off = end
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	return b.Bytes(), nil
}

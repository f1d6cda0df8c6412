package index

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/bits"
	"slices"
	"sort"
	"sync/atomic"
	"unsafe"

	"github.com/xmr-project/xmr/internal/infile"
	"github.com/xmr-project/xmr/mmap"
	"github.com/xmr-project/xmr/model"
)

// A segment file holds the embeddings of a batch of items of one modality
// (docs/index-format.md):
//
//	[0, 8)    magic "XMRSEG\r\n"
//	[8, 12)   format version, uint32 little-endian
//	[12, 16)  length H of the JSON header, uint32
//	[16, 20)  CRC-32C of the JSON header, uint32
//	[20, 64)  zero
//	[64, 64+H) the JSON header (segmentHeader)
//	sections, each starting at a multiple of 64 bytes, as the header lists
//
// Every section has its own CRC-32C in the header, checked when the segment
// is opened. Numbers are little-endian; the sections are laid out so that a
// memory-mapped file is used in place.

const (
	segMagic   = "XMRSEG\r\n"
	segVersion = 2
	// segVersionInt8 is the previous layout (no product-quantised codes),
	// still read: its segments are scored on the int8 codes.
	segVersionInt8 = 1
	segPrefix      = 64
	sectionAlign   = 64
	maxHeaderSize  = 1 << 20
)

// crcTable is CRC-32C (Castagnoli), hardware-accelerated on amd64 and arm64.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Section names.
const (
	secOffsets = "offsets" // int64 x (items+1): vector offsets of each item
	secPos     = "pos"     // int32 x vectors: region or word index of each vector
	secGlobal  = "global"  // float32 x items x dim: global vectors
	secVectors = "vectors" // float32 x vectors x dim
	secCodes   = "codes"   // int8 x vectors x codeDim(dim): the vectors quantized
	secScales  = "scales"  // float32 x vectors: vector k ~ scales[k] * codes[k]
	secSketch  = "sketch"  // uint64 x items x sketchWords(dim): sign bits of the global vectors
	secGCodes  = "gcodes"  // int8 x items x codeDim(dim): the global vectors quantized
	secGScales = "gscales" // float32 x items

	// The inverted file of ivf.go, present when the header's cells > 0
	// (segments written before it have none and are pruned by their
	// global vectors).
	secIVFCentroids = "ivf-centroids" // float32 x cells x dim
	secIVFOffsets   = "ivf-offsets"   // int64 x (cells+1): cell c's vectors are ivf-vectors[off[c]:off[c+1]]
	secIVFVectors   = "ivf-vectors"   // int32 x vectors: vector numbers, cell by cell, ascending within a cell
	secIVFItems     = "ivf-items"     // int32 x vectors: the item of each entry of ivf-vectors
	// Version 2 (pq.go): the 4-bit product-quantised codes.
	secPQCodebook = "pqcodebook" // float32 x subspaces x 16 x dsub: the centroids
	secPQCodes    = "pqcodes"    // uint8 x pqBlocks(vectors) x 16 subspaces: the codes, in the kernel's blocks
)

// pqHeader is the product quantiser's shape in a segment header.
type pqHeader struct {
	Subspaces int `json:"subspaces"`
	Dsub      int `json:"dsub"` // elements per subspace
	// Directions, in version 3, makes the quantiser a direction coder
	// (directions.go) over so many principal directions; Dsub is then 1.
	Directions int `json:"directions,omitempty"`
}

// section locates one array in a segment file.
type section struct {
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
}

// segmentHeader is the JSON header of a segment file.
type segmentHeader struct {
	Modality string    `json:"modality"` // "images" or "captions"
	Items    int       `json:"items"`
	Vectors  int       `json:"vectors"`
	Dim      int       `json:"dim"`
	Model    string    `json:"model"`           // fingerprint of the model that encoded it
	Cells    int       `json:"cells,omitempty"` // cells of the inverted file (0: none)
	PQ       *pqHeader `json:"pq,omitempty"`    // version 2: the codes' quantiser; version 3: the residuals'
	Lists    int       `json:"lists,omitempty"` // version 3: entries of the cells' item lists
	// Coarse, in version 3, is the shape of the coarse residual codes
	// (product-quantised, kept in memory; absent in segments written
	// before them).
	Coarse   *pqHeader          `json:"coarse,omitempty"`
	Sections map[string]section `json:"sections"`
}

// segment is an open, memory-mapped segment file.
type segment struct {
	path   string
	header segmentHeader
	data   []byte // the mapping (or the file read into memory)
	mapped bool
	// readAhead: the whole mapping was asked for when the index opened
	// (readAhead below), so searches need not ask for its parts.
	readAhead bool
	emb       *model.Embeddings // views into data
	codes     *codeView         // the quantized vectors, views into data
	global    *globalView       // sketches and codes of the global vectors
	ivf       *ivfView          // the inverted file of the vectors, or nil
	pq        *pqView           // the product-quantised vectors; nil in a version 1 or 3 segment
	res       *resView          // version 3 (residual.go): the compressed vectors; nil otherwise
	// layout scores the segment's items in the search pipeline:
	// compressedLayout for version 3, floatLayout otherwise.
	layout layout
	// sharedCentroids: an earlier segment of the index holds the same
	// inverted-file centroids (a build writes its quantizer into each of
	// its segments), and searches read that one's; these are neither
	// preloaded nor counted as kept in memory.
	sharedCentroids bool
}

// markSharedCentroids sets sharedCentroids on every segment of segs whose
// inverted file's quantizer an earlier one has.
func markSharedCentroids(segs []*segment) {
	seen := map[quantizerID]bool{}
	for _, s := range segs {
		var id quantizerID
		switch {
		case s.res != nil:
			id = s.res.id
		case s.ivf != nil:
			id = s.ivf.id
		default:
			continue
		}
		s.sharedCentroids = seen[id]
		seen[id] = true
	}
}

// openSegment maps path and checks its structure and, unless skipCRC, the
// checksums of its sections.
func openSegment(path string, skipCRC bool) (*segment, error) {
	f, err := infile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open segment: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("open segment %s: %w", path, err)
	}
	size := st.Size()
	if size < segPrefix {
		return nil, fmt.Errorf("segment %s: %d bytes, shorter than the %d-byte prefix: truncated file", path, size, segPrefix)
	}
	s := &segment{path: path}
	b, err := mmap.Map(f, size, mmap.ReadOnly)
	switch {
	case err == nil:
		s.data, s.mapped = b, true
	case errors.Is(err, mmap.ErrUnsupported):
		if s.data, err = io.ReadAll(f); err != nil {
			return nil, fmt.Errorf("read segment %s: %w", path, err)
		}
	default:
		return nil, fmt.Errorf("map segment %s: %w", path, err)
	}
	if err := s.parse(skipCRC); err != nil {
		s.close()
		return nil, fmt.Errorf("segment %s: %w", path, err)
	}
	return s, nil
}

// readAhead asks the kernel to read the mapped segments ahead in full
// when, all together, they fit in mmap.ReadAheadMax: an index that small
// is soon read whole by its searches. A larger one is not: its reading
// ahead would evict what searches keep in memory for codes that a search
// reads a few of (a compressed index larger than memory), so its pages
// are read as searches touch them (resident parts: Preload).
func readAhead(segs []*segment) {
	var total int64
	for _, s := range segs {
		if s.mapped {
			total += int64(len(s.data))
		}
	}
	if total > mmap.ReadAheadMax {
		return
	}
	for _, s := range segs {
		if s.mapped {
			mmap.WillNeed(s.data)
			s.readAhead = true
		}
	}
}

// segmentFormat is what a format version of segment files holds beyond
// the sections every version has (offsets, positions, the global vectors'
// sketches and int8 codes), and how it is searched.
type segmentFormat struct {
	// sections checks the header's shape for this version and names, with
	// need, every further section and its size in bytes.
	sections func(h *segmentHeader, need func(name string, factors ...int64)) error
	// views builds the segment's views of those sections (raw, checked)
	// and sets its layout.
	views func(s *segment, raw map[string][]byte) error
}

// segmentFormats are the format versions this xmr opens: 1 (float32
// vectors and int8 codes, searched on those), 2 (with 4-bit
// product-quantised codes too) and 3 (compressed: residual.go).
var segmentFormats = map[uint32]segmentFormat{
	segVersionInt8:     {sections: floatSections(segVersionInt8), views: floatViews(segVersionInt8)},
	segVersion:         {sections: floatSections(segVersion), views: floatViews(segVersion)},
	segVersionResidual: {sections: compressedSections, views: compressedViews},
}

// parse checks the prefix, header and sections and builds the views:
// what every version has here, what each holds beyond it through its
// segmentFormat.
func (s *segment) parse(skipCRC bool) error {
	b := s.data
	if string(b[:8]) != segMagic {
		return fmt.Errorf("not an xmr index segment (magic %q, want %q)", b[:8], segMagic)
	}
	version := binary.LittleEndian.Uint32(b[8:])
	format, ok := segmentFormats[version]
	if !ok {
		return fmt.Errorf("format version %d; this xmr reads versions %d to %d: rebuild the index with this xmr (xmr index --overwrite, from the same checkpoint and data)", version, segVersionInt8, segVersionResidual)
	}
	hl, err := s.parseHeader()
	if err != nil {
		return err
	}
	h := &s.header
	// The sizes the counts imply. With the counts bounded (2^31 - 1
	// items and vectors, 2^20 dimensions, 2^16 cells, 512 subspaces) no
	// product exceeds 2^53; each is checked for overflow all the same
	// (-1: overflowed, refused below), so that no looser bound can bring
	// the wrap back.
	want := map[string]int64{}
	need := func(name string, factors ...int64) {
		n, ok := mulSize(factors...)
		if !ok {
			n = -1
		}
		want[name] = n
	}
	items, vectors := int64(h.Items), int64(h.Vectors)
	need(secOffsets, 8, items+1)
	need(secPos, 4, vectors)
	need(secSketch, 8, items, int64(sketchWords(h.Dim)))
	need(secGCodes, items, int64(codeDim(h.Dim)))
	need(secGScales, 4, items)
	if err := format.sections(h, need); err != nil {
		return err
	}
	raw, err := s.sections(want, hl, skipCRC)
	if err != nil {
		return err
	}
	offsets := sliceOf[int64](raw[secOffsets])
	e := &model.Embeddings{
		Dim:     h.Dim,
		Offsets: make([]int, len(offsets)),
		Pos:     sliceOf[int32](raw[secPos]),
		Global:  sliceOf[float32](raw[secGlobal]),
		Vecs:    sliceOf[float32](raw[secVectors]),
	}
	for i, o := range offsets {
		if o < 0 || o > int64(h.Vectors) || (i > 0 && o < offsets[i-1]) || (i == 0 && o != 0) {
			return fmt.Errorf("section %q: offset %d of item %d is out of order or range [0, %d]", secOffsets, o, i, h.Vectors)
		}
		e.Offsets[i] = int(o)
	}
	if e.Offsets[h.Items] != h.Vectors {
		return fmt.Errorf("section %q: offsets end at %d, the segment has %d vectors", secOffsets, e.Offsets[h.Items], h.Vectors)
	}
	for k, p := range e.Pos {
		if p < 0 {
			return fmt.Errorf("section %q: vector %d has position %d; positions (region or word numbers) are not negative", secPos, k, p)
		}
	}
	s.emb = e
	if err := format.views(s, raw); err != nil {
		return err
	}
	// The float sections were checked against their CRCs, which a writer
	// computes over whatever it wrote: they are scanned for NaN,
	// infinities and magnitudes no model produces (maxMagnitude) too
	// (with the CRCs, as both read every byte).
	if !skipCRC {
		for _, name := range []string{secGlobal, secVectors, secScales, secGScales, secIVFCentroids, secPQCodebook, secResCodebook, secResDirs, secCoarseCodebook} {
			v := sliceOf[float32](raw[name])
			k, ok := firstBeyond(v)
			switch {
			case !ok:
			case math.IsNaN(float64(v[k])) || math.IsInf(float64(v[k]), 0):
				return fmt.Errorf("section %q: element %d is %v; an index holds finite numbers only: rebuild it", name, k, v[k])
			default:
				return fmt.Errorf("section %q: element %d is %g, beyond the ±%g that a model's unit vectors and what is derived from them stay within: corrupt or forged file: rebuild it", name, k, v[k], maxMagnitude)
			}
		}
	}
	s.global = &globalView{sketch: sliceOf[uint64](raw[secSketch]), words: sketchWords(h.Dim), cd: codeDim(h.Dim),
		codes: sliceOf[int8](raw[secGCodes]), scales: sliceOf[float32](raw[secGScales])}
	return nil
}

// parseHeader checks the header (its length, checksum and counts) and
// reads it into s.header; it returns the header's length.
func (s *segment) parseHeader() (int64, error) {
	b := s.data
	hl := int64(binary.LittleEndian.Uint32(b[12:]))
	if hl > maxHeaderSize || segPrefix+hl > int64(len(b)) {
		return 0, fmt.Errorf("header of %d bytes does not fit in the %d-byte file: truncated or corrupt", hl, len(b))
	}
	hb := b[segPrefix : segPrefix+hl]
	if crc := crc32.Checksum(hb, crcTable); crc != binary.LittleEndian.Uint32(b[16:]) {
		return 0, fmt.Errorf("header checksum mismatch (CRC-32C %08x, stored %08x): corrupt file", crc, binary.LittleEndian.Uint32(b[16:]))
	}
	h := &s.header
	if err := json.Unmarshal(hb, h); err != nil {
		return 0, fmt.Errorf("header: %w", err)
	}
	if h.Items < 0 || h.Vectors < 0 || h.Dim <= 0 || h.Dim > 1<<20 {
		return 0, fmt.Errorf("header: %d items, %d vectors, dimension %d", h.Items, h.Vectors, h.Dim)
	}
	// Every count is bounded by the bytes that must hold it before any
	// size is computed from it: a forged count (items = 2^62 + n, the
	// header's checksum made valid) made the sizes below wrap around
	// int64 and equal those of the real sections, and a search then
	// indexed past them.
	if err := checkCounts(h, int64(len(b))); err != nil {
		return 0, err
	}
	// A segment's cells are its collection's quantizer's, trained on the
	// first batch: a later, smaller segment may have fewer vectors than
	// cells.
	if h.Cells < 0 || h.Cells > 1<<16 {
		return 0, fmt.Errorf("header: inverted file of %d cells (want 0 to 65,536)", h.Cells)
	}
	return hl, nil
}

// sections checks that the header lists every section of want, of the
// size wanted, inside the file after the header (of hl bytes), without
// overlaps and, unless skipCRC, with its checksum; it returns their bytes
// by name.
func (s *segment) sections(want map[string]int64, hl int64, skipCRC bool) (map[string][]byte, error) {
	b, h := s.data, &s.header
	raw := map[string][]byte{}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names) // the same error every time for a file with several faults
	for _, name := range names {
		size := want[name]
		if size < 0 {
			return nil, fmt.Errorf("header: section %q of %d items and %d vectors at dimension %d would need more bytes than an int64 counts: corrupt or forged header", name, h.Items, h.Vectors, h.Dim)
		}
		sec, ok := h.Sections[name]
		if !ok {
			return nil, fmt.Errorf("section %q missing", name)
		}
		if sec.Size != size {
			return nil, fmt.Errorf("section %q: %d bytes, %d items of %d vectors at dimension %d need %d", name, sec.Size, h.Items, h.Vectors, h.Dim, size)
		}
		if sec.Offset%sectionAlign != 0 || sec.Offset < segPrefix+hl || sec.Offset > int64(len(b)) || sec.Size > int64(len(b))-sec.Offset {
			return nil, fmt.Errorf("section %q at [%d, %d) lies outside the %d-byte file: truncated or corrupt", name, sec.Offset, sec.Offset+sec.Size, len(b))
		}
		raw[name] = b[sec.Offset : sec.Offset+sec.Size]
		if !skipCRC {
			if crc := crc32.Checksum(raw[name], crcTable); crc != sec.CRC32C {
				return nil, fmt.Errorf("section %q: checksum mismatch (CRC-32C %08x, stored %08x): corrupt file", name, crc, sec.CRC32C)
			}
		}
	}
	if err := checkOverlap(h.Sections, want); err != nil {
		return nil, err
	}
	return raw, nil
}

// floatSections returns the sections of format version 1 or 2: float32
// vectors, global vectors and int8 codes, the inverted file when the
// header has cells, and in version 2 the product-quantised codes.
func floatSections(version uint32) func(h *segmentHeader, need func(string, ...int64)) error {
	return func(h *segmentHeader, need func(string, ...int64)) error {
		items, vectors, dim := int64(h.Items), int64(h.Vectors), int64(h.Dim)
		need(secGlobal, 4, items, dim)
		need(secVectors, 4, vectors, dim)
		need(secCodes, vectors, int64(codeDim(h.Dim)))
		need(secScales, 4, vectors)
		if h.Coarse != nil {
			return fmt.Errorf("header: coarse codes in a segment of format version %d, which has none", version)
		}
		if h.Cells > 0 {
			need(secIVFCentroids, 4, int64(h.Cells), dim)
			need(secIVFOffsets, 8, int64(h.Cells)+1)
			need(secIVFVectors, 4, vectors)
			need(secIVFItems, 4, vectors)
		}
		if version == segVersion {
			if err := checkPQ(h, version); err != nil {
				return err
			}
			if h.PQ.Directions != 0 {
				return fmt.Errorf("header: a direction coder in format version %d, which has none", segVersion)
			}
			need(secPQCodebook, 4, int64(h.PQ.Subspaces), pqCentroids, int64(h.PQ.Dsub))
			need(secPQCodes, int64(pqBlocks(h.Vectors)), 16, int64(h.PQ.Subspaces))
		}
		return nil
	}
}

// floatViews returns the view builder of format version 1 or 2.
func floatViews(version uint32) func(s *segment, raw map[string][]byte) error {
	return func(s *segment, raw map[string][]byte) error {
		h, e := &s.header, s.emb
		if h.Cells > 0 {
			v := &ivfView{cells: h.Cells, centroids: sliceOf[float32](raw[secIVFCentroids]),
				off: sliceOf[int64](raw[secIVFOffsets]), vecs: sliceOf[int32](raw[secIVFVectors]),
				items: sliceOf[int32](raw[secIVFItems]), id: quantizerID{h.Sections[secIVFCentroids].CRC32C, h.Cells}}
			if err := v.check(e.Offsets); err != nil {
				return err
			}
			s.ivf = v
		}
		s.codes = &codeView{cd: codeDim(h.Dim), codes: sliceOf[int8](raw[secCodes]), scales: sliceOf[float32](raw[secScales]), offsets: e.Offsets}
		if version == segVersion {
			cb := &pqCodebook{dim: h.Dim, dsub: h.PQ.Dsub, m: h.PQ.Subspaces, centroids: sliceOf[float32](raw[secPQCodebook])}
			s.pq = &pqView{cb: cb, codes: raw[secPQCodes], offsets: e.Offsets}
		}
		s.layout = floatLayout{s}
		return nil
	}
}

// compressedSections returns the sections of format version 3
// (residual.go): the inverted file's centroids and the cells' lists, each
// vector's cell, cosine and residual codes with their codebook, and the
// coarse codes when the header has them.
func compressedSections(h *segmentHeader, need func(string, ...int64)) error {
	vectors, dim := int64(h.Vectors), int64(h.Dim)
	if h.Cells <= 0 || h.Lists < 0 || int64(h.Lists) > int64(h.Vectors) {
		return fmt.Errorf("header: compressed segment with %d cells and %d list entries for %d vectors (want cells > 0, entries at most the vectors)", h.Cells, h.Lists, h.Vectors)
	}
	if err := checkPQ(h, segVersionResidual); err != nil {
		return err
	}
	blocks := int64(pqBlocks(h.Vectors))
	need(secIVFCentroids, 4, int64(h.Cells), dim)
	need(secIVFOffsets, 8, int64(h.Cells)+1)
	need(secIVFItems, 4, int64(h.Lists))
	need(secCells, 2, vectors)
	need(secAlphas, vectors)
	need(secResCodebook, 4, int64(h.PQ.Subspaces), pqCentroids, int64(h.PQ.Dsub))
	need(secResCodes, blocks, 16, int64(h.PQ.Subspaces))
	if h.PQ.Directions > 0 {
		need(secResDirs, 4, int64(h.PQ.Directions), dim)
		need(secResDirOf, 2, int64(h.PQ.Subspaces))
	}
	if c := h.Coarse; c != nil {
		if !c.fits(h.Dim) {
			return fmt.Errorf("header: coarse product quantiser of %d subspaces of %d elements does not fit dimension %d", c.Subspaces, c.Dsub, h.Dim)
		}
		need(secCoarseCodebook, 4, int64(c.Subspaces), pqCentroids, int64(c.Dsub))
		need(secCoarseCodes, blocks, 16, int64(c.Subspaces))
	}
	return nil
}

// compressedViews builds the views of a segment of format version 3.
func compressedViews(s *segment, raw map[string][]byte) error {
	h, e := &s.header, s.emb
	v := &resView{cells: h.Cells, centroids: sliceOf[float32](raw[secIVFCentroids]),
		id:     quantizerID{h.Sections[secIVFCentroids].CRC32C, h.Cells},
		cellOf: sliceOf[uint16](raw[secCells]), alphas: sliceOf[int8](raw[secAlphas]), listOff: sliceOf[int64](raw[secIVFOffsets]), listItems: sliceOf[int32](raw[secIVFItems]),
		cb:    &pqCodebook{dim: h.Dim, dsub: h.PQ.Dsub, m: h.PQ.Subspaces, centroids: sliceOf[float32](raw[secResCodebook])},
		cbID:  quantizerID{h.Sections[secResCodebook].CRC32C, h.PQ.Subspaces},
		codes: raw[secResCodes], offsets: e.Offsets}
	if k := h.PQ.Directions; k > 0 {
		dirOf := sliceOf[uint16](raw[secResDirOf])
		for s, j := range dirOf {
			if int(j) >= k {
				return fmt.Errorf("section %q: subspace %d codes direction %d of %d", secResDirOf, s, j, k)
			}
		}
		v.cb.dir = newDirCoder(sliceOf[float32](raw[secResDirs]), h.Dim, dirOf)
		v.cbID.crc ^= bits.RotateLeft32(h.Sections[secResDirs].CRC32C, 16)
	}
	if c := h.Coarse; c != nil {
		cv := *v
		cv.cb = &pqCodebook{dim: h.Dim, dsub: c.Dsub, m: c.Subspaces, centroids: sliceOf[float32](raw[secCoarseCodebook])}
		cv.cbID = quantizerID{h.Sections[secCoarseCodebook].CRC32C, c.Subspaces}
		cv.codes = raw[secCoarseCodes]
		v.coarse = &cv
	}
	if err := v.check(h.Items); err != nil {
		return err
	}
	s.res = v
	s.layout = compressedLayout{s}
	return nil
}

// preload reads the sections a search keeps in memory (resident: in a
// version 2 segment every section but the float32 vectors and global
// vectors; in a compressed one only the offsets, cells, lists, centroids
// and codebooks and the coarse codes, its residual codes being read per
// candidate; centroids an earlier segment shares, not at all) into the
// page cache, one byte of each page, on every core. With checksums
// verified, Open has read them once already,
// but on an index larger than memory the float32 vectors read after them
// may have pushed them out.
func (s *segment) preload() {
	var parts [][]byte
	const chunk = 64 << 20
	for name, sec := range s.header.Sections {
		if !s.resident(name) || sec.Size == 0 {
			continue
		}
		b := s.data[sec.Offset : sec.Offset+sec.Size]
		for lo := 0; lo < len(b); lo += chunk {
			parts = append(parts, b[lo:min(lo+chunk, len(b))])
		}
	}
	var sink atomic.Uint64 // so that the reads are not optimised away
	parallel(len(parts), func(i int) {
		b := parts[i]
		mmap.WillNeed(b)
		var sum uint64
		for k := 0; k < len(b); k += 4096 {
			sum += uint64(b[k])
		}
		sink.Add(sum)
	})
}

// close releases the mapping.
func (s *segment) close() error {
	if s == nil || s.data == nil {
		return nil
	}
	var err error
	if s.mapped {
		err = mmap.Unmap(s.data)
	}
	s.data, s.emb, s.codes, s.global, s.ivf, s.pq, s.res, s.layout = nil, nil, nil, nil, nil, nil, nil, nil
	return err
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// maxMagnitude bounds every number that a segment stores as float32.
// Every vector a model encodes is L2-normalised (TERAN's and TERN's
// region, word and global vectors, SEAM's, MEMBER's), so its elements
// lie in [-1, 1], and so do what a build derives from them: the inverted
// file's unit centroids, product-quantiser centroids (means of parts of
// unit vectors), residuals v - a c and their codebooks and direction
// levels (|v - a c| <= 1 for the cosine a of unit v and c, a little more
// once a is rounded to 127ths), principal directions (unit rows) and
// int8 scales (max |x| / 127). A bound of 1024 leaves a factor of 500
// over what a trained model reaches, yet keeps every score finite and
// meaningful: by Cauchy-Schwarz a stored vector of d <= 2^20 elements
// within ±1024 has a dot product with a unit query vector of at most
// 1024 sqrt(d) = 2^20, and summed over the words of any query still far
// below float32's 3.4e38. Values beyond it (3e38 in the centroids or a
// codebook gave scores of ±Inf or 6e35) can only come from a damaged or
// forged file.
const maxMagnitude float32 = 1024

// maxMagnitudeBits is maxMagnitude as float32 bits: an element is beyond
// it, or NaN, or infinite, exactly when its bits without the sign are
// greater.
var maxMagnitudeBits = math.Float32bits(maxMagnitude)

// firstBeyond returns the index of the first element of v that is NaN,
// infinite, or of magnitude above maxMagnitude.
func firstBeyond(v []float32) (int, bool) {
	for i, x := range v {
		if math.Float32bits(x)&0x7fffffff > maxMagnitudeBits {
			return i, true
		}
	}
	return 0, false
}

// itemOf returns the item whose vectors, by offsets, include vector k.
func itemOf(offsets []int, k int) int {
	return max(0, sort.SearchInts(offsets, k+1)-1)
}

// bytesOf views a slice of fixed-size numbers as its little-endian bytes
// (the machines xmr supports are little-endian; see hostLE).
func bytesOf[T uint64 | int64 | int32 | uint16 | int8 | uint8 | float32](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(v[0])))
}

// sliceOf views little-endian bytes (64-byte aligned in a mapping) as a
// slice of numbers.
func sliceOf[T uint64 | int64 | int32 | uint16 | int8 | uint8 | float32](b []byte) []T {
	var zero T
	n := len(b) / int(unsafe.Sizeof(zero))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// hostLE reports whether this machine is little-endian: the segment
// layout is used in place only there.
var hostLE = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// checkHost refuses big-endian machines, where the mapped arrays would
// read wrong.
func checkHost() error {
	if !hostLE {
		return errors.New("index: segment files are little-endian and used in place; this machine is big-endian")
	}
	return nil
}

// checkOverlap refuses sections (those of want) that share bytes: a
// forged header whose checksums are valid could otherwise make one
// array read another's bytes.
func checkOverlap(secs map[string]section, want map[string]int64) error {
	type span struct {
		name      string
		off, size int64
	}
	var spans []span
	for name := range want {
		if sec := secs[name]; sec.Size > 0 {
			spans = append(spans, span{name, sec.Offset, sec.Size})
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].off < spans[j].off })
	for i := 1; i < len(spans); i++ {
		if a, b := spans[i-1], spans[i]; a.off+a.size > b.off {
			return fmt.Errorf("sections %q at [%d, %d) and %q at [%d, %d) overlap: corrupt or forged file", a.name, a.off, a.off+a.size, b.name, b.off, b.off+b.size)
		}
	}
	return nil
}

// checkCounts bounds a header's item and vector counts by the size of
// its file (every item takes 8 bytes of offsets, every vector 4 bytes of
// positions) and by the int32 numbers that the inverted file stores, so
// that no size computed from them can wrap around.
func checkCounts(h *segmentHeader, fileSize int64) error {
	const forged = "corrupt or forged header"
	switch {
	case int64(h.Items) >= fileSize/8:
		return fmt.Errorf("header: \"items\" is %d, more than the %d-byte file can hold (8 bytes of offsets each): %s", h.Items, fileSize, forged)
	case int64(h.Vectors) > fileSize/4:
		return fmt.Errorf("header: \"vectors\" is %d, more than the %d-byte file can hold (4 bytes of positions each): %s", h.Vectors, fileSize, forged)
	case h.Items > math.MaxInt32 || h.Vectors > math.MaxInt32:
		return fmt.Errorf("header: %d items and %d vectors: a segment holds at most %d of each (the inverted file numbers them in int32): %s", h.Items, h.Vectors, math.MaxInt32, forged)
	}
	return nil
}

// mulSize returns the product of non-negative factors, or false when it
// does not fit in an int64 (a forged header's counts).
func mulSize(factors ...int64) (int64, bool) {
	p := uint64(1)
	for _, f := range factors {
		if f < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(p, uint64(f))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, false
		}
		p = lo
	}
	return int64(p), true
}

// decodeItem returns item i of a compressed segment decoded: its vectors
// (centroids plus decoded residuals), positions and global vector (from
// its int8 codes).
func (s *segment) decodeItem(i int) *model.Embeddings {
	v, d := s.res, s.header.Dim
	x0, x1 := v.offsets[i], v.offsets[i+1]
	e := &model.Embeddings{Dim: d, Offsets: []int{0, x1 - x0}, Pos: slices.Clone(s.emb.Pos[x0:x1]),
		Vecs: make([]float32, (x1-x0)*d), Global: s.global.decode(i, d)}
	for x := x0; x < x1; x++ {
		v.decode(x, e.Vecs[(x-x0)*d:(x-x0+1)*d])
	}
	return e
}

// residentBytes returns the bytes of s that a search keeps in memory (the
// sections Preload reads): for a compressed segment its offsets, cells,
// lists, centroids and codebooks; otherwise every section but the float32
// vectors.
func (s *segment) residentBytes() int64 {
	var n int64
	for name, sec := range s.header.Sections {
		if s.resident(name) {
			n += sec.Size
		}
	}
	return n
}

// resident reports whether Preload reads section name of s.
func (s *segment) resident(name string) bool {
	if name == secIVFCentroids && s.sharedCentroids {
		return false
	}
	if s.res != nil {
		switch name {
		case secOffsets, secCells, secAlphas, secIVFOffsets, secIVFItems, secIVFCentroids, secResCodebook, secResDirs, secResDirOf, secCoarseCodebook, secCoarseCodes:
			return true
		}
		return false
	}
	return name != secVectors && name != secGlobal
}

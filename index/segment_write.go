package index

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/model"
)

// This file holds the segment writers: writeSegment (format version 2,
// float32 vectors with their codes) and writeCompressedSegment (version 3,
// residual.go), both through writeSections, which lays out and writes the
// file atomically (the layout is described in segment.go).

// writeCompressedSegment writes e as a segment file of format version 3
// at path, atomically: its vectors filed under qz's cells (cellOf, from
// qz.assign) with their residuals coded by rcb, and by cc (nil: none) in
// the coarse codes.
func writeCompressedSegment(path, modality, fingerprint string, e *model.Embeddings, qz *quantizer, rcb *pqCodebook, cc *coarseCoder, cellOf []uint16) error {
	sd, err := newSegmentData(path, modality, e)
	if err != nil {
		return err
	}
	n, d, first, last := sd.n, e.Dim, sd.first, sd.last
	listOff, listItems := cellLists(cellOf, e.Offsets[:n+1], qz.cells)
	codes, alphas := rcb.encodeResiduals(e.Vecs[first*d:last*d], cellOf, qz.centroids)
	arrays := []namedArray{
		sd.offsets, sd.pos, sd.sketch, sd.gcodes, sd.gscales,
		{secIVFCentroids, bytesOf(qz.centroids)},
		{secIVFOffsets, bytesOf(listOff)},
		{secIVFItems, bytesOf(listItems)},
		{secCells, bytesOf(cellOf)},
		{secAlphas, bytesOf(alphas)},
		{secResCodebook, bytesOf(rcb.centroids)},
		{secResCodes, codes},
	}
	ph := &pqHeader{Subspaces: rcb.m, Dsub: rcb.dsub}
	if rcb.dir != nil {
		ph.Directions = rcb.dir.k
		arrays = append(arrays, namedArray{secResDirs, bytesOf(rcb.dir.dirs)}, namedArray{secResDirOf, bytesOf(rcb.dir.dirOf)})
	}
	h := segmentHeader{Modality: modality, Items: n, Vectors: last - first, Dim: d, Model: fingerprint,
		Cells: qz.cells, Lists: len(listItems), Sections: map[string]section{}, PQ: ph}
	if cc != nil {
		coarse := cc.encode(e.Vecs[first*d:last*d], cellOf, qz.centroids, codes, rcb.m)
		arrays = append(arrays, namedArray{secCoarseCodebook, bytesOf(cc.cb.centroids)}, namedArray{secCoarseCodes, coarse})
		h.Coarse = &pqHeader{Subspaces: cc.cb.m, Dsub: cc.cb.dsub}
	}
	return writeSections(path, &h, segVersionResidual, arrays)
}

// namedArray is a section's content as writeSections writes it.
type namedArray struct {
	name string
	data []byte
}

// writeSegment writes e as a segment file at path, atomically, with an
// inverted file of its vectors under qz (nil: none).
func writeSegment(path, modality, fingerprint string, e *model.Embeddings, qz *quantizer) error {
	sd, err := newSegmentData(path, modality, e)
	if err != nil {
		return err
	}
	n, d, first, last := sd.n, e.Dim, sd.first, sd.last
	codes, scales := quantize(e.Vecs[first*d:last*d], d)
	var cells int
	var cents []float32
	ivfOff, ivfVecs, ivfItems := []int64{0}, []int32(nil), []int32(nil)
	if qz != nil {
		cells, cents = qz.cells, qz.centroids
		ivfOff, ivfVecs, ivfItems = ivfLists(qz.assign(e.Vecs[first*d:last*d]), e.Offsets[:n+1], cells)
	}
	cb := trainPQ(e.Vecs[first*d:last*d], d, pqDsubFor(d))
	pqCodes := cb.encode(e.Vecs[first*d : last*d])
	arrays := []namedArray{
		sd.offsets, sd.pos,
		{secGlobal, bytesOf(e.Global[:n*d])},
		{secVectors, bytesOf(e.Vecs[first*d : last*d])},
		{secCodes, bytesOf(codes)},
		{secScales, bytesOf(scales)},
		sd.sketch, sd.gcodes, sd.gscales,
		{secIVFCentroids, bytesOf(cents)},
		{secIVFOffsets, bytesOf(ivfOff)},
		{secIVFVectors, bytesOf(ivfVecs)},
		{secIVFItems, bytesOf(ivfItems)},
		{secPQCodebook, bytesOf(cb.centroids)},
		{secPQCodes, pqCodes},
	}
	h := segmentHeader{Modality: modality, Items: n, Vectors: last - first, Dim: d, Model: fingerprint,
		Cells: cells, Sections: map[string]section{}, PQ: &pqHeader{Subspaces: cb.m, Dsub: cb.dsub}}
	return writeSections(path, &h, segVersion, arrays)
}

// segmentData is what every format version stores of a batch of
// embeddings: the sections of its items' vector offsets, positions and
// global vectors' sketches and int8 codes, and the span [first, last) of
// its vectors in e.Vecs.
type segmentData struct {
	n, first, last                        int
	offsets, pos, sketch, gcodes, gscales namedArray
}

// newSegmentData checks e (its structure, then its values: checkFinite)
// for a segment at path and makes the sections every version has.
func newSegmentData(path, modality string, e *model.Embeddings) (*segmentData, error) {
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if err := checkFinite(path, modality, e); err != nil {
		return nil, err
	}
	n, d := e.Len(), e.Dim
	sd := &segmentData{n: n}
	if n > 0 {
		sd.first, sd.last = e.Offsets[0], e.Offsets[n]
	}
	offsets := make([]int64, n+1)
	for i := range offsets {
		offsets[i] = int64(e.Offsets[i] - sd.first)
	}
	gcodes, gscales := quantize(e.Global[:n*d], d)
	sd.offsets = namedArray{secOffsets, bytesOf(offsets)}
	sd.pos = namedArray{secPos, bytesOf(e.Pos[sd.first:sd.last])}
	sd.sketch = namedArray{secSketch, bytesOf(sketches(e.Global[:n*d], d))}
	sd.gcodes = namedArray{secGCodes, bytesOf(gcodes)}
	sd.gscales = namedArray{secGScales, bytesOf(gscales)}
	return sd, nil
}

// checkFinite refuses embeddings with a NaN, an infinity or an element
// beyond ±maxMagnitude, which score nothing a reader can rank (and fail
// to encode as JSON), naming the item: a segment that Open would refuse
// is never written.
func checkFinite(path, modality string, e *model.Embeddings) error {
	n, d := e.Len(), e.Dim
	first, last := 0, 0
	if n > 0 {
		first, last = e.Offsets[0], e.Offsets[n]
	}
	if k, ok := firstBeyond(e.Global[:n*d]); ok {
		return fmt.Errorf("write %s: %s item %d: global vector element %d is %v; the model's %s vectors must be finite, within ±%g",
			path, modality, k/d, k%d, e.Global[k], modality, maxMagnitude)
	}
	if k, ok := firstBeyond(e.Vecs[first*d : last*d]); ok {
		return fmt.Errorf("write %s: %s item %d: vector %d element %d is %v; the model's %s vectors must be finite, within ±%g",
			path, modality, itemOf(e.Offsets[:n+1], first+k/d), first+k/d, k%d, e.Vecs[first*d+k], modality, maxMagnitude)
	}
	return nil
}

// writeSections writes a segment file at path, atomically: the prefix,
// h (its sections filled in) and the arrays, each at a multiple of 64
// bytes.
func writeSections(path string, h *segmentHeader, version uint32, arrays []namedArray) error {
	// The header's size depends on the offsets it lists: lay the sections
	// out after a generous header bound, then pad the header to it.
	hdrCap := int64(1024)
	for {
		off := alignUp(segPrefix+hdrCap, sectionAlign)
		for _, a := range arrays {
			h.Sections[a.name] = section{Offset: off, Size: int64(len(a.data)), CRC32C: crc32.Checksum(a.data, crcTable)}
			off = alignUp(off+int64(len(a.data)), sectionAlign)
		}
		hb, err := json.Marshal(h)
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		if int64(len(hb)) > hdrCap {
			hdrCap *= 2
			continue
		}
		return atomicfile.Write(path, func(w io.Writer) error {
			bw := bufio.NewWriterSize(w, 1<<20)
			var pre [segPrefix]byte
			copy(pre[:], segMagic)
			binary.LittleEndian.PutUint32(pre[8:], version)
			binary.LittleEndian.PutUint32(pre[12:], uint32(len(hb)))
			binary.LittleEndian.PutUint32(pre[16:], crc32.Checksum(hb, crcTable))
			pos := int64(0)
			write := func(b []byte) error {
				_, err := bw.Write(b)
				pos += int64(len(b))
				return err
			}
			pad := func(to int64) error { return write(make([]byte, to-pos)) }
			if err := write(pre[:]); err != nil {
				return err
			}
			if err := write(hb); err != nil {
				return err
			}
			for _, a := range arrays {
				if err := pad(h.Sections[a.name].Offset); err != nil {
					return err
				}
				if err := write(a.data); err != nil {
					return err
				}
			}
			return bw.Flush()
		})
	}
}

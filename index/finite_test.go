package index

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/model"
)

// smallEmbeddings returns n items of 3 vectors each at dimension d, random
// and finite.
func smallEmbeddings(n, d int) *model.Embeddings {
	r := rand.New(rand.NewPCG(1, 2))
	e := &model.Embeddings{Dim: d, Offsets: make([]int, n+1)}
	for i := 0; i < n; i++ {
		e.Offsets[i+1] = e.Offsets[i] + 3
		for k := 0; k < d; k++ {
			e.Global = append(e.Global, r.Float32()-0.5)
		}
		for v := 0; v < 3; v++ {
			e.Pos = append(e.Pos, int32(v))
			for k := 0; k < d; k++ {
				e.Vecs = append(e.Vecs, r.Float32()-0.5)
			}
		}
	}
	return e
}

// TestSegmentNonFinite checks that NaN and infinite vectors are refused
// when a segment is written, naming the item, and when a segment holding
// them with valid checksums (a writer of another program, or of an older
// xmr) is opened: they used to give -Inf scores and JSON that failed to
// encode.
func TestSegmentNonFinite(t *testing.T) {
	dir := t.TempDir()
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, tc := range []struct {
		name string
		set  func(e *model.Embeddings)
		want string
	}{
		{"global NaN", func(e *model.Embeddings) { e.Global[2*8+5] = nan }, "images item 2: global vector element 5 is NaN"},
		{"vector +Inf", func(e *model.Embeddings) { e.Vecs[7*8+1] = inf }, "images item 2: vector 7 element 1 is +Inf"},
	} {
		e := smallEmbeddings(20, 8)
		tc.set(e)
		err := writeSegment(filepath.Join(dir, "bad.seg"), "images", "fp", e, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: write: err = %v, want %q", tc.name, err, tc.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "bad.seg")); err == nil {
			t.Errorf("%s: a segment was written", tc.name)
		}
	}

	path := filepath.Join(dir, "good.seg")
	if err := writeSegment(path, "images", "fp", smallEmbeddings(20, 8), nil); err != nil {
		t.Fatal(err)
	}
	// A NaN in the vectors section, its checksum and the header's made
	// valid again.
	forgeSegment(t, path, func(h *segmentHeader, b []byte) {
		sec := h.Sections[secVectors]
		binary.LittleEndian.PutUint32(b[sec.Offset+4*9:], math.Float32bits(nan))
		sec.CRC32C = crc32.Checksum(b[sec.Offset:sec.Offset+sec.Size], crcTable)
		h.Sections[secVectors] = sec
	})
	_, err := openSegment(path, false)
	if err == nil || !strings.Contains(err.Error(), `section "vectors": element 9 is NaN`) {
		t.Fatalf("open: err = %v, want the NaN of the vectors section", err)
	}
}

// TestGenerationOf checks which file names carry a generation: a leftover
// temporary manifest (.manifest.json.tmp-NNNNNNNNN) moved the next
// generation forward by up to 999,999.
func TestGenerationOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		gen  int
		ok   bool
	}{
		{"images-000007-0003.seg", 7, true},
		{".captions-000012-0000.seg.tmp-48151623", 12, true},
		{"catalogue-000003.db", 3, true},
		{"catalogue-000003.db-journal", 3, true},
		{"model-000004.safetensors", 4, true},
		{".model-000004.safetensors.tmp-999999999", 4, true},
		{".manifest.json.tmp-999999999", 0, false},
		{"manifest.json", 0, false},
		{"images-12-0003.seg", 0, false},
		{"notes.txt", 0, false},
	} {
		g, ok := generationOf(tc.name)
		if g != tc.gen || ok != tc.ok {
			t.Errorf("generationOf(%q) = %d, %v; want %d, %v", tc.name, g, ok, tc.gen, tc.ok)
		}
	}
	dir := t.TempDir()
	for _, n := range []string{"images-000002-0000.seg", ".manifest.json.tmp-987654321"} {
		os.WriteFile(filepath.Join(dir, n), nil, 0o644)
	}
	if g, err := nextGeneration(dir); err != nil || g != 3 {
		t.Fatalf("nextGeneration = %d, %v; want 3", g, err)
	}
}

// TestSegmentOverlap: a header whose sections share bytes is refused when
// the segment is opened, though every checksum is valid; the positions
// read the vectors' bytes and --explain printed wrong regions.
func TestSegmentOverlap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "forged.seg")
	if err := writeSegment(path, "images", "fp", smallEmbeddings(20, 8), nil); err != nil {
		t.Fatal(err)
	}
	// The positions section moved onto the vectors' first bytes, its
	// checksum made valid for them.
	forgeSegment(t, path, func(h *segmentHeader, b []byte) {
		pos := h.Sections[secPos]
		pos.Offset = h.Sections[secVectors].Offset
		pos.CRC32C = crc32.Checksum(b[pos.Offset:pos.Offset+pos.Size], crcTable)
		h.Sections[secPos] = pos
	})
	_, err := openSegment(path, false)
	if err == nil || !strings.Contains(err.Error(), "overlap: corrupt or forged file") {
		t.Fatalf("open: err = %v, want the overlapping sections refused", err)
	}
}

// forgeSegment rewrites the segment file at path: edit changes its header
// and bytes, and the header is written back with a valid checksum, as a
// forger who knows the format would.
func forgeSegment(t *testing.T, path string, edit func(h *segmentHeader, b []byte)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = forgeBytes(b, edit); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// forgeBytes is forgeSegment on the bytes b of a segment file, which it
// edits in place and returns.
func forgeBytes(b []byte, edit func(h *segmentHeader, b []byte)) ([]byte, error) {
	hl := binary.LittleEndian.Uint32(b[12:])
	var h segmentHeader
	if err := json.Unmarshal(b[segPrefix:segPrefix+int64(hl)], &h); err != nil {
		return nil, err
	}
	edit(&h, b)
	hb, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	room := int64(len(b)) - segPrefix // the header ends where the first section starts
	for _, sec := range h.Sections {
		if sec.Size > 0 {
			room = min(room, sec.Offset-segPrefix)
		}
	}
	if int64(len(hb)) > room {
		return nil, fmt.Errorf("the forged header of %d bytes does not fit in the %d before the sections", len(hb), room)
	}
	clear(b[segPrefix : segPrefix+int64(hl)])
	copy(b[segPrefix:], hb)
	binary.LittleEndian.PutUint32(b[12:], uint32(len(hb)))
	binary.LittleEndian.PutUint32(b[16:], crc32.Checksum(hb, crcTable))
	return b, nil
}

package index

import (
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"
)

// TestSegmentWithoutPQNamesItsVersion: a segment without its "pq" shape
// is refused naming its own format version: a format-3 (compressed)
// segment called itself "format version 2".
func TestSegmentWithoutPQNamesItsVersion(t *testing.T) {
	for _, version := range []uint32{segVersion, segVersionResidual} {
		path := filepath.Join(t.TempDir(), "nopq.seg")
		if err := writeSegment(path, "images", "fp", smallEmbeddings(20, 8), nil); err != nil {
			t.Fatal(err)
		}
		forgeSegment(t, path, func(h *segmentHeader, b []byte) {
			h.PQ = nil
			if version == segVersionResidual {
				h.Cells = 1 // what a compressed segment has, so that its pq shape is the first check to fail
			}
			binary.LittleEndian.PutUint32(b[8:], version)
		})
		_, err := openSegment(path, false)
		want := `no "pq" shape (format version ` + string(rune('0'+version))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("format %d without pq: %v, want %q", version, err, want)
		}
	}
}

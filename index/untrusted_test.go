package index

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xmr-project/xmr/model"
)

// The tests of this file hold the index to files that a hostile or
// careless user hands it: headers whose counts wrap the size arithmetic,
// numbers no model produces, inverted files that leave items out, a
// catalogue that is a FIFO, and appends that would mix layouts.

// forgeable writes one small segment of each format that a build writes
// (version 2 with an inverted file; version 3, compressed, with each
// residual coder) and returns their paths by name.
func forgeable(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(56, 1))
	e := randomEmbeddings(rng, 60, 4, 16)
	paths := map[string]string{}
	p := filepath.Join(dir, "v2.seg")
	if err := writeSegment(p, "images", "fp", e, quantizerFor(e)); err != nil {
		t.Fatal(err)
	}
	paths["v2"] = p
	qz, vecs, cellOf := filed(e)
	for _, c := range []ResidualCoder{CoderPQ, CoderDirections} {
		rcb := trainResidual("images", vecs, e.Dim, cellOf, qz, 1, c)
		cc := trainCoarse("images", vecs, e.Dim, cellOf, qz, 1, rcb)
		name := "v3-" + c.String()
		p := filepath.Join(dir, name+".seg")
		if err := writeCompressedSegment(p, "images", "fp", e, qz, rcb, cc, cellOf); err != nil {
			t.Fatal(err)
		}
		paths[name] = p
	}
	return paths
}

// copyFile copies the file src to a new file in a temporary directory.
func copyFile(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// resum recomputes the CRC-32C of section name after its bytes in b were
// edited.
func resum(h *segmentHeader, b []byte, name string) {
	sec := h.Sections[name]
	sec.CRC32C = crc32.Checksum(b[sec.Offset:sec.Offset+sec.Size], crcTable)
	h.Sections[name] = sec
}

// TestSegmentForgedCounts forges the counts of segment headers, the
// header's checksum made valid: items or vectors of 2^62 + n made every
// section size wrap around int64 and equal the real one, and opening the
// segment (xmr search, serve, index --append) panicked with an index out
// of range. Each is refused naming the field.
func TestSegmentForgedCounts(t *testing.T) {
	segs := forgeable(t)
	for _, tc := range []struct {
		name string
		edit func(h *segmentHeader)
		want string
	}{
		{"items + 2^62", func(h *segmentHeader) { h.Items += 1 << 62 }, `"items" is 4611686018427387964`},
		{"vectors + 2^62", func(h *segmentHeader) { h.Vectors += 1 << 62 }, `"vectors" is 461168601842738`},
		{"items + 2^63 - 1", func(h *segmentHeader) { h.Items = math.MaxInt64 }, `"items" is 9223372036854775807`},
		{"items 2^31", func(h *segmentHeader) { h.Items = 1 << 31 }, `"items" is 2147483648`},
	} {
		for _, format := range []string{"v2", "v3-pq", "v3-directions"} {
			t.Run(tc.name+"/"+format, func(t *testing.T) {
				path := copyFile(t, segs[format])
				forgeSegment(t, path, func(h *segmentHeader, b []byte) { tc.edit(h) })
				for _, skip := range []bool{false, true} {
					s, err := openSegment(path, skip)
					if err == nil {
						s.close()
						t.Fatalf("skip checksums %v: the forged segment opened", skip)
					}
					if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
						t.Fatalf("skip checksums %v: error %q, want one naming the file and %s", skip, err, tc.want)
					}
				}
			})
		}
	}
}

// TestMulSize holds the overflow-checked products of the section sizes.
func TestMulSize(t *testing.T) {
	for _, tc := range []struct {
		factors []int64
		want    int64
		ok      bool
	}{
		{[]int64{8, 21}, 168, true},
		{nil, 1, true},
		{[]int64{4, 0, math.MaxInt64}, 0, true},
		{[]int64{4, 1 << 61}, 0, false}, // 2^63: one past int64
		{[]int64{4, 1<<61 - 1}, 1<<63 - 4, true},
		{[]int64{1 << 32, 1 << 32}, 0, false}, // 2^64 wraps to 0 unchecked
		{[]int64{8, 1<<62 + 21}, 0, false},    // the forged items' offsets: 168 unchecked
		{[]int64{3, -1}, 0, false},
	} {
		got, ok := mulSize(tc.factors...)
		if got != tc.want || ok != tc.ok {
			t.Errorf("mulSize(%v) = %d, %v; want %d, %v", tc.factors, got, ok, tc.want, tc.ok)
		}
	}
}

// TestManifestForgedCounts: a manifest whose counts are negative or
// beyond what a segment holds is refused before any segment is opened
// (its item numbers run on from one segment to the next, and their sums
// must not wrap).
func TestManifestForgedCounts(t *testing.T) {
	src, _ := smallIndex(t)
	for _, tc := range []struct {
		name string
		edit func(m *Manifest)
	}{
		{"items + 2^62", func(m *Manifest) { m.Images[0].Items += 1 << 62 }},
		{"negative vectors", func(m *Manifest) { m.Captions[0].Vectors = -5 }},
		{"two segments of 2^63 - 1 items", func(m *Manifest) {
			m.Images = append(m.Images, m.Images[0])
			m.Images[0].Items, m.Images[1].Items = math.MaxInt64, math.MaxInt64
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, src, dir)
			editManifest(t, dir, tc.edit)
			ix, err := Open(context.Background(), dir, nil)
			if err == nil {
				ix.Close()
				t.Fatal("the forged manifest opened")
			}
			if !strings.Contains(err.Error(), "manifest.json") || !strings.Contains(err.Error(), "items and") {
				t.Fatalf("error %q, want one naming manifest.json and the counts", err)
			}
		})
	}
}

// TestSegmentHugeValues: sections whose checksums are valid but which
// hold finite numbers far beyond what a model produces (3e38 in the
// inverted file's centroids, the residual codebook or the global scales)
// gave +-Inf or 6e35 scores with exit status 0, and --json then failed
// with "unsupported value: +Inf". They are refused when the segment
// opens, where NaN is, naming the section; a writer refuses them in its
// input too.
func TestSegmentHugeValues(t *testing.T) {
	segs := forgeable(t)
	for _, tc := range []struct {
		format, section string
		value           float32
	}{
		{"v2", secIVFCentroids, 3e38},
		{"v2", secGScales, 3e38},
		{"v2", secScales, -3e38},
		{"v2", secPQCodebook, 3e38},
		{"v2", secVectors, 1e6},
		{"v2", secGlobal, -2048},
		{"v3-pq", secIVFCentroids, 3e38},
		{"v3-pq", secResCodebook, 3e38},
		{"v3-pq", secGScales, 3e38},
		{"v3-pq", secCoarseCodebook, -3e38},
		{"v3-directions", secResCodebook, 3e38},
		{"v3-directions", secResDirs, 1e30},
	} {
		t.Run(fmt.Sprintf("%s/%s/%g", tc.format, tc.section, tc.value), func(t *testing.T) {
			path := copyFile(t, segs[tc.format])
			forgeSegment(t, path, func(h *segmentHeader, b []byte) {
				sec, ok := h.Sections[tc.section]
				if !ok || sec.Size < 8 {
					t.Fatalf("no section %q to forge", tc.section)
				}
				binary.LittleEndian.PutUint32(b[sec.Offset+4:], math.Float32bits(tc.value))
				resum(h, b, tc.section)
			})
			s, err := openSegment(path, false)
			if err == nil {
				s.close()
				t.Fatalf("a segment with %g in %q opened", tc.value, tc.section)
			}
			want := fmt.Sprintf("section %q: element 1 is %g, beyond the ±1024", tc.section, tc.value)
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q, want %q", err, want)
			}
		})
	}
	// A writer refuses them in the embeddings it is given.
	e := smallEmbeddings(20, 8)
	e.Vecs[7*8+1] = 3e38
	err := writeSegment(filepath.Join(t.TempDir(), "huge.seg"), "images", "fp", e, nil)
	if err == nil || !strings.Contains(err.Error(), "images item 2: vector 7 element 1 is 3e+38; the model's images vectors must be finite, within ±1024") {
		t.Fatalf("write: err = %v, want the huge element refused", err)
	}
}

// TestSearchNeverReportsNonFinite: with checksums skipped, a segment
// holding an infinity (or a number that overflows a score) is opened
// without its values scanned; a search that meets such a score returns an
// error naming the segment rather than the score.
func TestSearchNeverReportsNonFinite(t *testing.T) {
	dir, man := smallIndex(t)
	seg := filepath.Join(dir, man.Images[0].File)
	// Image 3's global vector: +Inf in one element, zeros elsewhere, so
	// that its cosine with any query is an infinity.
	forgeSegment(t, seg, func(h *segmentHeader, b []byte) {
		sec := h.Sections[secGlobal]
		row := sec.Offset + int64(4*3*h.Dim)
		for k := 0; k < h.Dim; k++ {
			binary.LittleEndian.PutUint32(b[row+int64(4*k):], 0)
		}
		binary.LittleEndian.PutUint32(b[row:], math.Float32bits(float32(math.Inf(1))))
		resum(h, b, secGlobal)
	})
	if ix, err := Open(context.Background(), dir, nil); err == nil {
		ix.Close()
		t.Fatal("with checksums verified, the infinite global vector opened")
	}
	ix, err := Open(context.Background(), dir, &OpenOptions{SkipChecksums: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	res, err := ix.SearchText(context.Background(), loadTest(t).Captions[0], &SearchOptions{K: 10, Scoring: model.Global})
	if err == nil {
		t.Fatalf("a search reported %+v", res)
	}
	if !strings.Contains(err.Error(), "not a finite number") || !strings.Contains(err.Error(), "row 3 of segment "+seg) {
		t.Fatalf("error %q, want one naming row 3 of %s and the non-finite score", err, seg)
	}
}

// TestInvertedFileCoversItems: an inverted file whose lists leave items
// out (the lists emptied, their offsets, entries and checksums made to
// match; one item dropped from one list; a vector listed twice, so that
// another is in no list) opened, and searches never found those items
// (an emptied list gave 0 results and exit status 0). Each is refused
// when the segment opens, checksums skipped or not.
func TestInvertedFileCoversItems(t *testing.T) {
	segs := forgeable(t)
	for _, tc := range []struct {
		name, format string
		edit         func(t *testing.T, h *segmentHeader, b []byte)
		want         string
	}{
		{"lists emptied", "v3-pq", func(t *testing.T, h *segmentHeader, b []byte) {
			off := h.Sections[secIVFOffsets]
			clear(b[off.Offset : off.Offset+off.Size])
			resum(h, b, secIVFOffsets)
			h.Lists = 0
			h.Sections[secIVFItems] = section{Offset: h.Sections[secIVFItems].Offset}
		}, `section "ivf-items": cell `},
		{"one item left out of a list", "v3-directions", func(t *testing.T, h *segmentHeader, b []byte) {
			offSec, itemSec := h.Sections[secIVFOffsets], h.Sections[secIVFItems]
			off := slices.Clone(sliceOf[int64](b[offSec.Offset : offSec.Offset+offSec.Size]))
			items := slices.Clone(sliceOf[int32](b[itemSec.Offset : itemSec.Offset+itemSec.Size]))
			c := 0 // the first cell with an entry
			for off[c+1] == off[c] {
				c++
			}
			items = slices.Delete(items, int(off[c]), int(off[c])+1)
			for k := c + 1; k < len(off); k++ {
				off[k]--
			}
			copy(b[offSec.Offset:], bytesOf(off))
			copy(b[itemSec.Offset:], bytesOf(items))
			resum(h, b, secIVFOffsets)
			itemSec.Size -= 4
			h.Sections[secIVFItems] = itemSec
			resum(h, b, secIVFItems)
			h.Lists--
		}, "does not list item"},
		{"a vector listed twice", "v2", func(t *testing.T, h *segmentHeader, b []byte) {
			offSec, vecSec, itemSec := h.Sections[secIVFOffsets], h.Sections[secIVFVectors], h.Sections[secIVFItems]
			off := sliceOf[int64](b[offSec.Offset : offSec.Offset+offSec.Size])
			vecs := sliceOf[int32](b[vecSec.Offset : vecSec.Offset+vecSec.Size])
			items := sliceOf[int32](b[itemSec.Offset : itemSec.Offset+itemSec.Size])
			// Replace the first entry of a list by a vector of another
			// list that still ascends before the list's second entry.
			for c := 0; c+1 < len(off); c++ {
				lo, hi := off[c], off[c+1]
				if lo == hi {
					continue
				}
				for k := range vecs {
					if (int64(k) < lo || int64(k) >= hi) && vecs[k] != vecs[lo] && (hi-lo == 1 || vecs[k] < vecs[lo+1]) {
						vecs[lo], items[lo] = vecs[k], items[k]
						resum(h, b, secIVFVectors)
						resum(h, b, secIVFItems)
						return
					}
				}
			}
			t.Fatal("no entry to duplicate")
		}, "is listed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := copyFile(t, segs[tc.format])
			forgeSegment(t, path, func(h *segmentHeader, b []byte) { tc.edit(t, h, b) })
			for _, skip := range []bool{false, true} {
				s, err := openSegment(path, skip)
				if err == nil {
					s.close()
					t.Fatalf("skip checksums %v: the inverted file that leaves items out opened", skip)
				}
				if !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("skip checksums %v: error %q, want %q", skip, err, tc.want)
				}
			}
		})
	}
}

// TestLiveSurvivesBadGeneration: a server's index follows publishes
// (Live); a published generation with a forged segment header panicked
// while it opened, the panic left the follower marked as opening for
// good, and a later real publish was never served. Now a generation that
// fails to open, by an error or by a panic, is logged, the previous one
// answers, and the next good publish is served.
func TestLiveSurvivesBadGeneration(t *testing.T) {
	ctx, s, m, dir := liveSetup(t)
	build := func(lo, hi int, mode Mode) {
		t.Helper()
		if _, err := Build(ctx, dir, m, collectionOf(s, lo, hi), &BuildOptions{Mode: mode}); err != nil {
			t.Fatal(err)
		}
	}
	search := func(l *Live, want int) {
		t.Helper()
		res, err := l.SearchText(ctx, s.Captions[0], &SearchOptions{K: 100})
		if err != nil {
			t.Fatal(err)
		}
		if ni, _ := l.Len(); len(res) != want || ni != want {
			t.Fatalf("%d results, Len %d images; want %d", len(res), ni, want)
		}
	}
	build(0, 10, Create)
	l, err := OpenLive(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	search(l, 10)

	// An append whose new images segment says 2^62 + 10 items.
	build(10, 20, Append)
	man, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	forgeSegment(t, filepath.Join(dir, man.Images[len(man.Images)-1].File), func(h *segmentHeader, b []byte) { h.Items += 1 << 62 })
	search(l, 10)
	search(l, 10)

	// A good generation after it is served.
	build(20, 35, Overwrite)
	search(l, 15)

	// A generation whose opening panics: the previous one answers.
	openIndex = func(context.Context, string, *OpenOptions) (*Index, error) { panic("opening failed unexpectedly") }
	t.Cleanup(func() { openIndex = Open })
	build(35, 40, Overwrite)
	search(l, 15)
	search(l, 15)
	openIndex = Open

	// And the next publish is followed.
	build(40, 48, Overwrite)
	search(l, 8)
	if l.reopened != 2 {
		t.Fatalf("%d generations opened after the first, want 2", l.reopened)
	}
}

// TestCatalogueFIFO: an index whose catalogue (or a journal SQLite would
// open beside it) is a FIFO with no writer is refused at once, naming the
// file; SQLite's open(2) of it blocked xmr search for good, deaf to
// SIGTERM. An append onto such an index is refused the same way.
func TestCatalogueFIFO(t *testing.T) {
	s := loadTest(t)
	m := testModel(t, "teran", 8, s.Captions)
	src := t.TempDir()
	if _, err := Build(context.Background(), src, m, collectionOf(s, 0, 10), nil); err != nil {
		t.Fatal(err)
	}
	man, err := readManifest(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file string
		run        func(dir string) error
	}{
		{"catalogue, search", man.Catalogue, func(dir string) error {
			ix, err := Open(context.Background(), dir, nil)
			if err == nil {
				ix.Close()
			}
			return err
		}},
		{"catalogue, append", man.Catalogue, func(dir string) error {
			_, err := Build(context.Background(), dir, m, collectionOf(s, 10, 12), &BuildOptions{Mode: Append})
			return err
		}},
		{"journal, search", man.Catalogue + "-journal", func(dir string) error {
			ix, err := Open(context.Background(), dir, nil)
			if err == nil {
				ix.Close()
			}
			return err
		}},
		{"write-ahead log, search", man.Catalogue + "-wal", func(dir string) error {
			ix, err := Open(context.Background(), dir, nil)
			if err == nil {
				ix.Close()
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, src, dir)
			fifo := filepath.Join(dir, tc.file)
			os.Remove(fifo)
			if err := syscall.Mkfifo(fifo, 0o644); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			done := make(chan error, 1)
			go func() { done <- tc.run(dir) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "not a regular file (a FIFO)") || !strings.Contains(err.Error(), fifo) {
					t.Fatalf("error %v, want the FIFO %s refused as not a regular file", err, fifo)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("still blocked after 20 s on the FIFO %s", fifo)
			}
		})
	}
}

// TestAppendKeepsLayout: an append onto an index stores its segments in
// the index's own layout. --compress onto float32 vectors (or
// --keep-float32 onto a compressed index) wrote segments of both kinds,
// and --exact and --int8 were then refused, saying falsely that the index
// "was built compressed"; now the layout asked for is refused, naming
// the index's and the flag to drop, and an append without a flag follows
// the index.
func TestAppendKeepsLayout(t *testing.T) {
	s := loadTest(t)
	m := testModel(t, "teran", 8, s.Captions)
	ctx := context.Background()
	built := map[Layout]string{}
	for _, l := range []Layout{LayoutFloat32, LayoutCompressed} {
		built[l] = t.TempDir()
		if _, err := Build(ctx, built[l], m, collectionOf(s, 0, 10), &BuildOptions{Layout: l}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name        string
		index, asks Layout
		want        string // the refusal; "" for an append that succeeds
	}{
		{"--compress onto float32", LayoutFloat32, LayoutCompressed, "stores its images as float32 vectors (with int8 and 4-bit codes), and an append adds segments in the index's own layout: append without --compress"},
		{"--keep-float32 onto compressed", LayoutCompressed, LayoutFloat32, "stores its images compressed (codes only, no float32 vectors), and an append adds segments in the index's own layout: append without --keep-float32"},
		{"no flag onto compressed", LayoutCompressed, LayoutAuto, ""},
		{"no flag onto float32", LayoutFloat32, LayoutAuto, ""},
		{"--compress onto compressed", LayoutCompressed, LayoutCompressed, ""},
		{"--keep-float32 onto float32", LayoutFloat32, LayoutFloat32, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, built[tc.index], dir)
			before := dirState(t, dir)
			checkErr := CheckAppend(ctx, dir, tc.asks)
			_, err := Build(ctx, dir, m, collectionOf(s, 10, 14), &BuildOptions{Mode: Append, Layout: tc.asks})
			if tc.want != "" {
				for _, e := range []error{checkErr, err} {
					if e == nil || !strings.Contains(e.Error(), tc.want) {
						t.Fatalf("error %v, want %q", e, tc.want)
					}
				}
				if after := dirState(t, dir); !slices.Equal(withoutLock(before), withoutLock(after)) {
					t.Fatalf("the refused append changed the index: %v, then %v", before, after)
				}
				return
			}
			if checkErr != nil || err != nil {
				t.Fatalf("CheckAppend: %v; append: %v", checkErr, err)
			}
			ix, err := Open(ctx, dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ix.Close()
			ci, cc := ix.Compressed()
			want := tc.index == LayoutCompressed
			if ci != want || cc != want || anyResidual(ix.images) != want || anyResidual(ix.captions) != want {
				t.Fatalf("after the append: images all compressed %v (any %v), captions %v (any %v); want all or none as the index, %v",
					ci, anyResidual(ix.images), cc, anyResidual(ix.captions), want)
			}
			if ni, _ := ix.Len(); ni != 14 {
				t.Fatalf("%d images after the append, want 14", ni)
			}
			if !want {
				if _, err := ix.SearchText(ctx, s.Captions[0], &SearchOptions{Exact: true}); err != nil {
					t.Fatalf("--exact after the append: %v", err)
				}
			}
		})
	}
	// An index that an older xmr left with both layouts says so when
	// --exact is refused, rather than that it was built compressed.
	dir := t.TempDir()
	copyDir(t, built[LayoutFloat32], dir)
	w, err := NewWriter(dir, m, Append)
	if err != nil {
		t.Fatal(err)
	}
	w.stored = nil // as an older xmr, which did not look
	if err := w.SetLayout(LayoutOptions{Layout: LayoutCompressed}); err != nil {
		t.Fatal(err)
	}
	if _, err := Encode(ctx, m, collectionOf(s, 10, 14), w, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	ix, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	_, err = ix.SearchText(ctx, s.Captions[0], &SearchOptions{Exact: true})
	if !errors.Is(err, ErrNoFloat32) || !strings.Contains(err.Error(), "1 of the 2 segments searched are compressed") || strings.Contains(err.Error(), "built compressed") {
		t.Fatalf("--exact on a mixed index: %v", err)
	}
	if err := CheckAppend(ctx, dir, LayoutCompressed); err != nil {
		t.Fatalf("--compress onto an index of both layouts: %v", err)
	}
}

// withoutLock leaves out of a dirState the lock file, which a writer
// rewrites with its pid whether or not it writes anything else.
func withoutLock(state []string) []string {
	return slices.DeleteFunc(slices.Clone(state), func(s string) bool { return strings.HasPrefix(s, "xmr.lock ") })
}

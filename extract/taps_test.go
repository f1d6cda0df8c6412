package extract

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/internal/half"
	"github.com/xmr-project/xmr/npy"
)

// The nodes of the cuts, as detect.Cuts names them.
var (
	nodeS32 = mustCut("s32").Node
	nodeS16 = mustCut("s16").Node
)

func mustCut(name string) detect.Cut {
	c, err := detect.CutNamed(name)
	if err != nil {
		panic(err)
	}
	return c
}

// TestRunTap: with Options.Taps, Run returns a copy of the detector's
// activation at the cut's node; the identity is that of the same
// extractor without taps; a detector without the tap is refused, naming
// the cut and the node.
func TestRunTap(t *testing.T) {
	dir := t.TempDir()
	s := collection(t, dir, "test", 1)
	pic, err := LoadFile(s.Items[0].Path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	det := &fakeDetector{dets: someDets, taps: []string{nodeS16, nodeS32}}
	e := newFake(t, det, Options{Taps: "s32"})
	plain := newFake(t, &fakeDetector{dets: someDets}, Options{})
	if e.Taps() != "s32" || plain.Taps() != "" {
		t.Errorf("Taps() = %q and %q, want s32 and none", e.Taps(), plain.Taps())
	}
	if !e.Identity().Equal(plain.Identity()) || e.Identity().Marshal() != plain.Identity().Marshal() {
		t.Errorf("taps changed the identity: %s vs %s", e.Identity().Marshal(), plain.Identity().Marshal())
	}
	f, err := e.Run(context.Background(), pic)
	if err != nil {
		t.Fatal(err)
	}
	want := fakeTap(nodeS32, pic.RGB)
	if f.Tap == nil || f.Tap.Cut != "s32" || f.Tap.H != 16 || f.Tap.W != 16 || f.Tap.C != 4 || !slices.Equal(f.Tap.Data, want.Data) {
		t.Fatalf("tap %+v, want the s32 node's 16x16x4 map", f.Tap)
	}
	// A copy: what the detector hands back is reused by its next runs.
	det.mu.Lock()
	clear(det.lastTap)
	det.mu.Unlock()
	if !slices.Equal(f.Tap.Data, want.Data) {
		t.Error("the tap is the detector's memory, not a copy")
	}
	// The features are those of the extractor without taps.
	pf, err := plain.Run(context.Background(), pic)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pf.Regions, f.Regions) || !slices.Equal(pf.Global, f.Global) || pf.Tap != nil {
		t.Error("the features with taps differ from those without")
	}

	for _, taps := range [][]string{nil, {nodeS16}} {
		e := newFake(t, &fakeDetector{dets: someDets, taps: taps}, Options{Taps: "s32"})
		_, err := e.Run(context.Background(), pic)
		if err == nil || !strings.Contains(err.Error(), "cut s32: the detector returns no tap at "+nodeS32+": load it with WithTaps") {
			t.Errorf("a detector tapping %v: %v", taps, err)
		}
	}
	if _, err := New(det, Options{Taps: "s8"}); err == nil || !strings.Contains(err.Error(), `no cut named "s8"`) || !strings.Contains(err.Error(), "s16 s32") {
		t.Errorf("an unknown cut: %v", err)
	}
}

// wantTaps checks that TapsPath(out, cut, split) holds, in the order of
// ids, the taps of the pictures of byID, rounded to float16.
func wantTaps(t *testing.T, out, cut, split string, ids []string, byID map[string]Item, e *Extractor) {
	t.Helper()
	path := TapsPath(out, cut, split)
	if want := filepath.Join(out, "taps-"+cut, split+".npy"); path != want {
		t.Fatalf("TapsPath = %s, want %s", path, want)
	}
	f, err := npy.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Header.DType != npy.Float16 || !slices.Equal(f.Header.Shape, []int{len(ids), 16, 16, 4}) {
		t.Fatalf("%s is %s, want (%d,16,16,4) float16", path, f.Header, len(ids))
	}
	got, err := f.ReadFloat32()
	if err != nil {
		t.Fatal(err)
	}
	per := 16 * 16 * 4
	for i, id := range ids {
		it, ok := byID[id]
		if !ok {
			t.Fatalf("no image %q", id)
		}
		pic, err := LoadFile(it.Path, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if it.Mirror {
			pic.Mirror()
		}
		feat, err := e.Run(context.Background(), pic)
		if err != nil {
			t.Fatal(err)
		}
		row := got[i*per : (i+1)*per]
		for k, v := range feat.Tap.Data {
			if w := half.ToFloat32(half.FromFloat32(v)); row[k] != w {
				t.Fatalf("%s row %d (%s) value %d: %v, want %v (%v rounded)", path, i, id, k, row[k], w, v)
			}
		}
		if i > 0 && slices.Equal(row, got[(i-1)*per:i*per]) {
			t.Errorf("rows %d and %d are equal", i-1, i)
		}
	}
}

func itemsByID(splits ...SplitSpec) map[string]Item {
	m := map[string]Item{}
	for _, s := range splits {
		for _, it := range s.Items {
			m[it.ID] = it
		}
	}
	return m
}

// TestBuildTaps extracts a train split (mirrored copies included, an
// unreadable image in the middle) and an index-only split with taps: each
// split's taps file holds its kept images' taps in the order of its ids.
func TestBuildTaps(t *testing.T) {
	dir := t.TempDir()
	train := collection(t, filepath.Join(dir, "img"), "train", 4)
	if err := os.WriteFile(train.Items[1].Path, []byte("not an image\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	train = MirrorSplit(train) // 8 images, 6 readable
	photos := collection(t, filepath.Join(dir, "img"), "photos", 3)
	photos.Captions = nil
	e := newFake(t, &fakeDetector{dets: someDets, taps: []string{nodeS32}}, Options{Taps: "s32", MaxBoxes: 8})
	out := filepath.Join(dir, "out")
	rep, err := Build(context.Background(), e, out, []SplitSpec{train, photos}, BuildOptions{ChunkSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Joined || len(rep.Skipped) != 2 || rep.Images["train"] != 6 || rep.Images["photos"] != 3 {
		t.Fatalf("report %+v", rep)
	}
	s, err := data.LoadPrecomp(context.Background(), out, "train", nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := s.ImageIDs
	if len(ids) != 6 || slices.Contains(ids, train.Items[1].ID) || ids[4] != train.Items[6].ID {
		t.Fatalf("train ids %v", ids)
	}
	byID := itemsByID(train, photos)
	wantTaps(t, out, "s32", "train", ids, byID, e)
	set, err := LoadImages(out, "photos")
	if err != nil {
		t.Fatal(err)
	}
	wantTaps(t, out, "s32", "photos", set.IDs, byID, e)

	r, err := ReadRecord(out)
	if err != nil || r.Taps != "s32" || !r.Extractor.Equal(newFake(t, &fakeDetector{}, Options{MaxBoxes: 8}).Identity()) {
		t.Errorf("record %+v, %v", r, err)
	}
	if g, err := ReadRecord(filepath.Join(out, "global")); err != nil || g.Taps != "" {
		t.Errorf("global record %+v, %v", g, err)
	}
	// Nothing else: no parts, no temporary files.
	for name := range files(t, out) {
		if strings.Contains(name, ".tmp-") || strings.HasPrefix(name, PartsDir) {
			t.Errorf("left after the join: %s", name)
		}
	}
}

// TestBuildTapsResume: parts written without taps are extracted again by a
// run that wants them, and parts with taps serve a run that does not; both
// give what an uninterrupted run gives.
func TestBuildTapsResume(t *testing.T) {
	dir := t.TempDir()
	splits := []SplitSpec{collection(t, filepath.Join(dir, "img"), "train", 10)}
	taps := []string{nodeS32}
	build := func(out string, det *fakeDetector, opt Options, ctx context.Context) (*Report, error) {
		return Build(ctx, newFake(t, det, opt), out, splits, BuildOptions{ChunkSize: 4, Workers: 1})
	}
	refTaps, refPlain := filepath.Join(dir, "ref-taps"), filepath.Join(dir, "ref-plain")
	if _, err := build(refTaps, &fakeDetector{dets: someDets, taps: taps}, Options{Taps: "s32"}, context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := build(refPlain, &fakeDetector{dets: someDets}, Options{}, context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(refPlain, "taps-s32")); !os.IsNotExist(err) {
		t.Errorf("a run without taps wrote taps: %v", err)
	}

	for _, tc := range []struct {
		name         string
		first, then  Options
		ref          string
		reused, runs int64
	}{
		{"parts without taps, a run with", Options{}, Options{Taps: "s32"}, refTaps, 0, 10},
		{"parts with taps, a run without", Options{Taps: "s32"}, Options{}, refPlain, 4, 6},
	} {
		out := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
		ctx, cancel := context.WithCancel(context.Background())
		det := &fakeDetector{dets: someDets, taps: taps, cancelAfter: 6, cancel: cancel} // chunk 0 done, chunk 1 cut off
		if _, err := build(out, det, tc.first, ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: interrupted run: %v", tc.name, err)
		}
		cancel()
		det2 := &fakeDetector{dets: someDets, taps: taps}
		rep, err := build(out, det2, tc.then, context.Background())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if int64(rep.Reused) != tc.reused || det2.calls.Load() != tc.runs {
			t.Errorf("%s: reused %d, %d detector calls; want %d and %d", tc.name, rep.Reused, det2.calls.Load(), tc.reused, tc.runs)
		}
		sameFiles(t, files(t, tc.ref), files(t, out))
	}
}

// TestBuildTapsRerun: a split written again without taps, or with another
// cut's, loses the taps files of the earlier run; a split not written
// again keeps them.
func TestBuildTapsRerun(t *testing.T) {
	dir := t.TempDir()
	train, test := collection(t, filepath.Join(dir, "img"), "train", 3), collection(t, filepath.Join(dir, "img"), "test", 2)
	det := &fakeDetector{dets: someDets, taps: []string{nodeS16, nodeS32}}
	out := filepath.Join(dir, "out")
	if _, err := Build(context.Background(), newFake(t, det, Options{Taps: "s32"}), out, []SplitSpec{train, test}, BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	exists := func(cut, split string) bool {
		_, err := os.Stat(TapsPath(out, cut, split))
		return err == nil
	}
	if !exists("s32", "train") || !exists("s32", "test") {
		t.Fatal("no taps written")
	}
	// test again with the other cut: its s32 taps go, train's stay.
	e16 := newFake(t, det, Options{Taps: "s16"})
	if _, err := Build(context.Background(), e16, out, []SplitSpec{test}, BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	if !exists("s32", "train") || exists("s32", "test") || !exists("s16", "test") {
		t.Errorf("after test with s16: s32 train %v, s32 test %v, s16 test %v", exists("s32", "train"), exists("s32", "test"), exists("s16", "test"))
	}
	wantTaps(t, out, "s16", "test", []string{test.Items[0].ID, test.Items[1].ID}, itemsByID(test), e16)
	if r, err := ReadRecord(out); err != nil || r.Taps != "s16" || r.Splits["train"].Images != 3 {
		t.Errorf("record %+v, %v", r, err)
	}
	// Both again without taps: no taps file, no taps folder, none in the
	// record.
	if _, err := Build(context.Background(), newFake(t, det, Options{}), out, []SplitSpec{train, test}, BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"taps-s16", "taps-s32"} {
		if _, err := os.Stat(filepath.Join(out, d)); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", d, err)
		}
	}
	if r, err := ReadRecord(out); err != nil || r.Taps != "" {
		t.Errorf("record %+v, %v", r, err)
	}
}

// TestBuildTapsStaleTemp: the temporary file of a taps file that a
// killed join was writing is removed by the next run.
func TestBuildTapsStaleTemp(t *testing.T) {
	dir := t.TempDir()
	splits := []SplitSpec{collection(t, filepath.Join(dir, "img"), "train", 2)}
	out := filepath.Join(dir, "out")
	tmp := filepath.Join(out, "taps-s32", ".train.npy.tmp-123")
	if err := os.MkdirAll(filepath.Dir(tmp), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newFake(t, &fakeDetector{dets: someDets, taps: []string{nodeS32}}, Options{Taps: "s32"})
	if _, err := Build(context.Background(), e, out, splits, BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("the killed join's temporary file is still there: %v", err)
	}
}

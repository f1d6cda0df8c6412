package extract

import (
	"bytes"
	"context"
	"errors"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/lockfile"
)

var someDets = []detect.Detection{
	{Box: [4]float32{10, 20, 200, 300}, Class: 0, Score: 0.9},
	{Box: [4]float32{300, 100, 500, 400}, Class: 2, Score: 0.4},
}

// files returns the names and contents of the files under dir, parts and
// temporary files included.
func files(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == lockfile.Name { // the writer's lock: its pid
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameFiles(t *testing.T, a, b map[string][]byte) {
	t.Helper()
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			t.Errorf("%s differs (present: %v)", k, ok)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			t.Errorf("%s is extra", k)
		}
	}
}

func TestBuild(t *testing.T) {
	dir := t.TempDir()
	splits := []SplitSpec{collection(t, filepath.Join(dir, "img"), "train", 7), collection(t, filepath.Join(dir, "img"), "test", 3)}
	e := newFake(t, &fakeDetector{dets: someDets}, Options{MaxBoxes: 10})
	out := filepath.Join(dir, "out")
	rep, err := Build(context.Background(), e, out, splits, BuildOptions{ChunkSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Joined || rep.Extracted != 10 || rep.Reused != 0 || len(rep.Skipped) != 0 || rep.Images["train"] != 7 {
		t.Fatalf("report %+v", rep)
	}
	s, err := data.LoadPrecomp(context.Background(), out, "train", nil)
	if err != nil {
		t.Fatal(err)
	}
	g := s.Images
	if g.N != 7 || g.R != 10 || g.D != 5 || len(s.Captions) != 35 || s.ID(6) != "train-ga" || s.CaptionsOf(6)[0] != "train-ga caption 0" {
		t.Fatalf("split: %d x %d x %d, %d captions, id %s", g.N, g.R, g.D, len(s.Captions), s.ID(6))
	}
	// Image 1 is 47 x 33 pixels: the first detection, box 10,20,200,300 of
	// 512, normalised, is 10/512 .. 300/512; 2 detections + 8 fill slots.
	if s.Sizes[1] != [2]float32{47, 33} || g.NumRegions(1) != 10 {
		t.Errorf("size %v, %d regions", s.Sizes[1], g.NumRegions(1))
	}
	if b := g.Box5(1, 0); abs(b[0]-10.0/512) > 1e-5 || abs(b[3]-300.0/512) > 1e-5 {
		t.Errorf("box %v", b)
	}
	// The features are the extractor's.
	pic, err := LoadFile(splits[0].Items[1].Path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := e.Run(context.Background(), pic)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.Image(1), f.Regions) {
		t.Errorf("image 1's features differ from the extractor's")
	}
	gs, err := data.LoadPrecomp(context.Background(), filepath.Join(out, "global"), "train", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !gs.Global || !slices.Equal(gs.Images.Image(1), f.Global) {
		t.Errorf("global features differ")
	}
	for _, d := range []string{out, filepath.Join(out, "global")} {
		id, err := ReadIdentity(d)
		if err != nil || id == nil || !id.Equal(e.Identity()) {
			t.Errorf("%s records %v (%v)", d, id, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, PartsDir)); !os.IsNotExist(err) {
		t.Errorf("parts left after the join: %v", err)
	}
	// Running again reuses nothing (the parts are gone) but gives the same
	// files; another extractor is refused.
	before := files(t, out)
	if _, err := Build(context.Background(), e, out, splits, BuildOptions{ChunkSize: 3}); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, before, files(t, out))
	other := newFake(t, &fakeDetector{}, Options{Maps: []string{"rgb"}})
	if _, err := Build(context.Background(), other, out, splits, BuildOptions{}); err == nil || !strings.Contains(err.Error(), "holds features of") {
		t.Errorf("another extractor's output: %v", err)
	}
	sameFiles(t, before, files(t, out))
}

func abs(x float32) float32 { return max(x, -x) }

var someRed, someBlue = color.RGBA{255, 0, 0, 255}, color.RGBA{0, 0, 255, 255}

// TestBuildResume stops a run in the middle (as Ctrl-C does) and checks
// that the next run extracts only what is missing and writes what an
// uninterrupted run writes.
func TestBuildResume(t *testing.T) {
	dir := t.TempDir()
	splits := []SplitSpec{collection(t, filepath.Join(dir, "img"), "train", 10)}
	ref := filepath.Join(dir, "ref")
	e := newFake(t, &fakeDetector{dets: someDets}, Options{})
	if _, err := Build(context.Background(), e, ref, splits, BuildOptions{ChunkSize: 4}); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "out")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	det := &fakeDetector{dets: someDets}
	e2 := newFake(t, det, Options{})
	det.cancelAfter, det.cancel = 6, cancel // chunk 0 done, chunk 1 cut off
	_, err := Build(ctx, e2, out, splits, BuildOptions{ChunkSize: 4, Workers: 1})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	got := files(t, out)
	if len(got) != 1 || got[filepath.Join(PartsDir, "train-000000.part")] == nil {
		t.Fatalf("after the interruption: %v, want one part", keys(got))
	}
	det2 := &fakeDetector{dets: someDets}
	e3 := newFake(t, det2, Options{})
	rep, err := Build(context.Background(), e3, out, splits, BuildOptions{ChunkSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Reused != 4 || rep.Extracted != 6 || det2.calls.Load() != 6 {
		t.Errorf("resumed: reused %d, extracted %d, %d detector calls", rep.Reused, rep.Extracted, det2.calls.Load())
	}
	sameFiles(t, files(t, ref), files(t, out))
}

func keys(m map[string][]byte) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	slices.Sort(k)
	return k
}

// TestBuildShards extracts a collection as three shards in three
// directories, gathers their parts and joins them.
func TestBuildShards(t *testing.T) {
	dir := t.TempDir()
	splits := []SplitSpec{collection(t, filepath.Join(dir, "img"), "train", 8), collection(t, filepath.Join(dir, "img"), "dev", 3)}
	e := newFake(t, &fakeDetector{dets: someDets}, Options{})
	ref := filepath.Join(dir, "ref")
	if _, err := Build(context.Background(), e, ref, splits, BuildOptions{ChunkSize: 2}); err != nil {
		t.Fatal(err)
	}
	joined := filepath.Join(dir, "joined")
	total := 0
	for i := range 3 {
		d := filepath.Join(dir, "shard", string(rune('0'+i)))
		rep, err := Build(context.Background(), e, d, splits, BuildOptions{ChunkSize: 2, Shard: i, Shards: 3})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Joined || rep.Missing == 0 {
			t.Errorf("shard %d joined alone: %+v", i, rep)
		}
		total += rep.Extracted
		parts, _ := filepath.Glob(filepath.Join(d, PartsDir, "*.part"))
		if err := os.MkdirAll(filepath.Join(joined, PartsDir), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(joined, PartsDir, filepath.Base(p)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if total != 11 {
		t.Errorf("the shards extracted %d images, want 11", total)
	}
	// --join before every part is there is refused and writes nothing.
	os.Remove(filepath.Join(joined, PartsDir, "dev-000001.part"))
	before := files(t, joined)
	if _, err := Build(context.Background(), e, joined, splits, BuildOptions{ChunkSize: 2, JoinOnly: true}); err == nil || !strings.Contains(err.Error(), "1 chunks of 2 images have no part") {
		t.Errorf("join with a part missing: %v", err)
	}
	sameFiles(t, before, files(t, joined))
	// A run of the missing shard's share, then the join.
	rep, err := Build(context.Background(), e, joined, splits, BuildOptions{ChunkSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Extracted != 1 || !rep.Joined {
		t.Errorf("join: %+v", rep)
	}
	sameFiles(t, files(t, ref), files(t, joined))
}

// TestBuildBadImages puts a truncated JPEG, a PNG header claiming
// 100000 x 100000 pixels and a text file among good images.
func TestBuildBadImages(t *testing.T) {
	dir := t.TempDir()
	s := collection(t, filepath.Join(dir, "img"), "test", 6)
	bad := map[int][]byte{
		1: encodeJPEG(t, halves(64, 64, someRed, someBlue))[:300],
		3: pngHeader(100000, 100000),
		4: []byte("not an image\n"),
	}
	for i, b := range bad {
		if err := os.WriteFile(s.Items[i].Path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := newFake(t, &fakeDetector{dets: someDets}, Options{})
	out := filepath.Join(dir, "out")
	rep, err := Build(context.Background(), e, out, []SplitSpec{s}, BuildOptions{ChunkSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Skipped) != 3 {
		t.Fatalf("skipped %v", rep.Skipped)
	}
	for k, i := range []int{1, 3, 4} {
		sk := rep.Skipped[k]
		if sk.Path != s.Items[i].Path || !strings.Contains(sk.Err, s.Items[i].Path) {
			t.Errorf("skip %d: %+v", k, sk)
		}
	}
	if !strings.Contains(rep.Skipped[1].Err, "100000x100000") {
		t.Errorf("bomb: %s", rep.Skipped[1].Err)
	}
	got, err := data.LoadPrecomp(context.Background(), out, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.NumImages() != 3 || got.ID(1) != s.Items[2].ID || got.CaptionsOf(1)[0] != s.Captions[2][0] {
		t.Errorf("%d images, image 1 is %s with %q", got.NumImages(), got.ID(1), got.CaptionsOf(1)[0])
	}
	r, err := ReadRecord(out)
	if err != nil || r.Splits["test"].Skipped != 3 || r.Splits["test"].Images != 3 {
		t.Errorf("record %+v, %v", r, err)
	}
}

func TestBuildIndexOnly(t *testing.T) {
	dir := t.TempDir()
	s := collection(t, filepath.Join(dir, "img"), "photos", 5)
	s.Captions = nil
	e := newFake(t, &fakeDetector{dets: someDets}, Options{})
	out := filepath.Join(dir, "out")
	if _, err := Build(context.Background(), e, out, []SplitSpec{s}, BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	if !IsIndexOnly(out, "photos") {
		t.Fatal("not recorded as index-only")
	}
	set, err := LoadImages(out, "photos")
	if err != nil {
		t.Fatal(err)
	}
	if set.Images.N != 5 || set.IDs[4] != s.Items[4].ID || set.Sizes[2] != [2]float32{54, 36} || set.Images.NumRegions(0) != 16 {
		t.Errorf("%d images, ids %v, sizes %v, %d regions", set.Images.N, set.IDs, set.Sizes, set.Images.NumRegions(0))
	}
	pic, _ := LoadFile(s.Items[3].Path, Limits{})
	f, _ := e.Run(context.Background(), pic)
	ref := Pack([]*Features{f}, 36, e.Width())
	if !slices.Equal(set.Images.Image(3), ref.Image(0)) || !slices.Equal(set.Images.Boxes[3*36*4:4*36*4], ref.Boxes) {
		t.Error("features or boxes differ from the extractor's")
	}
	gl, err := LoadImages(filepath.Join(out, "global"), "photos")
	if err != nil || !gl.Global || !slices.Equal(gl.Images.Image(3), f.Global) {
		t.Errorf("global: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "photos_caps.txt")); !os.IsNotExist(err) {
		t.Errorf("index-only split has a caption file")
	}
}

func TestCheckOutRefusesUnknownData(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "test_ims.npy"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newFake(t, &fakeDetector{}, Options{})
	if _, err := Build(context.Background(), e, dir, nil, BuildOptions{}); err == nil || !strings.Contains(err.Error(), "no features.json describes") {
		t.Errorf("unknown data in --out: %v", err)
	}
}

func TestCheck(t *testing.T) {
	a := &Identity{Name: "det", Version: "1", Width: 5, Maps: []string{"lin", "rgb"}, Pooling: Pooling}
	b := &Identity{Name: "det", Version: "1", Width: 3, Maps: []string{"rgb"}, Pooling: Pooling}
	tuned := &Identity{Name: "det", Version: "1", Width: 5, Maps: []string{"lin", "rgb"}, Pooling: Pooling, Tuned: "s32"}
	tests := []struct {
		model, feats *Identity
		want         string
	}{
		{nil, nil, ""},
		{a, a, ""},
		{a, b, "was trained on features of det 1 (maps lin+rgb, roialign-mean-v1, 5-d), but data holds features of det 1 (maps rgb"},
		{a, nil, "but data records no extractor"},
		{nil, b, "ckpt records no feature extractor"},
		// A model that fine-tuned the detector reads features of its own.
		{tuned, a, "5-d, the detector fine-tuned from cut s32 by the model), but data holds features of det 1 (maps lin+rgb, roialign-mean-v1, 5-d)"},
		{a, tuned, "but data holds features of det 1 (maps lin+rgb, roialign-mean-v1, 5-d, the detector fine-tuned from cut s32 by the model)"},
		{tuned, tuned, ""},
	}
	for _, tc := range tests {
		err := Check(tc.model, "ckpt", tc.feats, "data")
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v vs %v: %v", tc.model, tc.feats, err)
			}
			continue
		}
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v vs %v: %v, want %q", tc.model, tc.feats, err, tc.want)
		}
	}
	id, err := FromMeta(map[string]string{MetaKey: a.Marshal()})
	if err != nil || !id.Equal(*a) {
		t.Errorf("FromMeta: %v %v", id, err)
	}
	if id, err := FromMeta(map[string]string{MetaKey: tuned.Marshal()}); err != nil || id.Tuned != "s32" || !id.Equal(*tuned) || id.Equal(*a) {
		t.Errorf("FromMeta of a tuned identity: %+v %v", id, err)
	}
	if id, err := FromMeta(map[string]string{}); id != nil || err != nil {
		t.Errorf("FromMeta of nothing: %v %v", id, err)
	}
	if _, err := FromMeta(map[string]string{MetaKey: "{"}); err == nil {
		t.Error("FromMeta of bad JSON")
	}
}

func TestCheckKind(t *testing.T) {
	tests := []struct {
		model, feats string
		want         string // "" passes
	}{
		{KindRegions, KindRegions, ""},
		{KindGlobal, KindGlobal, ""},
		{"", KindGlobal, ""},
		{KindRegions, "", ""},
		{"", "", ""},
		{KindRegions, "index", ""},
		{KindGlobal, KindRegions, "ckpt was trained on global features (one vector per image: a data set's global/ directory), but data holds region features (boxes per image"},
		{KindRegions, KindGlobal, "ckpt was trained on region features (boxes per image: a data set's main directory), but data holds global features (one vector per image"},
	}
	for _, tc := range tests {
		err := CheckKind(tc.model, "ckpt", tc.feats, "data")
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q vs %q: %v", tc.model, tc.feats, err)
			}
			continue
		}
		if !errors.Is(err, ErrKindMismatch) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q vs %q: %v, want %q", tc.model, tc.feats, err, tc.want)
		}
	}
}

// TestSwapLeftRight: a mirrored photo's caption names the other side
// wherever a word names a side, and only there.
func TestSwapLeftRight(t *testing.T) {
	tests := []struct{ in, want string }{
		// Whole words, in any case.
		{"a dog left of a man", "a dog right of a man"},
		{"A dog on the Right, a cat on the LEFT.", "A dog on the Left, a cat on the RIGHT."},
		{"from left to right", "from right to left"},
		{"his left hand holds a cup", "his right hand holds a cup"},
		{"turning right at the corner", "turning left at the corner"},
		// Their forms.
		{"the rightmost car", "the leftmost car"},
		{"the Leftmost tree", "the Rightmost tree"},
		{"a bird flying leftward", "a bird flying rightward"},
		{"waves moving rightwards", "waves moving leftwards"},
		// Compounds that name a side.
		{"on the right-hand side", "on the left-hand side"},
		{"a left-handed pitcher", "a right-handed pitcher"},
		{"a right-facing arrow", "a left-facing arrow"},
		{"in the top-left corner", "in the top-right corner"},
		{"the lower-right quadrant", "the lower-left quadrant"},
		{"the right-most lane", "the left-most lane"},
		// Compounds that do not.
		{"a right-angled triangle", "a right-angled triangle"},
		{"a right-wing rally", "a right-wing rally"},
		{"a left-wing newspaper", "a left-wing newspaper"},
		{"a far-left party", "a far-left party"},
		{"the right-of-way sign", "the right-of-way sign"},
		{"a right-side-up cup", "a right-side-up cup"},
		{"a cup turned right-side up", "a cup turned right-side up"},
		// "right" as directly or correct, "left" as gone away from.
		{"a cat right next to a dog", "a cat right next to a dog"},
		{"a man standing right in front of a bus", "a man standing right in front of a bus"},
		{"a bird right on top of a sign", "a bird right on top of a sign"},
		{"a ball right in the middle of the field", "a ball right in the middle of the field"},
		{"a dog right behind the fence", "a dog right behind the fence"},
		{"it is all right", "it is all right"},
		{"a glass right side up", "a glass right side up"},
		{"a right angle", "a right angle"},
		{"a bag left behind on a bench", "a bag left behind on a bench"},
		{"a bike left unattended", "a bike left unattended"},
		// The words around must be only white space away.
		{"a dog on the right. Next to it a cat", "a dog on the left. Next to it a cat"},
		{"turn right, behind the tree", "turn left, behind the tree"},
		// Other words stay.
		{"leftover pizza, rightly so, copyright", "leftover pizza, rightly so, copyright"},
		{"bright lights", "bright lights"},
		{"", ""},
		{"\xffright\xfe", "\xffleft\xfe"},
	}
	for _, tc := range tests {
		if got := swapLeftRight(tc.in); got != tc.want {
			t.Errorf("swapLeftRight(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMirrorSplit(t *testing.T) {
	dir := t.TempDir()
	s := collection(t, filepath.Join(dir, "img"), "train", 2)
	s.Captions[1][0] = "A dog left of a man raises its Right paw; LEFT, right, leftover"
	m := MirrorSplit(s)
	if len(m.Items) != 4 || len(m.Captions) != 4 || m.Items[2].ID != s.Items[0].ID+MirrorSuffix || !m.Items[3].Mirror || m.Items[1].Mirror {
		t.Fatalf("mirrored split: %+v", m.Items)
	}
	if want := "A dog right of a man raises its Left paw; RIGHT, left, leftover"; m.Captions[3][0] != want {
		t.Errorf("mirrored caption %q, want %q", m.Captions[3][0], want)
	}
	if m.Captions[1][0] != s.Captions[1][0] || s.Items[0].Mirror || len(s.Items) != 2 {
		t.Error("MirrorSplit changed its input or the originals")
	}
	// A mirrored copy's features are those of the picture mirrored: its
	// boxes mirror too (the fake detects by colour: a red left half).
	e := newFake(t, &fakeDetector{dets: someDets}, Options{MaxBoxes: 4})
	out := filepath.Join(dir, "out")
	if _, err := Build(context.Background(), e, out, []SplitSpec{m}, BuildOptions{ChunkSize: 3}); err != nil {
		t.Fatal(err)
	}
	got, err := data.LoadPrecomp(context.Background(), out, "train", nil)
	if err != nil {
		t.Fatal(err)
	}
	pic, err := LoadFile(s.Items[1].Path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	pic.Mirror()
	f, err := e.Run(context.Background(), pic)
	if err != nil {
		t.Fatal(err)
	}
	if got.NumImages() != 4 || !slices.Equal(got.Images.Image(3), f.Regions) || got.ID(3) != s.Items[1].ID+MirrorSuffix {
		t.Errorf("the mirrored copy's features are not the mirrored picture's (%d images, id %s)", got.NumImages(), got.ID(3))
	}
	if slices.Equal(got.Images.Image(1), got.Images.Image(3)) {
		t.Error("the mirrored copy has the original's features")
	}
	// Mirroring twice gives the picture back.
	pic.Mirror()
	orig, _ := LoadFile(s.Items[1].Path, Limits{})
	if !slices.Equal(pic.RGB, orig.RGB) {
		t.Error("Mirror twice changed the picture")
	}
}

// TestBuildOneWriter: while a Build holds an output directory, a second
// Build on it is refused, naming the holder; once the first is done, the
// same command goes on.
func TestBuildOneWriter(t *testing.T) {
	dir := t.TempDir()
	splits := []SplitSpec{collection(t, filepath.Join(dir, "img"), "test", 3)}
	e := newFake(t, &fakeDetector{dets: someDets}, Options{})
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	held, err := lockfile.Acquire(out, "extract output")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(context.Background(), e, out, splits, BuildOptions{ChunkSize: 2})
	if !errors.Is(err, lockfile.ErrLocked) || !strings.Contains(err.Error(), "extract output") {
		t.Errorf("Build on a held output: %v, want it refused as locked", err)
	}
	if _, err := os.Stat(filepath.Join(out, PartsDir)); !os.IsNotExist(err) {
		t.Errorf("the refused Build wrote into the output: %v", err)
	}
	held.Release()
	if rep, err := Build(context.Background(), e, out, splits, BuildOptions{ChunkSize: 2}); err != nil || !rep.Joined {
		t.Errorf("Build after the holder left: %+v, %v", rep, err)
	}
}

// TestBuildJoinCutShort: a join killed after it wrote some data files but
// before features.json (every part still there) is joined again by the
// next run, to the bytes of an undisturbed run; it was refused as
// features of unknown provenance.
func TestBuildJoinCutShort(t *testing.T) {
	dir := t.TempDir()
	splits := []SplitSpec{collection(t, filepath.Join(dir, "img"), "train", 5), collection(t, filepath.Join(dir, "img"), "test", 3)}
	e := newFake(t, &fakeDetector{dets: someDets}, Options{})
	ref := filepath.Join(dir, "ref")
	if _, err := Build(context.Background(), e, ref, splits, BuildOptions{ChunkSize: 2}); err != nil {
		t.Fatal(err)
	}
	// Every part in out (two shards' runs gathered), and the data files
	// of the first split already written, as a killed join leaves them.
	out, other := filepath.Join(dir, "out"), filepath.Join(dir, "other")
	for i, d := range []string{out, other} {
		if _, err := Build(context.Background(), e, d, splits, BuildOptions{ChunkSize: 2, Shard: i, Shards: 2}); err != nil {
			t.Fatal(err)
		}
	}
	theirs, _ := filepath.Glob(filepath.Join(other, PartsDir, "*.part"))
	for _, p := range theirs {
		if err := os.Rename(p, filepath.Join(out, PartsDir, filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}
	written, _ := filepath.Glob(filepath.Join(ref, "train_*"))
	for _, p := range written {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, filepath.Base(p)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The killed join's temporary files (scripts/torture photos found
	// one left after the next run), and a file of the user's that only
	// looks like one.
	stale := []string{filepath.Join(out, ".test_ims.npy.tmp-976778927"), filepath.Join(out, "global", ".train_ims.npy.tmp-1")}
	mine := filepath.Join(out, ".notes.txt.tmp-5")
	if err := os.MkdirAll(filepath.Join(out, "global"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(stale, mine) {
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Build(context.Background(), e, out, splits, BuildOptions{ChunkSize: 2, JoinOnly: true})
	if err != nil || !rep.Joined {
		t.Fatalf("join after a cut-short join: %+v, %v", rep, err)
	}
	for _, p := range stale {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("the killed join's temporary %s is still there", p)
		}
	}
	if err := os.Remove(mine); err != nil {
		t.Fatalf("a file that is not extract's was touched: %v", err)
	}
	sameFiles(t, files(t, ref), files(t, out))
}

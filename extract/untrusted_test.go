package extract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/color"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/npy"
)

// karpathyEntry is one image of a Karpathy split file written by the
// tests below.
type karpathyEntry struct {
	Split     string           `json:"split"`
	Filepath  string           `json:"filepath,omitempty"`
	Filename  string           `json:"filename"`
	ImgID     int              `json:"imgid"`
	CocoID    *int             `json:"cocoid,omitempty"`
	Sentences []map[string]any `json:"sentences"`
}

// writeKarpathy writes a Karpathy file of entries (5 captions each) and
// returns its path.
func writeKarpathy(t *testing.T, dir, dataset string, entries []karpathyEntry) string {
	t.Helper()
	for i := range entries {
		entries[i].ImgID = i
		if entries[i].Sentences == nil {
			for k := range 5 {
				entries[i].Sentences = append(entries[i].Sentences, map[string]any{"raw": "a photo " + string(rune('0'+k))})
			}
		}
	}
	b, err := json.Marshal(map[string]any{"dataset": dataset, "images": entries})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "dataset_"+dataset+".json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestKarpathyPhotosStayInRoot: a Karpathy file names photos inside
// --image-root only, after symbolic links; any other is refused by name
// before a byte of it is read, and the error never shows the file's
// contents. ".." and absolute paths are refused by the file's reader.
func TestKarpathyPhotosStayInRoot(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	outside := filepath.Join(dir, "outside")
	for _, d := range []string{filepath.Join(root, "val2014"), filepath.Join(root, "inner"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writePNG(t, filepath.Join(root, "val2014", "ok.png"), 20, 20, color.RGBA{A: 255})
	writePNG(t, filepath.Join(root, "inner", "target.png"), 20, 20, color.RGBA{A: 255})
	secret := filepath.Join(outside, "passwd")
	if err := os.WriteFile(secret, []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		filepath.Join(root, "val2014", "leak.png"):     secret,                                     // a link to a file outside
		filepath.Join(root, "away"):                    outside,                                    // a link to a folder outside
		filepath.Join(root, "val2014", "inside.png"):   filepath.Join(root, "inner", "target.png"), // a link that stays inside
		filepath.Join(root, "val2014", "relative.png"): "../../outside/passwd",                     // a relative link out
	}
	for link, target := range links {
		if err := os.Symlink(target, link); err != nil {
			t.Skipf("symlink: %v", err)
		}
	}
	rootLink := filepath.Join(dir, "rootlink") // the root itself through a link
	if err := os.Symlink(root, rootLink); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, root, filepath, filename string
		want                           []string // "" entries: accepted
	}{
		{"inside", root, "val2014", "ok.png", nil},
		{"link inside", root, "val2014", "inside.png", nil},
		{"root through a link", rootLink, "val2014", "ok.png", nil},
		{"missing photo inside", root, "val2014", "none.png", nil},
		{"link to a file outside", root, "val2014", "leak.png", []string{"images[0]", `filename "leak.png"`, "outside the image root " + root, "refused"}},
		{"relative link out", root, "val2014", "relative.png", []string{"images[0]", "outside the image root"}},
		{"folder link outside", root, "away", "passwd", []string{"images[0]", `filepath "away"`, "outside the image root"}},
		{"missing photo in a folder link outside", root, "away", "none.png", []string{"images[0]", "outside the image root"}},
		{"link outside, root through a link", rootLink, "val2014", "leak.png", []string{"outside the image root " + rootLink}},
		{"dot-dot filepath", root, "../outside", "passwd", []string{"images[0]", `filepath "../outside" has a ".." element`}},
		{"dot-dot filename", root, "val2014", "../../outside/passwd", []string{"images[0]", `filename "../../outside/passwd" has a ".." element`}},
		{"absolute filename", root, "", secret, []string{"images[0]", "is an absolute path"}},
		{"absolute filepath", root, outside, "passwd", []string{"images[0]", "is an absolute path"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			js := writeKarpathy(t, t.TempDir(), "flickr30k", []karpathyEntry{{Split: "test", Filepath: tc.filepath, Filename: tc.filename}})
			splits, err := KarpathySplits(js, tc.root, []string{"test"}, data.IDFilename)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if want := filepath.Join(tc.root, tc.filepath, tc.filename); splits[0].Items[0].Path != want {
					t.Errorf("path %s, want %s", splits[0].Items[0].Path, want)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %+v", splits[0].Items)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q, want %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "root:x") {
				t.Errorf("the error shows the file's contents: %v", err)
			}
		})
	}
}

// TestKarpathySplitWarnings: a photo in two splits, and restval images
// outside COCO, are logged (slog.Warn) with what happens to them; COCO's
// restval goes into train without a word.
func TestKarpathySplitWarnings(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.png", "b.png", "c.png", "d.png"} {
		writePNG(t, filepath.Join(dir, name), 20, 20, color.RGBA{A: 255})
	}
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(prev)

	// Flickr: b.png in train and test; d.png of split restval.
	js := writeKarpathy(t, dir, "flickr30k", []karpathyEntry{
		{Split: "train", Filename: "a.png"}, {Split: "train", Filename: "b.png"},
		{Split: "test", Filename: "b.png"}, {Split: "test", Filename: "c.png"}, {Split: "restval", Filename: "d.png"},
	})
	splits, err := KarpathySplits(js, dir, nil, data.IDImgID)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`level=WARN msg="extract: the Karpathy file lists photos in two splits; each is extracted into both`, `splits="train and test" photos=1`, `b.png (images[1] and [2])`,
		`level=WARN msg="extract: images of split restval in a file that is not COCO's are left out`, "images=1",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log %q, want %q", logs.String(), want)
		}
	}
	if n := len(splits[0].Items) + len(splits[1].Items); splits[0].Name != "train" || n != 4 {
		t.Errorf("splits %+v", splits)
	}

	// COCO: restval is part of train, and says nothing.
	logs.Reset()
	id := func(n int) *int { return &n }
	js = writeKarpathy(t, dir, "coco", []karpathyEntry{
		{Split: "train", Filename: "a.png", CocoID: id(1)}, {Split: "restval", Filename: "b.png", CocoID: id(2)},
		{Split: "test", Filename: "c.png", CocoID: id(3)},
	})
	splits, err = KarpathySplits(js, dir, []string{"train"}, data.IDCocoID)
	if err != nil || len(splits[0].Items) != 2 || splits[0].Items[1].ID != "2" {
		t.Fatalf("COCO train: %+v, %v", splits, err)
	}
	if logs.Len() != 0 {
		t.Errorf("COCO's restval logged %q", logs.String())
	}
}

// TestCheckSplits: what Build would write and a later step refuse is
// refused before the first photo is decoded, naming the split, the image's
// id and file, and the caption.
func TestCheckSplits(t *testing.T) {
	dir := t.TempDir()
	good := func() SplitSpec { return collection(t, filepath.Join(dir, "img"), "train", 2) }
	tests := []struct {
		name string
		edit func(s *SplitSpec) []SplitSpec
		want []string
	}{
		{"blank caption", func(s *SplitSpec) []SplitSpec { s.Captions[1][2] = " \t"; return nil },
			[]string{`split train: image "train-ba"`, "train-ba.png", `caption 3 (" \t") is blank`}},
		{"zero-width caption", func(s *SplitSpec) []SplitSpec { s.Captions[0][0] = "\u200b\ufeff"; return nil },
			[]string{`image "train-aa"`, "caption 1", "is blank"}},
		{"caption with a line break", func(s *SplitSpec) []SplitSpec { s.Captions[0][4] = "a\nb"; return nil },
			[]string{`image "train-aa"`, "caption 5", "holds a line break"}},
		{"four captions", func(s *SplitSpec) []SplitSpec { s.Captions[1] = s.Captions[1][:4]; return nil },
			[]string{`image "train-ba"`, "has 4 captions, want 5"}},
		{"empty id (a file named .jpg)", func(s *SplitSpec) []SplitSpec {
			s.Items[1].ID, s.Items[1].Path = "", filepath.Join(dir, ".jpg")
			return nil
		},
			[]string{`image "" (file "` + filepath.Join(dir, ".jpg") + `"): its id is empty`}},
		{"line break in the id", func(s *SplitSpec) []SplitSpec { s.Items[1].ID = "a\nb"; return nil },
			[]string{`image "a\nb" (file`, "train-ba.png", "holds the control character U+000A"}},
		{"two images of one id", func(s *SplitSpec) []SplitSpec { s.Items[1].ID = s.Items[0].ID; return nil },
			[]string{"train-aa.png", "train-ba.png", "have the same id", "rename one of the files"}},
		{"a photo named like a mirrored copy", func(s *SplitSpec) []SplitSpec {
			s.Items[1].ID = s.Items[0].ID + MirrorSuffix
			m := MirrorSplit(*s)
			return []SplitSpec{m}
		}, []string{`image "train-aa~mirror" (file`, `(the mirrored copy of "` + filepath.Join(dir, "img", "train-aa.png") + `", made by --flip)`, "have the same id", "extract without --flip"}},
		{"split in capitals", func(s *SplitSpec) []SplitSpec { s.Name = "TRAIN"; return nil }, []string{`split name "TRAIN" differs from "train" in case only`}},
		{"split with a space", func(s *SplitSpec) []SplitSpec { s.Name = "train "; return nil }, []string{`split name "train " holds ' '`}},
		{"split with a slash", func(s *SplitSpec) []SplitSpec { s.Name = "a/b"; return nil }, []string{`split name "a/b" holds '/'`}},
		{"empty split name", func(s *SplitSpec) []SplitSpec { s.Name = ""; return nil }, []string{`split name "" is empty`}},
		{"hidden split name", func(s *SplitSpec) []SplitSpec { s.Name = ".x"; return nil }, []string{`split name ".x" starts with '.'`}},
		{"a split twice", func(s *SplitSpec) []SplitSpec { return []SplitSpec{*s, *s} }, []string{"split train is listed twice"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := good()
			splits := tc.edit(&s)
			if splits == nil {
				splits = []SplitSpec{s}
			}
			err := CheckSplits(splits)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("CheckSplits: %v, want %q", err, w)
				}
			}
			// Build refuses them before it decodes a photo or writes a
			// file.
			det := &fakeDetector{dets: someDets}
			e := newFake(t, det, Options{})
			out := filepath.Join(t.TempDir(), "out")
			if _, err := Build(context.Background(), e, out, splits, BuildOptions{}); err == nil {
				t.Error("Build accepted it")
			}
			if n := det.calls.Load(); n != 0 {
				t.Errorf("Build ran the detector %d times", n)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Build made %s (%v)", out, err)
			}
		})
	}
	if err := CheckSplits([]SplitSpec{good(), MirrorSplit(good())}); err == nil {
		// Two splits named train: the second is refused for its name.
		t.Error("two splits train accepted")
	}
	m := good()
	m.Name = "dev"
	if err := CheckSplits([]SplitSpec{MirrorSplit(good()), m}); err != nil {
		t.Errorf("good splits refused: %v", err)
	}
}

// TestNoRegionsSkipped: an image in which nothing is found, with the slots
// not filled, has no vector: it is skipped and listed, never written with
// 0 regions; and an index-only split whose nregions file says 0 for an
// image is refused naming it.
func TestNoRegionsSkipped(t *testing.T) {
	dir := t.TempDir()
	s := collection(t, filepath.Join(dir, "img"), "test", 2)
	e := newFake(t, &fakeDetector{}, Options{NoFill: true})
	fs, kept, skips, err := Collect(context.Background(), e, s.Items, 1, Limits{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 0 || len(kept) != 0 || len(skips) != 2 || !strings.Contains(skips[0].Err, "no region") || !strings.Contains(skips[0].Err, "test-aa.png") {
		t.Errorf("features of %d images, skips %+v", len(fs), skips)
	}

	// An index-only split with an image of 0 regions.
	out := filepath.Join(dir, "out")
	s.Captions = nil
	rep, err := Build(context.Background(), newFake(t, &fakeDetector{dets: someDets}, Options{}), out, []SplitSpec{s}, BuildOptions{})
	if err != nil || rep.Images["test"] != 2 {
		t.Fatalf("build: %+v, %v", rep, err)
	}
	var buf bytes.Buffer
	if err := npy.Write(&buf, []int{2}, []int32{14, 0}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "test_nregions.npy"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadImages(out, "test")
	if !errors.Is(err, data.ErrNoRegions) || !strings.Contains(err.Error(), "test_nregions.npy: image 1 (id test-ba) has 0 regions") {
		t.Errorf("LoadImages of an image with 0 regions: %v", err)
	}
}

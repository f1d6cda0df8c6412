package data

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestKarpathySplits(t *testing.T) {
	// COCO: 5003 val, 1002 test, 3 train, 2 restval.
	var splits []string
	splits = append(splits, repeat("val", 5003)...)
	splits = append(splits, "restval", "train")
	splits = append(splits, repeat("test", 1002)...)
	splits = append(splits, "train", "restval", "train")
	coco, err := ReadKarpathy(bytes.NewReader(karpathyJSON("coco", splits, repeat(5, len(splits)))), "dataset_coco.json")
	if err != nil {
		t.Fatal(err)
	}
	flickr, err := ReadKarpathy(bytes.NewReader(karpathyJSON("flickr30k", []string{"train", "val", "test", "val", "test", "train"}, repeat(5, 6))), "dataset_flickr30k.json")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		k      *Karpathy
		split  string
		n      int
		first  int
		errMsg string
	}{
		{coco, "train", 5, 5003, ""},
		{coco, "dev", 5000, 0, ""},
		{coco, "val", 5000, 0, ""},
		{coco, "test", 1000, 5005, ""},
		{coco, "testall", 1002, 5005, ""},
		{coco, "restval", 2, 5003, ""},
		{coco, "bogus", 0, 0, `unknown split "bogus"`},
		{flickr, "train", 2, 0, ""},
		{flickr, "dev", 2, 1, ""},
		{flickr, "test", 2, 2, ""},
	}
	for _, tt := range tests {
		idx, err := tt.k.SplitIndices(tt.split)
		if tt.errMsg != "" {
			wantErr(t, err, tt.errMsg)
			continue
		}
		if err != nil || len(idx) != tt.n || idx[0] != tt.first {
			t.Errorf("%s %s: %d images from %v, %v; want %d from %d", tt.k.Dataset, tt.split, len(idx), idx[:min(3, len(idx))], err, tt.n, tt.first)
		}
	}
	if !coco.IsCOCO() || flickr.IsCOCO() {
		t.Error("IsCOCO wrong")
	}
	if got := coco.Images[5003].Sentences[0]; got.Raw != "A photo 5003 of thing 0." || !slices.Equal(got.Tokens, []string{"a", "photo", "5003", "of", "thing", "0"}) {
		t.Errorf("sentence %+v", got)
	}
}

func TestKarpathyIDsAndCaptions(t *testing.T) {
	coco, _ := ReadKarpathy(bytes.NewReader(karpathyJSON("coco", []string{"test", "test"}, []int{7, 5})), "c.json")
	flickr, _ := ReadKarpathy(bytes.NewReader(karpathyJSON("flickr30k", []string{"test", "test"}, []int{5, 4})), "f.json")
	tests := []struct {
		k      *Karpathy
		scheme IDScheme
		want   string
	}{
		{coco, IDAuto, "100001"},
		{coco, IDCocoID, "100001"},
		{coco, IDImgID, "1"},
		{coco, IDFilename, "COCO_val2014_000000100001"},
		{flickr, IDAuto, "1"},
		{flickr, IDFilename, "5001"},
	}
	for _, tt := range tests {
		if got, err := tt.k.ID(1, tt.scheme); err != nil || got != tt.want {
			t.Errorf("%s ID(1, %v) = %q, %v; want %q", tt.k.Dataset, tt.scheme, got, err, tt.want)
		}
	}
	if _, err := flickr.ID(0, IDCocoID); err == nil {
		t.Error("flickr has no cocoid")
	}
	// COCO images with 7 captions keep the first 5.
	caps, err := coco.Captions([]int{0, 1}, 5)
	if err != nil || len(caps) != 10 || caps[4] != "A photo 0 of thing 4." || caps[5] != "A photo 1 of thing 0." {
		t.Fatalf("captions %q %v", caps, err)
	}
	_, err = flickr.Captions([]int{0, 1}, 5)
	wantErr(t, err, "image 1 (5001.jpg) has 4 sentences, need 5")

	for _, s := range []string{"auto", "cocoid", "imgid", "filename"} {
		if sc, err := ParseIDScheme(s); err != nil || sc.String() != s {
			t.Errorf("ParseIDScheme(%q) = %v, %v", s, sc, err)
		}
	}
	if _, err := ParseIDScheme("x"); err == nil {
		t.Error("ParseIDScheme(x) succeeded")
	}
}

// TestKarpathyBadIDsAndCaptions: an id no API can name and a caption
// with nothing to read are refused, naming the image.
func TestKarpathyBadIDsAndCaptions(t *testing.T) {
	sents := func(raw ...string) []KarpathySentence {
		var s []KarpathySentence
		for _, r := range raw {
			s = append(s, KarpathySentence{Raw: r})
		}
		return s
	}
	k := &Karpathy{Images: []KarpathyImage{
		{Filename: "ok.jpg", Sentences: sents("a", "b")},
		{Filename: ".jpg", Sentences: sents("a", "\u200b\u200b")},
		{Filename: " x.jpg", Sentences: sents("\ufeff", "b")},
		{Filename: "y.jpg", Sentences: sents("a", "\x01\x02 \u2060")},
	}}
	tests := []struct {
		name string
		err  func() error
		want string
	}{
		{"empty id", func() error { _, err := k.IDs([]int{0, 1}, IDFilename); return err },
			`image 1: filename ".jpg" gives the id "" (the file name without its extension), which is empty`},
		{"spaced id", func() error { _, err := k.ID(2, IDFilename); return err }, `gives the id " x" (the file name without its extension), which starts or ends with white space`},
		{"zero-width caption", func() error { _, err := k.Captions([]int{0, 1}, 2); return err }, `image 1 (.jpg): sentence 1 (raw "\u200b\u200b") is blank`},
		{"BOM caption", func() error { _, err := k.Captions([]int{2}, 2); return err }, `image 2 ( x.jpg): sentence 0 (raw "\ufeff") is blank`},
		{"control caption", func() error { _, err := k.Captions([]int{3}, 2); return err }, `image 3 (y.jpg): sentence 1`},
	}
	for _, tt := range tests {
		wantErr(t, tt.err(), tt.want)
	}
	if id, err := k.ID(1, IDImgID); err != nil || id != "0" {
		t.Errorf("imgid of .jpg: %q, %v", id, err)
	}
}

func TestKarpathyCaptionBreaks(t *testing.T) {
	k := &Karpathy{Images: []KarpathyImage{{Sentences: []KarpathySentence{{Raw: "a\nb"}, {Raw: "c\r\nd"}}}}}
	caps, err := k.Captions([]int{0}, 2)
	if err != nil || caps[0] != "a b" || caps[1] != "c d" {
		t.Fatalf("%q %v", caps, err)
	}
}

func TestReadKarpathyErrors(t *testing.T) {
	tests := []struct {
		name, in string
		frags    []string
	}{
		{"empty", "", []string{"k.json", "top level"}},
		{"array", "[]", []string{"top level", `where "{" was expected`}},
		{"no images", `{"dataset": "coco"}`, []string{`no "images" array`}},
		{"images not array", `{"images": 3}`, []string{"images"}},
		{"bad image", `{"images": [{"split": "train"}, {"split": 7}]}`, []string{"images[1]", "cannot unmarshal"}},
		{"bad sentences", `{"images": [{"sentences": [{"raw": 1}]}]}`, []string{"images[0]"}},
		{"truncated", `{"images": [{"split": "train", "sentences": [`, []string{"images[0]", "unexpected EOF"}},
		{"trailing", `{"images": []`, []string{"top level"}},
		{"twice", `{"images": [], "images": []}`, []string{"second images array"}},
		{"float id", `{"images": [{"imgid": 1.5}]}`, []string{"images[0]"}},
		// A split name other than Karpathy's own would put the image in no
		// split: it was left out without a word.
		{"split upper case", `{"images": [{"split": "train"}, {"split": "TRAIN", "filename": "a.jpg"}]}`,
			[]string{"k.json: images[1]", `"a.jpg": split "TRAIN": want one of train, val, test, restval`}},
		{"split with a space", `{"images": [{"split": "train ", "filename": "a.jpg"}]}`, []string{"images[0]", `split "train "`}},
		{"split dev", `{"images": [{"split": "dev"}]}`, []string{"images[0]", `(no filename): split "dev"`}},
		{"no split", `{"images": [{"filename": "a.jpg"}]}`, []string{"images[0]", `split ""`}},
		// Photos are read from the image root only.
		{"filepath up", `{"images": [{"split": "test", "filepath": "../../etc", "filename": "passwd"}]}`,
			[]string{"images[0]", `filepath "../../etc" has a ".." element`}},
		{"filename up", `{"images": [{"split": "test", "filepath": "val2014", "filename": "../../../etc/passwd"}]}`,
			[]string{"images[0]", `filename "../../../etc/passwd" has a ".." element`}},
		{"filename absolute", `{"images": [{"split": "test", "filename": "/etc/passwd"}]}`, []string{"images[0]", `filename "/etc/passwd" is an absolute path`}},
		{"filepath absolute", `{"images": [{"split": "test", "filepath": "/etc", "filename": "passwd"}]}`, []string{"images[0]", `filepath "/etc" is an absolute path`}},
		{"filename with a line break", `{"images": [{"split": "test", "filename": "a\nb.jpg"}]}`,
			[]string{"images[0]", `filename "a\nb.jpg" holds the control character U+000A`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadKarpathy(strings.NewReader(tt.in), "k.json")
			wantErr(t, err, tt.frags...)
		})
	}
	_, err := LoadKarpathy(filepath.Join(t.TempDir(), "absent.json"))
	wantErr(t, err, "absent.json")
}

func TestReadKarpathyIgnoresUnknownKeys(t *testing.T) {
	in := `{"info": {"a": [1, 2, {"b": null}]}, "images": [{"split": "test", "filename": "x.jpg", "sentids": [0], "sentences": [{"raw": "r", "tokens": ["r"], "sentid": 0}]}], "dataset": "flickr8k"}`
	k, err := ReadKarpathy(strings.NewReader(in), "k.json")
	if err != nil || k.Dataset != "flickr8k" || len(k.Images) != 1 || k.Images[0].ImgID != 0 || k.Images[0].Sentences[0].Raw != "r" {
		t.Fatalf("%+v %v", k, err)
	}
}

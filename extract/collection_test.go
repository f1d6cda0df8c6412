package extract

import (
	"encoding/json"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/data"
)

func TestKarpathySplits(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "imgs", "val2014"), 0o755)
	type sent struct {
		Raw    string   `json:"raw"`
		Tokens []string `json:"tokens"`
	}
	type img struct {
		Filepath  string `json:"filepath,omitempty"`
		Filename  string `json:"filename"`
		ImgID     int    `json:"imgid"`
		Split     string `json:"split"`
		Sentences []sent `json:"sentences"`
	}
	var imgs []img
	for i, split := range []string{"test", "train", "test", "val"} {
		name := string(rune('a'+i)) + ".png"
		sub := ""
		if i == 2 {
			sub = "val2014" // found under filepath/filename
		}
		writePNG(t, filepath.Join(dir, "imgs", sub, name), 20, 20, color.RGBA{A: 255})
		var ss []sent
		for k := range 6 { // a sixth caption is dropped
			ss = append(ss, sent{Raw: name + " caption " + string(rune('0'+k)), Tokens: []string{"x"}})
		}
		imgs = append(imgs, img{Filepath: sub, Filename: name, ImgID: i, Split: split, Sentences: ss})
	}
	b, _ := json.Marshal(map[string]any{"dataset": "flickr8k", "images": imgs})
	js := filepath.Join(dir, "dataset_flickr8k.json")
	os.WriteFile(js, b, 0o644)
	splits, err := KarpathySplits(js, filepath.Join(dir, "imgs"), []string{"test"}, data.IDAuto)
	if err != nil {
		t.Fatal(err)
	}
	s := splits[0]
	if len(s.Items) != 2 || s.Items[1].Path != filepath.Join(dir, "imgs", "val2014", "c.png") || s.Items[1].ID != "2" {
		t.Fatalf("items %+v", s.Items)
	}
	if len(s.Captions[0]) != 5 || s.Captions[0][4] != "a.png caption 4" {
		t.Errorf("captions %q", s.Captions[0])
	}
	if _, err := KarpathySplits(js, dir, []string{"nope"}, data.IDAuto); err == nil || !strings.Contains(err.Error(), "unknown split") {
		t.Errorf("unknown split: %v", err)
	}
	// Karpathy's "val" is written as "dev", the split train validates on,
	// asked for by either name or by default.
	for _, names := range [][]string{{"val"}, {"dev"}, nil} {
		splits, err := KarpathySplits(js, filepath.Join(dir, "imgs"), names, data.IDAuto)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range splits {
			got = append(got, s.Name)
		}
		want := []string{"dev"}
		if names == nil {
			want = []string{"train", "dev", "test"}
		}
		if !slices.Equal(got, want) || splits[len(splits)-1].Items[0].ID == "" {
			t.Errorf("splits %v: %v, want %v", names, got, want)
		}
	}
	// By default a split without images (Flickr8k copies without the test
	// split) is left out; asked for by name it is an error.
	var noTest []img
	for _, im := range imgs {
		if im.Split != "test" {
			noTest = append(noTest, im)
		}
	}
	b, _ = json.Marshal(map[string]any{"dataset": "flickr8k", "images": noTest})
	os.WriteFile(js, b, 0o644)
	splits, err = KarpathySplits(js, filepath.Join(dir, "imgs"), nil, data.IDAuto)
	if err != nil || len(splits) != 2 || splits[0].Name != "train" || splits[1].Name != "dev" {
		t.Errorf("no test split, by default: %v, %v", splits, err)
	}
	if _, err := KarpathySplits(js, filepath.Join(dir, "imgs"), []string{"test"}, data.IDAuto); err == nil || !strings.Contains(err.Error(), "split test has no images") {
		t.Errorf("no test split, asked for: %v", err)
	}
}

func TestReadCaptionFile(t *testing.T) {
	dir := t.TempDir()
	items := []Item{{Path: filepath.Join(dir, "a.jpg"), ID: "a"}, {Path: filepath.Join(dir, "sub", "b.png"), ID: "sub/b"}}
	var ok strings.Builder
	for k := range 5 {
		ok.WriteString("a.jpg#" + string(rune('0'+k)) + "\tfirst " + string(rune('0'+k)) + "\n")
		ok.WriteString("sub/b\tsecond " + string(rune('0'+k)) + "\r\n")
	}
	tests := []struct {
		name, text, want string
	}{
		{"good", ok.String(), ""},
		{"no tab", "a.jpg a caption\n", "line 1: no tab"},
		{"unknown image", ok.String() + "c.jpg\tx\n", `line 11: no image "c.jpg"`},
		{"empty caption", "a.jpg\t \n", "line 1: the caption of a.jpg is blank"},
		// Invisible characters are blank too: the rule of --text.
		{"zero-width caption", ok.String() + "a.jpg\t\u200b\u200b\n", "line 11: the caption of a.jpg is blank"},
		{"BOM and controls caption", "a.jpg\t\ufeff\x01\u2060\n", "line 1: the caption of a.jpg is blank"},
		// A line of a megabyte is no caption: a clear error, not
		// "bufio.Scanner: token too long".
		{"long line", "a.jpg\tfirst\n" + "a.jpg\t" + strings.Repeat("x", 1<<20) + "\n", "line 2 is longer than 1 MiB: want one caption a line"},
		{"too few", "a.jpg\tone\n", "every image needs 5 captions; a (1), sub/b (0) have fewer"},
	}
	for _, tc := range tests {
		p := filepath.Join(dir, tc.name+".txt")
		os.WriteFile(p, []byte(tc.text), 0o644)
		caps, err := ReadCaptionFile(p, dir, items)
		if tc.want == "" {
			if err != nil || caps[1][4] != "second 4" || caps[0][0] != "first 0" {
				t.Errorf("%s: %q, %v", tc.name, caps, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want %q and the file", tc.name, err, tc.want)
		}
	}
}

func TestFolderItems(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"b.JPG", "a.png", "sub/c.jpeg", ".hidden/d.png", "notes.txt", ".e.png"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte("x"), 0o644)
	}
	items, err := FolderItems(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	if strings.Join(ids, ",") != "a,b,sub/c" {
		t.Errorf("ids %v", ids)
	}
	os.WriteFile(filepath.Join(dir, "a.jpg"), []byte("x"), 0o644)
	if _, err := FolderItems(dir); err == nil || !strings.Contains(err.Error(), `the same id "a"`) {
		t.Errorf("duplicate id: %v", err)
	}
	if _, err := FolderItems(filepath.Join(dir, "sub", "c.jpeg")); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file: %v", err)
	}
}

package data

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrecompMissingBoxesWarns checks that a precomp split of region
// features without its boxes file is loaded with a WARN naming the file
// and what a model does without it (it was silent, and TERAN's results
// changed); global features, which have no boxes, and a split with its
// boxes load without it.
func TestPrecompMissingBoxesWarns(t *testing.T) {
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(prev)

	dir := t.TempDir()
	writeLines(filepath.Join(dir, "val_caps.txt"), repeat("a caption", 10))
	writeFile(t, filepath.Join(dir, "val_ims.npy"), npyOf([]int{2, 2, 1}, []float32{1, 2, 3, 4}))
	writeLines(filepath.Join(dir, "glob_caps.txt"), repeat("a caption", 10))
	writeFile(t, filepath.Join(dir, "glob_ims.npy"), npyOf([]int{2, 3}, make([]float32, 6)))
	writeLines(filepath.Join(dir, "boxed_caps.txt"), repeat("a caption", 5))
	writeFile(t, filepath.Join(dir, "boxed_ims.npy"), npyOf([]int{1, 1, 1}, []float32{1}))
	writeFile(t, filepath.Join(dir, "boxed_boxes.npy"), npyOf([]int{1, 1, 4}, []float32{0, 0, 0.5, 0.5}))
	for _, tc := range []struct {
		split string
		warn  bool
	}{{"val", true}, {"glob", false}, {"boxed", false}} {
		logs.Reset()
		s, err := LoadPrecomp(context.Background(), dir, tc.split, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		got := logs.String()
		want := filepath.Join(dir, tc.split+"_boxes.npy")
		if warned := strings.Contains(got, "level=WARN") && strings.Contains(got, want) && strings.Contains(got, "no region positions"); warned != tc.warn {
			t.Errorf("split %s: warned %v, want %v; log:\n%s", tc.split, warned, tc.warn, got)
		}
	}
}

// TestCheckGrounding checks ground truth against its split: records whose
// image, word or region lies outside the split are errors naming the file
// and line (they were skipped without a word).
func TestCheckGrounding(t *testing.T) {
	s := &Split{Name: "dev", Images: &Regions{N: 2, R: 3, D: 1, Feat: make([]float32, 6)}, CapsPerImage: 1,
		Captions: []string{"a red circle", "two blue squares here"}}
	good := `{"caption":0,"image":0,"words":[{"index":1,"word":"red","region":0},{"index":2,"word":"circle","region":2}]}
{"caption":1,"image":1,"words":[{"index":3,"word":"squares","region":1,"regions":[1,2]}]}
`
	gs, err := ReadGrounding(strings.NewReader(good), "dev_align.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckGrounding(gs, s); err != nil {
		t.Fatalf("good records: %v", err)
	}
	for _, tc := range []struct {
		name, line2, want string
	}{
		{"image", `{"caption":1,"image":7,"words":[]}`, "dev_align.jsonl line 2: caption 1: image 7 is outside the 2 images of split dev"},
		{"region", `{"caption":1,"image":1,"words":[{"index":1,"word":"blue","region":3}]}`, "line 2: caption 1: word \"blue\" has region 3, outside the 3 region slots"},
		{"regions", `{"caption":1,"image":1,"words":[{"index":1,"word":"blue","region":0,"regions":[0,99]}]}`, "has region 99"},
		{"word", `{"caption":1,"image":1,"words":[{"index":4,"word":"x","region":0}]}`, "word \"x\" has index 4, the caption has 4 words"},
	} {
		first := strings.SplitAfter(good, "\n")[0]
		gs, err := ReadGrounding(strings.NewReader(first+tc.line2+"\n"), "dev_align.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckGrounding(gs, s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	// More records than captions.
	gs, _ = ReadGrounding(strings.NewReader(good+`{"caption":2,"image":1,"words":[]}`+"\n"), "dev_align.jsonl")
	if err := CheckGrounding(gs, s); err == nil || !strings.Contains(err.Error(), "line 3: caption 2, but split dev has 2 captions") {
		t.Errorf("extra record: err = %v", err)
	}
}

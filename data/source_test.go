package data

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sourceSplits are the Karpathy splits of the source fixtures: image i of
// the flickr30k-style file has imgid i and file name 500i.jpg.
var sourceSplits = []string{"train", "val", "test", "train", "test", "val"}

// sourceFixtures writes a small dataset in each format under root and
// returns the directories: precomp (train, dev, test), bottomup (files
// named by imgid, a sizes file, dataset_flickr30k.json) and tsv (one .tsv
// file, dataset_flickr30k.json).
func sourceFixtures(t *testing.T) (precomp, bottomup, tsv string) {
	t.Helper()
	root := t.TempDir()
	precomp = filepath.Join(root, "precomp")
	for i, name := range []string{"train", "dev", "test"} {
		if err := os.MkdirAll(precomp, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := WritePrecomp(context.Background(), precomp, testSplit(name, 2+i, 3, 4, false, true)); err != nil {
			t.Fatal(err)
		}
	}

	kjson := karpathyJSON("flickr30k", sourceSplits, repeat(5, len(sourceSplits)))
	bottomup = filepath.Join(root, "bottomup")
	var ids []string
	var sizes [][2]float32
	for i := range sourceSplits {
		ids = append(ids, fmt.Sprint(i))
		sizes = append(sizes, [2]float32{200, 100})
	}
	buFixture(t, bottomup, ids, []int{2, 3, 1, 2, 3, 1}, 4)
	writeFile(t, filepath.Join(bottomup, "dataset_flickr30k.json"), kjson)
	if err := WriteSizesFile(filepath.Join(bottomup, "sizes.txt"), ids, sizes); err != nil {
		t.Fatal(err)
	}

	tsv = filepath.Join(root, "tsv")
	var recs []*TSVRecord
	for i := range sourceSplits {
		recs = append(recs, tsvRec(fmt.Sprint(5000+i), 1+i%3, 4))
	}
	writeFile(t, filepath.Join(tsv, "feats.tsv"), encodeTSV(recs...))
	writeFile(t, filepath.Join(tsv, "dataset_flickr30k.json"), kjson)
	return precomp, bottomup, tsv
}

func TestParseFormat(t *testing.T) {
	tests := []struct {
		in   string
		want Format
		err  string
	}{
		{"", FormatAuto, ""},
		{"auto", FormatAuto, ""},
		{"precomp", FormatPrecomp, ""},
		{"BottomUp", FormatBottomUp, ""},
		{"tsv", FormatTSV, ""},
		{"npz", FormatAuto, `unknown dataset format "npz": want auto, precomp, bottomup, tsv`},
		{"bottom-up", FormatAuto, "want auto, precomp, bottomup, tsv"},
	}
	for _, tc := range tests {
		got, err := ParseFormat(tc.in)
		if tc.err != "" {
			wantErr(t, err, tc.err)
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseFormat(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if tc.in != "" && !strings.EqualFold(got.String(), tc.in) {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
	if s := Format(9).String(); s != "Format(9)" {
		t.Errorf("Format(9).String() = %q", s)
	}
}

func TestSourceDetect(t *testing.T) {
	precomp, bottomup, tsv := sourceFixtures(t)
	root := filepath.Dir(precomp)
	empty := filepath.Join(root, "empty")
	both := filepath.Join(root, "both")
	parts := filepath.Join(root, "parts")
	for _, d := range []string{empty, both, parts} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(both, "test_ims.npy"), nil)
	writeFile(t, filepath.Join(both, "bu_att", "1.npz"), nil)
	tsvBytes, err := os.ReadFile(filepath.Join(tsv, "feats.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	half := len(tsvBytes) / 2
	half += strings.IndexByte(string(tsvBytes[half:]), '\n') + 1
	writeFile(t, filepath.Join(parts, "karpathy_test_genome.tsv.0"), tsvBytes[:half])
	writeFile(t, filepath.Join(parts, "karpathy_test_genome.tsv.1"), tsvBytes[half:])
	writeFile(t, filepath.Join(parts, "dataset_flickr30k.json"), karpathyJSON("flickr30k", sourceSplits, repeat(5, len(sourceSplits))))

	tests := []struct {
		name     string
		src      Source
		want     Format
		tsvFiles int
		is       error
		err      string
	}{
		{name: "precomp dir", src: Source{Path: precomp}, want: FormatPrecomp},
		{name: "bottomup dir", src: Source{Path: bottomup, SizesFile: "sizes.txt"}, want: FormatBottomUp},
		{name: "tsv dir", src: Source{Path: tsv}, want: FormatTSV, tsvFiles: 1},
		{name: "tsv file", src: Source{Path: filepath.Join(tsv, "feats.tsv")}, want: FormatTSV, tsvFiles: 1},
		{name: "tsv parts dir", src: Source{Path: parts}, want: FormatTSV, tsvFiles: 2},
		{name: "tsv glob", src: Source{Path: filepath.Join(parts, "karpathy_*.tsv.*")}, want: FormatTSV, tsvFiles: 2},
		{name: "explicit precomp", src: Source{Format: FormatPrecomp, Path: precomp}, want: FormatPrecomp},
		{name: "explicit tsv, any file name", src: Source{Format: FormatTSV, Path: filepath.Join(parts, "karpathy_test_genome.tsv.1"), KarpathyFile: filepath.Join(tsv, "dataset_flickr30k.json")}, want: FormatTSV, tsvFiles: 1},

		{name: "empty dir", src: Source{Path: empty}, is: ErrFormatUnknown,
			err: "found no *_ims.npy files (precomp), no bu_att/ folder (bottomup) and no .tsv files (tsv)"},
		{name: "two formats", src: Source{Path: both}, is: ErrFormatUnknown, err: "several formats: test_ims.npy (precomp), bu_att/ (bottomup)"},
		{name: "not a tsv file", src: Source{Path: filepath.Join(tsv, "dataset_flickr30k.json")}, is: ErrFormatUnknown, err: "a file, but not a .tsv file"},
		{name: "missing path", src: Source{Path: filepath.Join(root, "nope")}, err: "nope: stat: no such file or directory"},
		{name: "glob matching nothing", src: Source{Path: filepath.Join(root, "*.tsv")}, err: "no file matches it as a pattern"},
		{name: "glob matching other files", src: Source{Path: filepath.Join(parts, "*")}, is: ErrFormatUnknown, err: "dataset_flickr30k.json, not a .tsv file"},
		{name: "no path", src: Source{}, err: "no dataset path given"},
		{name: "bottomup without bu_att", src: Source{Format: FormatBottomUp, Path: precomp}, err: "no bu_att folder"},
		{name: "precomp on a file", src: Source{Format: FormatPrecomp, Path: filepath.Join(tsv, "feats.tsv")}, err: "feats.tsv: not a directory"},
		{name: "tsv dir without tsv files", src: Source{Format: FormatTSV, Path: empty}, err: "no .tsv files in the directory"},

		{name: "Karpathy file beside a tsv file", src: Source{Format: FormatTSV, Path: filepath.Join(tsv, "feats.tsv")}, want: FormatTSV, tsvFiles: 1},
		{name: "missing Karpathy file", src: Source{Path: bottomup, KarpathyFile: "dataset_coco.json"}, err: "Karpathy split file dataset_coco.json: no such file (nor in " + bottomup + ")"},
		{name: "Karpathy for precomp", src: Source{Path: precomp, KarpathyFile: "k.json"}, err: "a Karpathy split file given, which does not apply: precomp directories hold their captions"},
		{name: "sizes for tsv", src: Source{Path: tsv, SizesFile: "s.txt", COCOAnnotations: []string{"a.json"}}, err: "a sizes file and COCO annotation files given, which do not apply: TSV records hold their image sizes"},
		{name: "unknown format value", src: Source{Format: 7, Path: precomp}, err: "unknown format Format(7)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.src.Resolve()
			if tc.err != "" {
				wantErr(t, err, tc.err)
				if tc.is != nil && !errors.Is(err, tc.is) {
					t.Fatalf("error %q is not %q", err, tc.is)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Format != tc.want || len(r.res.tsv) != tc.tsvFiles {
				t.Fatalf("format %v with %d TSV files, want %v with %d", r.Format, len(r.res.tsv), tc.want, tc.tsvFiles)
			}
			if r2, err := r.Resolve(); err != nil || r2.res != r.res {
				t.Fatalf("resolving a resolved source: %v", err)
			}
		})
	}
}

func TestSourceKarpathyDiscovery(t *testing.T) {
	_, bottomup, tsv := sourceFixtures(t)
	r, err := Source{Path: bottomup, SizesFile: "sizes.txt"}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(bottomup, "dataset_flickr30k.json"); r.KarpathyFile != want || r.SizesFile != filepath.Join(bottomup, "sizes.txt") {
		t.Fatalf("Karpathy %s sizes %s, want %s and sizes.txt in the directory", r.KarpathyFile, r.SizesFile, want)
	}

	// A TSV file's directory is searched.
	r, err = Source{Path: filepath.Join(tsv, "feats.tsv")}.Resolve()
	if err != nil || r.KarpathyFile != filepath.Join(tsv, "dataset_flickr30k.json") {
		t.Fatalf("tsv file: %q, %v", r.KarpathyFile, err)
	}

	writeFile(t, filepath.Join(bottomup, "dataset_coco.json"), karpathyJSON("coco", []string{"test"}, []int{5}))
	_, err = Source{Path: bottomup, SizesFile: "sizes.txt"}.Resolve()
	wantErr(t, err, "cannot tell which Karpathy split file to use: none given and several dataset_*.json files in the directory: dataset_coco.json, dataset_flickr30k.json")
	if !errors.Is(err, ErrKarpathyUnknown) {
		t.Fatalf("%v is not ErrKarpathyUnknown", err)
	}
	// Naming one settles it; a relative name is also looked up in the
	// directory.
	if _, err := (Source{Path: bottomup, SizesFile: "sizes.txt", KarpathyFile: "dataset_flickr30k.json"}).Resolve(); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"dataset_coco.json", "dataset_flickr30k.json"} {
		if err := os.Remove(filepath.Join(bottomup, name)); err != nil {
			t.Fatal(err)
		}
	}
	_, err = Source{Path: bottomup, SizesFile: "sizes.txt"}.Resolve()
	wantErr(t, err, "data "+bottomup+": cannot tell which Karpathy split file to use: none given and no dataset_*.json file in the directory")
	if !errors.Is(err, ErrKarpathyUnknown) {
		t.Fatalf("%v is not ErrKarpathyUnknown", err)
	}
}

// TestSourceLoad checks that every split loaded through a Source equals
// the split of the format's own loader.
func TestSourceLoad(t *testing.T) {
	precomp, bottomup, tsv := sourceFixtures(t)
	kBU := filepath.Join(bottomup, "dataset_flickr30k.json")
	kTSV := filepath.Join(tsv, "dataset_flickr30k.json")
	sizes := filepath.Join(bottomup, "sizes.txt")
	tsvFile := filepath.Join(tsv, "feats.tsv")
	tests := []struct {
		name   string
		src    Source
		direct func(split string) (*Split, error)
	}{
		{"precomp", Source{Path: precomp}, func(split string) (*Split, error) {
			return LoadPrecomp(context.Background(), precomp, split, nil)
		}},
		{"bottomup", Source{Path: bottomup, SizesFile: "sizes.txt"}, func(split string) (*Split, error) {
			return LoadBottomUp(context.Background(), bottomup, kBU, split, &BottomUpOptions{SizesFile: sizes})
		}},
		{"tsv", Source{Path: tsv}, func(split string) (*Split, error) {
			return LoadTSV(context.Background(), []string{tsvFile}, kTSV, split, nil)
		}},
		{"tsv by imgid", Source{Format: FormatTSV, Path: tsvFile, IDs: IDImgID}, nil},
	}
	// The TSV records are named by file name; by imgid none is found.
	for _, tc := range tests {
		for _, split := range []string{"train", "dev", "test"} {
			t.Run(tc.name+"/"+split, func(t *testing.T) {
				got, err := tc.src.Load(context.Background(), split)
				if tc.direct == nil {
					wantErr(t, err, "image ids not found in "+tsvFile)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				defer got.Close()
				want, err := tc.direct(split)
				if err != nil {
					t.Fatal(err)
				}
				defer want.Close()
				if got.Name != split {
					t.Errorf("split named %q, want %q", got.Name, split)
				}
				equalSplits(t, got, want)
			})
		}
	}
}

// TestSourceDevIsVal checks that "dev" and "val" load Karpathy's val
// split, named "dev" as in precomp directories.
func TestSourceDevIsVal(t *testing.T) {
	_, bottomup, tsv := sourceFixtures(t)
	for _, src := range []Source{{Path: bottomup, SizesFile: "sizes.txt"}, {Path: tsv}} {
		r, err := src.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		for _, split := range []string{"dev", "val"} {
			s, err := r.Load(context.Background(), split)
			if err != nil {
				t.Fatalf("%s %s: %v", r, split, err)
			}
			// val images are 1 and 5.
			wantIDs := []string{"1", "5"}
			if r.Format == FormatTSV {
				wantIDs = []string{"5001", "5005"}
			}
			if s.Name != "dev" || !slices.Equal(s.ImageIDs, wantIDs) || s.Captions[5] != "A photo 5 of thing 0." {
				t.Errorf("%s %s: name %q ids %v captions %q", r, split, s.Name, s.ImageIDs, s.Captions)
			}
		}
	}
}

func TestSourceSplitErrors(t *testing.T) {
	precomp, bottomup, tsv := sourceFixtures(t)
	coco := filepath.Join(filepath.Dir(tsv), "coco")
	buFixture(t, coco, []string{"100000"}, []int{1}, 2)
	writeFile(t, filepath.Join(coco, "dataset_coco.json"), karpathyJSON("coco", []string{"test"}, []int{5}))
	tests := []struct {
		src   Source
		split string
		err   string
	}{
		{Source{Path: precomp}, "val", `precomp data ` + precomp + `: no split "val" (no val_ims.npy); it has dev, test, train`},
		{Source{Path: precomp}, "testall", `no split "testall"`},
		{Source{Path: precomp}, "../x", `bad split name "../x"`},
		{Source{Path: bottomup, SizesFile: "sizes.txt"}, "testall5", `dataset_flickr30k.json: unknown split "testall5": want train, dev, test, testall or restval`},
		{Source{Path: tsv}, "restval", `dataset_flickr30k.json: split "restval" has no images; the file's images are in "train" (2), "val" (2), "test" (2)`},
		{Source{Path: coco}, "dev", `dataset_coco.json: split "dev" (Karpathy's "val") has no images; the file's images are in "test" (1)`},
		{Source{Path: coco}, "train", `split "train" (Karpathy's "train" and "restval") has no images`},
	}
	for _, tc := range tests {
		_, err := tc.src.Load(context.Background(), tc.split)
		wantErr(t, err, tc.err)
	}
}

func TestSourceGrounding(t *testing.T) {
	precomp, bottomup, _ := sourceFixtures(t)
	writeFile(t, filepath.Join(precomp, "test_align.jsonl"), []byte(`{"caption":0,"image":0,"words":[{"index":1,"word":"circle","region":2}]}`+"\n"))
	tests := []struct {
		src   Source
		split string
		n     int
		err   string
	}{
		{Source{Path: precomp}, "test", 1, ""},
		{Source{Path: precomp}, "dev", 0, ""},
		{Source{Format: FormatBottomUp, Path: bottomup}, "test", 0, ""},
		{Source{Path: bottomup}, "test", 0, ""},
		{Source{Path: filepath.Join(precomp, "nope")}, "test", 0, "no such file"},
	}
	for _, tc := range tests {
		g, err := tc.src.Grounding(tc.split)
		if tc.err != "" {
			wantErr(t, err, tc.err)
			continue
		}
		if err != nil || len(g) != tc.n {
			t.Errorf("%s %s: %d records, %v; want %d", tc.src, tc.split, len(g), err, tc.n)
		}
	}
	r, err := Source{Path: precomp}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if g, err := r.Grounding("test"); err != nil || len(g) != 1 {
		t.Errorf("resolved: %d records, %v", len(g), err)
	}
}

func TestSourceString(t *testing.T) {
	precomp, bottomup, tsv := sourceFixtures(t)
	parts := filepath.Join(filepath.Dir(tsv), "parts")
	writeFile(t, filepath.Join(parts, "a.tsv.0"), nil)
	writeFile(t, filepath.Join(parts, "a.tsv.1"), nil)
	tests := []struct {
		src  Source
		want string
	}{
		{Source{Path: precomp}, "precomp " + precomp},
		{Source{Path: bottomup, SizesFile: "sizes.txt", IDs: IDImgID}, "bottomup " + bottomup + " (dataset_flickr30k.json, ids imgid, sizes sizes.txt)"},
		{Source{Path: tsv}, "tsv " + tsv + " (1 TSV file, dataset_flickr30k.json)"},
		{Source{Path: filepath.Join(tsv, "feats.tsv")}, "tsv " + filepath.Join(tsv, "feats.tsv") + " (dataset_flickr30k.json)"},
		{Source{Path: filepath.Join(parts, "a.tsv.*"), KarpathyFile: filepath.Join(tsv, "dataset_flickr30k.json")},
			"tsv " + filepath.Join(parts, "a.tsv.*") + " (2 TSV files, " + filepath.Join(tsv, "dataset_flickr30k.json") + ")"},
	}
	for _, tc := range tests {
		if got := tc.src.String(); !strings.HasPrefix(got, "auto "+tc.src.Path) {
			t.Errorf("unresolved: %q", got)
		}
		r, err := tc.src.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		if got := r.String(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}

func TestIsTSVName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"trainval_resnet101_faster_rcnn_genome_36.tsv", true},
		{"karpathy_train_resnet101_faster_rcnn_genome.tsv.0", true},
		{"dir/x.TSV.12", true},
		{"x.tsv.", false},
		{".tsv", false},
		{"x.tsv.gz", false},
		{"x.csv", false},
		{"tsv", false},
		{"x.tsv.0.1", false},
	}
	for _, tc := range tests {
		if got := isTSVName(tc.name); got != tc.want {
			t.Errorf("isTSVName(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func FuzzParseFormat(f *testing.F) {
	for _, s := range []string{"", "auto", "precomp", "BOTTOMUP", "tsv", "x.tsv.0", "npz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		isTSVName(s)
		got, err := ParseFormat(s)
		if err != nil {
			if got != FormatAuto || !strings.Contains(err.Error(), "want auto, precomp, bottomup, tsv") {
				t.Fatalf("ParseFormat(%q) = %v, %v", s, got, err)
			}
			return
		}
		if again, err := ParseFormat(got.String()); err != nil || again != got {
			t.Fatalf("ParseFormat(%q) = %v, but ParseFormat(%q) = %v, %v", s, got, got.String(), again, err)
		}
	})
}

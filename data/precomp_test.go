package data

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/mmap"
)

// equalSplits fails unless got has want's content.
func equalSplits(t *testing.T, got, want *Split) {
	t.Helper()
	if err := got.Validate(); err != nil {
		t.Fatal(err)
	}
	g, w := got.Images, want.Images
	if g.N != w.N || g.R != w.R || g.D != w.D || got.Global != want.Global {
		t.Fatalf("shape (%d,%d,%d) global %v, want (%d,%d,%d) global %v", g.N, g.R, g.D, got.Global, w.N, w.R, w.D, want.Global)
	}
	if !slices.Equal(g.Feat, w.Feat) {
		t.Fatal("features differ")
	}
	if !slices.Equal(got.Captions, want.Captions) || got.CapsPerImage != want.CapsPerImage {
		t.Fatal("captions differ")
	}
	if !slices.Equal(got.ImageIDs, want.ImageIDs) || !slices.Equal(got.Sizes, want.Sizes) {
		t.Fatalf("ids or sizes differ: %v %v", got.ImageIDs, got.Sizes)
	}
	for i := range w.N {
		if g.NumRegions(i) != w.NumRegions(i) {
			t.Fatalf("image %d: %d regions, want %d", i, g.NumRegions(i), w.NumRegions(i))
		}
		for r := range w.R {
			a, b := g.Box5(i, r), w.Box5(i, r)
			for c := range a {
				if math.Abs(float64(a[c]-b[c])) > 1e-6 {
					t.Fatalf("image %d region %d box %v, want %v", i, r, a, b)
				}
			}
		}
	}
}

func TestPrecompRoundTrip(t *testing.T) {
	tests := []struct {
		name             string
		global, variable bool
		noMmap           bool
		noExtras         bool
	}{
		{name: "regions"},
		{name: "regions-nommap", noMmap: true},
		{name: "variable", variable: true},
		{name: "global", global: true},
		{name: "bare", noExtras: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			want := testSplit("test", 7, 4, 6, tt.global, tt.variable)
			if tt.noExtras {
				want.ImageIDs, want.Sizes = nil, nil
			}
			if err := WritePrecomp(context.Background(), dir, want); err != nil {
				t.Fatal(err)
			}
			got, err := LoadPrecomp(context.Background(), dir, "test", &PrecompOptions{NoMmap: tt.noMmap})
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			equalSplits(t, got, want)
			if got.Images.Mapped() == tt.noMmap && hostLE && mmapAvailable {
				t.Errorf("Mapped() = %v with NoMmap %v", got.Images.Mapped(), tt.noMmap)
			}
			_, err = os.Stat(filepath.Join(dir, "test_nregions.npy"))
			if tt.variable == os.IsNotExist(err) {
				t.Errorf("test_nregions.npy written: %v, want %v", err == nil, tt.variable)
			}
		})
	}
}

// mmapAvailable reports whether this platform maps files.
var mmapAvailable = func() bool {
	f, err := os.Open(os.Args[0])
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := mmap.Map(f, 4096, mmap.ReadOnly)
	if err != nil {
		return false
	}
	mmap.Unmap(b)
	return true
}()

// hostLE reports whether this machine is little-endian, as the float32
// data of the files must be to be mapped.
var hostLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

func TestPrecompStaleFilesRemoved(t *testing.T) {
	dir := t.TempDir()
	s := testSplit("dev", 3, 2, 2, false, true)
	if err := WritePrecomp(context.Background(), dir, s); err != nil {
		t.Fatal(err)
	}
	bare := testSplit("dev", 3, 1, 2, true, false)
	bare.ImageIDs = nil
	if err := WritePrecomp(context.Background(), dir, bare); err != nil {
		t.Fatal(err)
	}
	got, err := LoadPrecomp(context.Background(), dir, "dev", nil)
	if err != nil {
		t.Fatal(err)
	}
	equalSplits(t, got, bare)
	for _, f := range []string{"dev_boxes.npy", "dev_sizes.npy", "dev_nregions.npy", "dev_ids.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s left behind", f)
		}
	}
}

// TestPrecompSCANLayout checks the layout with one (repeated) feature row
// per caption.
func TestPrecompSCANLayout(t *testing.T) {
	dir := t.TempDir()
	want := testSplit("test", 3, 2, 4, false, false)
	want.Sizes, want.Images.Boxes = nil, nil
	want.ImageIDs = nil
	g := want.Images
	var dup []float32
	for i := range g.N {
		for range 5 {
			dup = append(dup, g.Image(i)...)
		}
	}
	writeFile(t, filepath.Join(dir, "test_ims.npy"), npyOf([]int{15, 2, 4}, dup))
	writeLines(filepath.Join(dir, "test_caps.txt"), want.Captions)
	got, err := LoadPrecomp(context.Background(), dir, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	equalSplits(t, got, want)
	if got.Images.Mapped() {
		t.Error("deduplicated features still mapped")
	}

	// Rows that are not repeats are refused.
	dup[len(g.Image(0))] += 1
	writeFile(t, filepath.Join(dir, "test_ims.npy"), npyOf([]int{15, 2, 4}, dup))
	_, err = LoadPrecomp(context.Background(), dir, "test", nil)
	wantErr(t, err, "rows 0 and 1 differ")
}

func TestPrecompPixelBoxes(t *testing.T) {
	dir := t.TempDir()
	// 2 images, 2 regions, D 1.
	writeFile(t, filepath.Join(dir, "val_ims.npy"), npyOf([]int{2, 2, 1}, []float32{1, 2, 3, 0}))
	writeLines(filepath.Join(dir, "val_caps.txt"), repeat("a caption", 10))
	writeFile(t, filepath.Join(dir, "val_boxes.npy"), npyOf([]int{2, 2, 4}, []float32{
		0, 0, 320, 240, 160, 120, 640, 480,
		10, 20, 100, 200, 0, 0, 0, 0,
	}))
	writeFile(t, filepath.Join(dir, "val_sizes.npy"), npyOf([]int{2, 2}, []float32{640, 480, 100, 200}))
	writeFile(t, filepath.Join(dir, "val_nregions.npy"), npyRaw("<i8", false, []int{2}, []byte{2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}))
	writeLines(filepath.Join(dir, "val_ids.txt"), []string{"391895", "522418"})
	s, err := LoadPrecomp(context.Background(), dir, "val", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g := s.Images
	tests := []struct {
		i, r int
		want [5]float32
	}{
		{0, 0, [5]float32{0, 0, 0.5, 0.5, 0.25}},
		{0, 1, [5]float32{0.25, 0.25, 1, 1, 0.5625}},
		{1, 0, [5]float32{0.1, 0.1, 1, 1, 0.81}},
		{1, 1, [5]float32{}}, // padding
	}
	for _, tt := range tests {
		got := g.Box5(tt.i, tt.r)
		for c := range got {
			if math.Abs(float64(got[c]-tt.want[c])) > 1e-6 {
				t.Errorf("Box5(%d,%d) = %v, want %v", tt.i, tt.r, got, tt.want)
				break
			}
		}
	}
	if !slices.Equal(g.Count, []int{2, 1}) || s.ID(1) != "522418" || s.Sizes[1] != [2]float32{100, 200} {
		t.Errorf("count %v id %q sizes %v", g.Count, s.ID(1), s.Sizes)
	}
	if got := s.CaptionsOf(1); len(got) != 5 || s.ImageOf(7) != 1 {
		t.Errorf("CaptionsOf(1) = %v, ImageOf(7) = %d", got, s.ImageOf(7))
	}
	v := s.Slice(1, 2)
	if v.NumImages() != 1 || v.NumCaptions() != 5 || v.ID(0) != "522418" || v.Images.Region(0, 0)[0] != 3 {
		t.Errorf("Slice(1,2) = %+v", v)
	}

	// Pixel boxes without sizes are refused; normalised ones accepted.
	os.Remove(filepath.Join(dir, "val_sizes.npy"))
	_, err = LoadPrecomp(context.Background(), dir, "val", nil)
	wantErr(t, err, "val_boxes.npy: image 0 region 0 coordinate 2 is 320", "val_sizes.npy")
	writeFile(t, filepath.Join(dir, "val_boxes.npy"), npyOf([]int{2, 2, 4}, []float32{
		0, 0, .5, .5, .25, .25, 1, 1,
		.1, .1, 1, 1, 7, 7, 7, 7, // padding is ignored
	}))
	s2, err := LoadPrecomp(context.Background(), dir, "val", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b := s2.Images.Box5(0, 1); b != [5]float32{.25, .25, 1, 1, .5625} {
		t.Errorf("normalised box %v", b)
	}
	s2.Close()
}

func TestPrecompErrors(t *testing.T) {
	caps := func(n int) []byte {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "caption %d\n", i)
		}
		return []byte(b.String())
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	feats := func(n, R, D int, bad float32, at int) []byte {
		v := make([]float32, n*R*D)
		if at >= 0 {
			v[at] = bad
		}
		if R == 0 {
			return npyOf([]int{n, D}, make([]float32, n*D))
		}
		return npyOf([]int{n, R, D}, v)
	}
	tests := []struct {
		name  string
		files map[string][]byte
		frags []string
	}{
		{"no caps", map[string][]byte{"test_ims.npy": feats(1, 2, 3, 0, -1)}, []string{"test_caps.txt", "no such file"}},
		{"no ims", map[string][]byte{"test_caps.txt": caps(5)}, []string{"test_ims.npy", "no such file"}},
		{"caps not multiple", map[string][]byte{"test_caps.txt": caps(4999), "test_ims.npy": feats(1, 2, 3, 0, -1)},
			[]string{"test_caps.txt: has 4999 lines, not a multiple of 5"}},
		{"count mismatch", map[string][]byte{"test_caps.txt": caps(4995), "test_ims.npy": feats(1000, 1, 1, 0, -1)},
			[]string{"test_ims.npy: 1000 images need 5000 captions (5 per image), test_caps.txt has 4995 lines"}},
		{"nan", map[string][]byte{"test_caps.txt": caps(10), "test_ims.npy": feats(2, 3, 4, nan, 1*12+2*4+1)},
			[]string{"test_ims.npy: image 1 region 2 feature 1 is NaN"}},
		{"inf global", map[string][]byte{"test_caps.txt": caps(10), "test_ims.npy": npyOf([]int{2, 3}, []float32{0, 0, 0, 0, inf, 0})},
			[]string{"test_ims.npy: image 1 feature 1 is +Inf"}},
		{"4-d", map[string][]byte{"test_caps.txt": caps(5), "test_ims.npy": npyOf([]int{1, 1, 1, 1}, []float32{0})},
			[]string{"shape (1,1,1,1)"}},
		{"int features", map[string][]byte{"test_caps.txt": caps(5), "test_ims.npy": npyRaw("<i4", false, []int{1, 1}, make([]byte, 4))},
			[]string{"dtype <i4 (int32): features must be float"}},
		{"truncated", map[string][]byte{"test_caps.txt": caps(5), "test_ims.npy": npyRaw("<f4", false, []int{1, 36, 2048}, make([]byte, 100))},
			[]string{"test_ims.npy: truncated: header says (1,36,2048) float32 = 294912 bytes of data, file has 100"}},
		{"nregions too big", map[string][]byte{"test_caps.txt": caps(5), "test_ims.npy": feats(1, 2, 1, 0, -1),
			"test_nregions.npy": npyRaw("<i4", false, []int{1}, []byte{3, 0, 0, 0})},
			[]string{"test_nregions.npy: image 0 has 3 valid regions, outside [0,2]"}},
		{"nregions float", map[string][]byte{"test_caps.txt": caps(5), "test_ims.npy": feats(1, 2, 1, 0, -1),
			"test_nregions.npy": npyOf([]int{1}, []float32{1})},
			[]string{"test_nregions.npy", "want an integer type"}},
		{"ids count", map[string][]byte{"test_caps.txt": caps(10), "test_ims.npy": feats(2, 2, 1, 0, -1), "test_ids.txt": []byte("1\n2\n3\n")},
			[]string{"test_ids.txt: 3 rows for 2 images"}},
		{"boxes shape", map[string][]byte{"test_caps.txt": caps(5), "test_ims.npy": feats(1, 2, 1, 0, -1), "test_boxes.npy": npyOf([]int{1, 3, 4}, make([]float32, 12))},
			[]string{"test_boxes.npy: shape (1,3,4): want (N,2,4)"}},
		{"boxes nan", map[string][]byte{"test_caps.txt": caps(5), "test_ims.npy": feats(1, 1, 1, 0, -1), "test_boxes.npy": npyOf([]int{1, 1, 4}, []float32{0, nan, 0, 0})},
			[]string{"test_boxes.npy: image 0 region 0 coordinate 1 is NaN"}},
		{"boxes global", map[string][]byte{"test_caps.txt": caps(5), "test_ims.npy": feats(1, 0, 2, 0, -1), "test_boxes.npy": npyOf([]int{1, 1, 4}, make([]float32, 4))},
			[]string{"boxes given for global"}},
		{"bad sizes", map[string][]byte{"test_caps.txt": caps(5), "test_ims.npy": feats(1, 1, 1, 0, -1), "test_sizes.npy": npyOf([]int{1, 2}, []float32{0, 10})},
			[]string{"test_sizes.npy: image 0 has size 0 x 10"}},
		{"blank caption", map[string][]byte{"test_caps.txt": []byte("a\nb\n\nd\ne\n"), "test_ims.npy": feats(1, 1, 1, 0, -1)},
			[]string{"test_caps.txt: line 3: blank caption; every line must hold one caption"}},
		{"blank captions", map[string][]byte{"test_caps.txt": []byte("a\n \t\r\nc\n\n\ne\n"), "test_ims.npy": feats(1, 1, 1, 0, -1)},
			[]string{"test_caps.txt: line 2: blank caption (and 2 more blank lines, the last at line 5)"}},
		// Invisible characters are blank too: the same rule as --text.
		{"zero-width caption", map[string][]byte{"test_caps.txt": []byte("a\nb\n\u200b\u200b\nd\ne\n"), "test_ims.npy": feats(1, 1, 1, 0, -1)},
			[]string{"test_caps.txt: line 3: blank caption"}},
		{"BOM and controls caption", map[string][]byte{"test_caps.txt": []byte("a\nb\nc\n\ufeff\x01\x7f\u00a0\ne\n"), "test_ims.npy": feats(1, 1, 1, 0, -1)},
			[]string{"test_caps.txt: line 4: blank caption"}},
		// An image without regions has no vector: it would score 0 and
		// top every search of a model whose scores are mostly negative.
		{"nregions zero", map[string][]byte{"test_caps.txt": caps(10), "test_ims.npy": feats(2, 2, 1, 0, -1), "test_ids.txt": []byte("a\nb\n"),
			"test_nregions.npy": npyRaw("<i4", false, []int{2}, []byte{2, 0, 0, 0, 0, 0, 0, 0})},
			[]string{"test_nregions.npy: image 1 (id b) has 0 regions", "no vector to search"}},
		// SCAN's one-row-per-caption layout with a zero dimension divided
		// by zero; the image-per-row layout is refused the same way.
		{"scan no regions", map[string][]byte{"test_caps.txt": caps(5), "test_ims.npy": npyOf([]int{5, 0, 4}, nil)},
			[]string{"test_ims.npy: shape (5,0,4) has 0 regions per image"}},
		{"scan no dims", map[string][]byte{"test_caps.txt": caps(5), "test_ims.npy": npyOf([]int{5, 4, 0}, nil)},
			[]string{"test_ims.npy: shape (5,4,0) has 0 feature dimensions"}},
		{"scan global no dims", map[string][]byte{"test_caps.txt": caps(5), "test_ims.npy": npyOf([]int{5, 0}, nil)},
			[]string{"test_ims.npy: shape (5,0) has 0 feature dimensions"}},
		{"no regions", map[string][]byte{"test_caps.txt": caps(10), "test_ims.npy": npyOf([]int{2, 0, 4}, nil)},
			[]string{"test_ims.npy: shape (2,0,4) has 0 regions per image"}},
		{"boxes far out", map[string][]byte{"test_caps.txt": caps(5), "test_ims.npy": feats(1, 1, 1, 0, -1),
			"test_boxes.npy": npyOf([]int{1, 1, 4}, []float32{0, 0, 1e30, 10}), "test_sizes.npy": npyOf([]int{1, 2}, []float32{640, 480})},
			[]string{"test_boxes.npy: image 0 region 0 coordinate 2 is 1e+30", "test_sizes.npy"}},
		{"boxes negative", map[string][]byte{"test_caps.txt": caps(5), "test_ims.npy": feats(1, 1, 1, 0, -1),
			"test_boxes.npy": npyOf([]int{1, 1, 4}, []float32{0, -500, 10, 10}), "test_sizes.npy": npyOf([]int{1, 2}, []float32{640, 480})},
			[]string{"test_boxes.npy: image 0 region 0 coordinate 1 is -500"}},
		{"missing split", map[string][]byte{"train_caps.txt": caps(5), "dev_caps.txt": caps(5)},
			[]string{"test_caps.txt", "no such file", "the splits in", "are dev, train"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, b := range tt.files {
				writeFile(t, filepath.Join(dir, name), b)
			}
			s, err := LoadPrecomp(context.Background(), dir, "test", nil)
			if err == nil {
				s.Close()
			}
			wantErr(t, err, tt.frags...)
		})
	}
}

func TestPrecompConversions(t *testing.T) {
	// float64 and Fortran-order features load as float32 in C order.
	dir := t.TempDir()
	writeLines(filepath.Join(dir, "a_caps.txt"), repeat("c", 10))
	writeFile(t, filepath.Join(dir, "a_ims.npy"), npyRaw("<f8", false, []int{2, 3}, f64le(1, 2, 3, 4, 5, 6)))
	writeFile(t, filepath.Join(dir, "b_ims.npy"), npyRaw("<f4", true, []int{2, 3}, f32le(1, 4, 2, 5, 3, 6)))
	writeLines(filepath.Join(dir, "b_caps.txt"), repeat("c", 10))
	for _, name := range []string{"a", "b"} {
		s, err := LoadPrecomp(context.Background(), dir, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.Images.Feat, []float32{1, 2, 3, 4, 5, 6}) || !s.Global || s.Images.Mapped() {
			t.Errorf("%s: %v global %v mapped %v", name, s.Images.Feat, s.Global, s.Images.Mapped())
		}
	}
	// SkipFiniteCheck lets NaN through.
	writeFile(t, filepath.Join(dir, "a_ims.npy"), npyOf([]int{2, 1}, []float32{float32(math.NaN()), 0}))
	if _, err := LoadPrecomp(context.Background(), dir, "a", &PrecompOptions{SkipFiniteCheck: true}); err != nil {
		t.Fatal(err)
	}
	// CapsPerImage other than 5.
	s, err := LoadPrecomp(context.Background(), dir, "a", &PrecompOptions{SkipFiniteCheck: true, CapsPerImage: 10})
	if err == nil || s != nil {
		wantErr(t, err, "2 images need 20 captions")
	}
}

func TestWritePrecompErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name  string
		edit  func(s *Split)
		frags []string
	}{
		{"newline caption", func(s *Split) { s.Captions[3] = "two\nlines" }, []string{"caption 3 (of image 1000) holds a line break"}},
		// Captions and ids that LoadPrecomp would refuse, or read back as
		// others, are refused before anything is written.
		{"invisible caption", func(s *Split) { s.Captions[6] = "\ufeff\u200b\x01" }, []string{"x_caps.txt: caption 6 (of image 1001) is blank"}},
		{"empty id", func(s *Split) { s.ImageIDs[1] = "" }, []string{"x_ids.txt: the id \"\" of image 1 is empty"}},
		{"newline id", func(s *Split) { s.ImageIDs[1] = "a\nb" }, []string{`the id "a\nb" of image 1 holds the control character U+000A`}},
		{"spaced id", func(s *Split) { s.ImageIDs[0] = "a " }, []string{`the id "a " of image 0 starts or ends with white space`}},
		{"caption count", func(s *Split) { s.Captions = s.Captions[:4] }, []string{"2 images need 10 captions, have 4"}},
		{"feature count", func(s *Split) { s.Images.Feat = s.Images.Feat[:3] }, []string{"3 features"}},
		{"bad name", func(s *Split) { s.Name = "../x" }, []string{"bad split name"}},
		{"count range", func(s *Split) { s.Images.Count[1] = 9 }, []string{"image 1 has 9 valid regions"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSplit("x", 2, 2, 2, false, false)
			tt.edit(s)
			wantErr(t, WritePrecomp(context.Background(), dir, s), tt.frags...)
		})
	}
}

func TestReadLines(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{"a\n", []string{"a"}},
		{"a\r\nb\r\n", []string{"a", "b"}},
		{"\xef\xbb\xbfa\n\nb", []string{"a", "", "b"}},
	}
	for i, tt := range tests {
		p := filepath.Join(dir, fmt.Sprint(i))
		writeFile(t, p, []byte(tt.in))
		got, err := readLines(p)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("readLines(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

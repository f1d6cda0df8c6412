package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/server"
)

// refuseDetector makes loading the detector a test failure: what the test
// gives xmr extract must be refused before any photo is decoded.
func refuseDetector(t *testing.T) {
	t.Helper()
	old := loadDetector
	loadDetector = func(context.Context, string) (extract.Detector, error) {
		t.Error("the detector was loaded: the collection was not refused before extraction")
		return nil, errors.New("no detector in this test")
	}
	t.Cleanup(func() { loadDetector = old })
}

// TestExtractRefusesBeforeDecoding: what a later step (train, index, the
// API) would refuse, and photos outside --image-root, are refused by xmr
// extract before the detector is loaded or a photo read, naming the file,
// line, image or id at fault; nothing is written.
func TestExtractRefusesBeforeDecoding(t *testing.T) {
	refuseDetector(t)
	dir := t.TempDir()
	photos := filepath.Join(dir, "photos")
	if err := os.MkdirAll(photos, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.png", "a~mirror.png", "b.png"} {
		writeColourPNG(t, filepath.Join(photos, name), 30, 20, color.RGBA{200, 0, 0, 255})
	}
	secret := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(secret, []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The Karpathy cases' image root: the photos, and a link out of it.
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	writeColourPNG(t, filepath.Join(root, "b.png"), 30, 20, color.RGBA{200, 0, 0, 255})
	if err := os.Symlink(secret, filepath.Join(root, "leak.png")); err != nil {
		t.Skipf("symlink: %v", err)
	}
	captions := func(name string, lines ...string) string {
		var b strings.Builder
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	five := func(name string) []string {
		var l []string
		for k := range 5 {
			l = append(l, fmt.Sprintf("%s\tcaption %d of %s", name, k, name))
		}
		return l
	}
	var all []string
	for _, n := range []string{"a.png", "a~mirror.png", "b.png"} {
		all = append(all, five(n)...)
	}
	karpathy := func(name string, images ...map[string]any) string {
		for i, im := range images {
			im["imgid"] = i
			if _, ok := im["sentences"]; !ok {
				var s []map[string]string
				for k := range 5 {
					s = append(s, map[string]string{"raw": fmt.Sprintf("caption %d", k)})
				}
				im["sentences"] = s
			}
		}
		b, _ := json.Marshal(map[string]any{"dataset": "flickr30k", "images": images})
		p := filepath.Join(dir, name+".json")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	img := func(split, fp, fn string) map[string]any {
		return map[string]any{"split": split, "filepath": fp, "filename": fn}
	}
	blankSentences := img("test", "", "b.png")
	blankSentences["sentences"] = []map[string]string{{"raw": "a"}, {"raw": "\u200b\u200b"}, {"raw": "c"}, {"raw": "d"}, {"raw": "e"}}
	long := append(five("a.png"), "b.png\t"+strings.Repeat("x", 1<<20+10))

	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"--flip beside a real X~mirror photo", []string{"--images", photos, "--captions", captions("mirror.txt", all...), "--split", "train", "--flip"}, 1,
			[]string{`image "a~mirror" (file "` + filepath.Join(photos, "a~mirror.png") + `")`, `(the mirrored copy of "` + filepath.Join(photos, "a.png") + `", made by --flip)`, "have the same id", "extract without --flip"}},
		{"a zero-width caption", []string{"--images", photos, "--captions", captions("zw.txt", append(all, "b.png\t\u200b\ufeff")...)}, 1,
			[]string{"zw.txt: line 16: the caption of b.png is blank"}},
		{"a caption line of a megabyte", []string{"--images", photos, "--captions", captions("long.txt", long...)}, 1,
			[]string{"long.txt: line 6 is longer than 1 MiB"}},
		{"split in capitals", []string{"--images", photos, "--split", "TRAIN"}, 2, []string{`--split "TRAIN" differs from "train" in case only`}},
		{"split with a space", []string{"--images", photos, "--split", "train "}, 2, []string{`--split "train " holds ' '`}},
		{"Karpathy: ../ in filepath", []string{"--images", karpathy("up", img("test", "../..", "etc/passwd")), "--image-root", root}, 1,
			[]string{"up.json: images[0]", `filepath "../.." has a ".." element`}},
		{"Karpathy: an absolute filename", []string{"--images", karpathy("abs", img("test", "", secret)), "--image-root", root}, 1,
			[]string{"abs.json: images[0]", "is an absolute path"}},
		{"Karpathy: a link out of the root", []string{"--images", karpathy("link", img("test", "", "leak.png")), "--image-root", root}, 1,
			[]string{"link.json: images[0]", "outside the image root " + root}},
		{"Karpathy: split TRAIN", []string{"--images", karpathy("upper", img("train", "", "a.png"), img("TRAIN", "", "b.png")), "--image-root", root}, 1,
			[]string{"upper.json: images[1]", `split "TRAIN"`}},
		{"Karpathy: split 'train '", []string{"--images", karpathy("spaced", img("train ", "", "a.png")), "--image-root", root}, 1,
			[]string{"spaced.json: images[0]", `split "train "`}},
		{"Karpathy: a file named .png", []string{"--images", karpathy("dot", img("test", "", ".png")), "--image-root", root}, 1,
			[]string{`filename ".png" gives the id ""`, "is empty"}},
		{"Karpathy: a line break in a file name", []string{"--images", karpathy("nl", img("test", "", "a\nb.png")), "--image-root", root}, 1,
			[]string{"nl.json: images[0]", `filename "a\nb.png" holds the control character U+000A`}},
		{"Karpathy: a zero-width caption", []string{"--images", karpathy("zwk", blankSentences), "--image-root", root}, 1,
			[]string{"zwk.json", `sentence 1 (raw "\u200b\u200b") is blank`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			_, stderr, code := run(t, append([]string{"extract", "--out", out}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d: %s", code, tc.code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q, want %q", stderr, w)
				}
			}
			if strings.Contains(stderr, "root:x") {
				t.Errorf("stderr shows the contents of a file: %s", stderr)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s was made (%v)", out, err)
			}
		})
	}
}

// TestBlankText: --text made of invisible characters is refused as blank,
// as a caption of them is in any caption file (it was searched, or
// aligned).
func TestBlankText(t *testing.T) {
	for _, q := range []string{" ", "\u200b\u200b", "\ufeff", "\x01\x02", "\u2060\u00a0"} {
		_, stderr, code := run(t, "search", "--index", "unused", "--text", q)
		if code != 2 || !strings.Contains(stderr, "nothing but spaces, control or invisible characters") {
			t.Errorf("search --text %q: exit %d, %s", q, code, stderr)
		}
		_, stderr, code = run(t, "align", "--checkpoint", "x", "--out", "y.png", "--image", "z.png", "--text", q)
		if code != 2 || !strings.Contains(stderr, "--text is required") {
			t.Errorf("align --text %q: exit %d, %s", q, code, stderr)
		}
	}
	// A caption file for xmr relevance holds the same rule.
	caps := filepath.Join(t.TempDir(), "caps.txt")
	if err := os.WriteFile(caps, []byte("a red circle\n\u200b\u200b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := run(t, "relevance", "--metric", "rouge-l", "--captions", caps, "--per-image", "1", "--out", filepath.Join(t.TempDir(), "rel.bin"))
	if code != 1 || !strings.Contains(stderr, "caps.txt: line 2: the caption is blank") {
		t.Errorf("relevance on a zero-width caption: exit %d, %s", code, stderr)
	}
}

// TestServeLimitsBounded: upload limits beyond what the server can honour
// are usage errors at start (2^63-1 bytes made every upload an "empty
// upload", one less every upload a 413, and both were accepted).
func TestServeLimitsBounded(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--max-upload-bytes", "9223372036854775807"}, "--max-upload-bytes 9223372036854775807: want at most 1073741824"},
		{[]string{"--max-upload-bytes", "9223372036854775806"}, "--max-upload-bytes 9223372036854775806: want at most 1073741824"},
		{[]string{"--max-upload-bytes", "1073741825"}, "want at most 1073741824 (1 GiB"},
		{[]string{"--upload-pixel-budget", "9223372036854775807"}, "--upload-pixel-budget 9223372036854775807: want at most 1099511627776"},
		{[]string{"--max-upload-bytes", "99999999999999999999"}, "value out of range"},
	}
	for _, tc := range tests {
		_, stderr, code := run(t, append([]string{"serve", "--index", "unused"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("serve %q: exit %d, %s; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestUploadErrorOnce: the error of an upload that is too large, or no
// image, is of the server's kind and says so once.
func TestUploadErrorOnce(t *testing.T) {
	ihdr := []byte("IHDR\x00\x01\x86\xa0\x00\x01\x86\xa0\x08\x02\x00\x00\x00") // 100000 x 100000 RGB
	bomb := binary.BigEndian.AppendUint32(append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0d"), ihdr...), crc32.ChecksumIEEE(ihdr))
	tests := []struct {
		b    []byte
		kind error
		want string
	}{
		{bomb, server.ErrImageTooLarge, "image too large"},
		{[]byte("GIF89a\x01\x00\x01\x00"), server.ErrBadImage, "not a JPEG or PNG image"},
	}
	for _, tc := range tests {
		_, err := extract.Decode(tc.b, "upload", extract.Limits{MaxBytes: 1 << 20})
		err = uploadError(err)
		if !errors.Is(err, tc.kind) || strings.Count(err.Error(), tc.want) != 1 || !strings.Contains(err.Error(), "read image upload") {
			t.Errorf("%v (is %v: %v), want %q once", err, tc.kind, errors.Is(err, tc.kind), tc.want)
		}
		if errors.Is(err, server.ErrImageTooLarge) != errors.Is(err, extract.ErrTooLarge) {
			t.Errorf("%v: the kinds disagree", err)
		}
	}
}

// TestPhotoChance: the chance line of the photo demo gives recalls of at
// most 100% ("R@10 333.3%" for 3 photos).
func TestPhotoChance(t *testing.T) {
	tests := []struct {
		n    int
		want string
	}{
		{3, "(chance: R@1 33.33%, R@10 100.0% of 3 photos)"},
		{10, "(chance: R@1 10.00%, R@10 100.0% of 10 photos)"},
		{100, "(chance: R@1 1.00%, R@10 10.0% of 100 photos)"},
		{1, "(chance: R@1 100.00%, R@10 100.0% of 1 photos)"},
		{0, "(chance: no photos)"},
	}
	for _, tc := range tests {
		if got := photoChance(tc.n); got != tc.want {
			t.Errorf("photoChance(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

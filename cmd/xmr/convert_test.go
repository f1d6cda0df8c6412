package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/data"
)

// writeBottomUp writes a tiny COCO dataset of per-image bottom-up files
// into dir: a Karpathy file with the given image splits, bu_att/{cocoid}.npz
// and bu_box/{cocoid}.npy (image i has 1+i%3 regions of 4 features, pixel
// boxes of a 200 x 100 image), and two COCO caption annotation files
// holding the image sizes.
func writeBottomUp(t *testing.T, dir string, splits []string) {
	t.Helper()
	type sentence struct {
		Raw string `json:"raw"`
	}
	type image struct {
		Split     string     `json:"split"`
		Filename  string     `json:"filename"`
		ImgID     int        `json:"imgid"`
		CocoID    int        `json:"cocoid"`
		Sentences []sentence `json:"sentences"`
	}
	var images []image
	var anns [2][]map[string]any
	for i, sp := range splits {
		id := 1000 + i
		im := image{Split: sp, Filename: fmt.Sprintf("COCO_val2014_%012d.jpg", id), ImgID: i, CocoID: id}
		for j := range 5 {
			im.Sentences = append(im.Sentences, sentence{fmt.Sprintf("image %d caption %d", i, j)})
		}
		images = append(images, im)
		anns[i%2] = append(anns[i%2], map[string]any{"id": id, "width": 200, "height": 100})

		n, D := 1+i%3, 4
		feat := make([]float32, n*D)
		boxes := make([]float32, n*4)
		for r := range n {
			for d := range D {
				feat[r*D+d] = float32(i) + float32(r)/10 + float32(d)/100
			}
			copy(boxes[r*4:], []float32{10 * float32(r), 20, 100, 50})
		}
		npy := filepath.Join(t.TempDir(), "feat.npy")
		if err := data.WriteNPY(npy, []int{n, D}, feat); err != nil {
			t.Fatal(err)
		}
		writeNPZ(t, filepath.Join(dir, "bu_att", fmt.Sprint(id)+".npz"), npy)
		if err := os.MkdirAll(filepath.Join(dir, "bu_box"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := data.WriteNPY(filepath.Join(dir, "bu_box", fmt.Sprint(id)+".npy"), []int{n, 4}, boxes); err != nil {
			t.Fatal(err)
		}
	}
	writeJSON(t, filepath.Join(dir, "dataset_coco.json"), map[string]any{"dataset": "coco", "images": images})
	writeJSON(t, filepath.Join(dir, "captions_train2014.json"), map[string]any{"images": anns[0], "annotations": []any{}})
	writeJSON(t, filepath.Join(dir, "captions_val2014.json"), map[string]any{"images": anns[1], "annotations": []any{}})
}

// writeNPZ writes an .npz archive at path holding the .npy file npy as
// its array "feat".
func writeNPZ(t *testing.T, path, npy string) {
	t.Helper()
	b, err := os.ReadFile(npy)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	w, err := z.Create("feat.npy")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConvertBottomUp(t *testing.T) {
	src := t.TempDir()
	writeBottomUp(t, src, []string{"train", "val", "test", "restval", "test", "val", "train"})
	out := filepath.Join(t.TempDir(), "precomp")
	args := []string{"convert", "--data", src, "--karpathy", "dataset_coco.json",
		"--coco-annotations", "captions_train2014.json,captions_val2014.json", "--splits", "train,dev,test", "--out", out}
	var stdout, stderr bytes.Buffer
	if code := runMain(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	ann := []string{filepath.Join(src, "captions_train2014.json"), filepath.Join(src, "captions_val2014.json")}
	for _, split := range []string{"train", "dev", "test"} {
		got, err := data.LoadPrecomp(context.Background(), out, split, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := data.LoadBottomUp(context.Background(), src, filepath.Join(src, "dataset_coco.json"), split, &data.BottomUpOptions{COCOAnnotations: ann})
		if err != nil {
			t.Fatal(err)
		}
		g, w := got.Images, want.Images
		if g.N != w.N || g.R != w.R || g.D != w.D || !slices.Equal(g.Feat, w.Feat) || !slices.Equal(g.Count, w.Count) {
			t.Fatalf("%s: features (%d,%d,%d) count %v, want (%d,%d,%d) count %v", split, g.N, g.R, g.D, g.Count, w.N, w.R, w.D, w.Count)
		}
		if !slices.Equal(got.Captions, want.Captions) || !slices.Equal(got.ImageIDs, want.ImageIDs) || !slices.Equal(got.Sizes, want.Sizes) {
			t.Fatalf("%s: captions %q ids %v sizes %v", split, got.Captions, got.ImageIDs, got.Sizes)
		}
		for j := range w.Boxes {
			if d := g.Boxes[j] - w.Boxes[j]; d > 1e-6 || d < -1e-6 {
				t.Fatalf("%s: box coordinate %d is %v, want %v", split, j, g.Boxes[j], w.Boxes[j])
			}
		}
		got.Close()
	}
	// train is Karpathy's train and restval, dev its val.
	dev, err := data.LoadPrecomp(context.Background(), out, "dev", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if train, _ := data.LoadPrecomp(context.Background(), out, "train", nil); train.Images.N != 3 || !slices.Equal(dev.ImageIDs, []string{"1001", "1005"}) {
		t.Fatalf("train has %d images, dev ids %v", train.Images.N, dev.ImageIDs)
	}
}

func TestConvertErrors(t *testing.T) {
	src := t.TempDir()
	writeBottomUp(t, src, []string{"train", "val", "test"})
	empty := t.TempDir()
	several := t.TempDir()
	writeBottomUp(t, several, []string{"test"})
	writeJSON(t, filepath.Join(several, "dataset_flickr30k.json"), map[string]any{"images": []any{}})
	out := t.TempDir()
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"help", []string{"convert", "-h"}, 0, []string{"Usage: xmr convert", "-coco-annotations FILES", "-karpathy FILE", "-format string", "-ids string", "-sizes FILE", "-splits SPLITS", "Examples:"}},
		{"no out", []string{"convert", "--data", src}, 2, []string{"--out is required"}},
		{"no data", []string{"convert", "--out", out}, 2, []string{"--data is required"}},
		{"bad format", []string{"convert", "--data", src, "--format", "npz", "--out", out}, 2, []string{`--format: unknown dataset format "npz": want auto, precomp, bottomup, tsv`}},
		{"bad ids", []string{"convert", "--data", src, "--ids", "x", "--out", out}, 2, []string{"--ids: unknown image id scheme"}},
		{"extra args", []string{"convert", "--data", src, "--out", out, "b.tsv"}, 2, []string{"unexpected arguments", "quote"}},
		{"no splits", []string{"convert", "--data", src, "--out", out, "--splits", ","}, 2, []string{"--splits names no split"}},
		{"unknown format", []string{"convert", "--data", empty, "--out", out}, 1, []string{"cannot tell the dataset format", "pass --format precomp, bottomup or tsv"}},
		{"several Karpathy files", []string{"convert", "--data", several, "--out", out}, 1, []string{"several dataset_*.json files", "pass --karpathy FILE"}},
		{"no sizes", []string{"convert", "--data", src, "--out", out}, 1, []string{"bu_box holds pixel boxes, which need image sizes"}},
		{"missing split", []string{"convert", "--data", src, "--coco-annotations", "captions_train2014.json", "--coco-annotations", "captions_val2014.json",
			"--splits", "restval", "--out", out}, 1, []string{`split "restval" has no images; the file's images are in "train" (1), "val" (1), "test" (1)`}},
		{"out is data", []string{"convert", "--data", src, "--coco-annotations", "captions_train2014.json", "--out", src}, 2, []string{"--out " + src + " is the directory that --data " + src + " reads"}},
		{"out in data", []string{"convert", "--data", src, "--coco-annotations", "captions_train2014.json", "--out", filepath.Join(src, "precomp")}, 2, []string{"--out " + filepath.Join(src, "precomp") + " is inside --data " + src}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runMain(tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, stderr.String())
			}
			text := stdout.String() + stderr.String()
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("output lacks %q:\n%s", w, text)
				}
			}
		})
	}
}

func TestConvertTSVParts(t *testing.T) {
	dir := t.TempDir()
	splits := []string{"test", "train", "test", "val"}
	type image struct {
		Split     string           `json:"split"`
		Filename  string           `json:"filename"`
		Sentences []map[string]any `json:"sentences"`
	}
	var images []image
	var parts [2][]byte
	for i, sp := range splits {
		im := image{Split: sp, Filename: fmt.Sprintf("%d.jpg", 7000+i)}
		for j := range 5 {
			im.Sentences = append(im.Sentences, map[string]any{"raw": fmt.Sprintf("image %d caption %d", i, j)})
		}
		images = append(images, im)
		rec := &data.TSVRecord{ImageID: fmt.Sprint(7000 + i), Width: 100, Height: 50, NumBoxes: 1, D: 2,
			Boxes: []float32{10, 5, 50, 25}, Feat: []float32{float32(i), 1}}
		parts[i%2] = data.EncodeTSVRecord(parts[i%2], rec)
	}
	writeJSON(t, filepath.Join(dir, "dataset_flickr30k.json"), map[string]any{"dataset": "flickr30k", "images": images})
	for i, b := range parts {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("karpathy_genome.tsv.%d", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "precomp")
	var stdout, stderr bytes.Buffer
	if code := runMain([]string{"convert", "--data", filepath.Join(dir, "*.tsv.*"), "--splits", "test", "--out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	s, err := data.LoadPrecomp(context.Background(), out, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	box := s.Images.Box5(1, 0)
	if !slices.Equal(s.ImageIDs, []string{"7000", "7002"}) || !slices.Equal(s.Images.Feat, []float32{0, 1, 2, 1}) ||
		[4]float32(box[:4]) != [4]float32{0.1, 0.1, 0.5, 0.5} || s.Captions[5] != "image 2 caption 0" {
		t.Fatalf("ids %v feat %v box %v captions %q", s.ImageIDs, s.Images.Feat, box, s.Captions)
	}
}

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/photomodel"
)

// builtinValRSum is the built-in photo model's rsum on Flickr8k's 1,000
// val photos, as docs/photos.md and the README give it (the checkpoint
// was picked on val).
const builtinValRSum = 214.8

// TestBuiltinPhotoModel extracts Flickr8k's 1,000 val photos from the
// shared set as a user would (xmr extract with the taps of the model's
// cut) and checks that the built-in photo model scores the recall its
// documentation gives, within the rounding of another machine's kernels;
// then that xmr index --images, given no checkpoint, indexes a folder of
// photos with it.
func TestBuiltinPhotoModel(t *testing.T) {
	shared := needPhotos(t)
	dir := t.TempDir()
	karpathy, valPhotos := photoSubset(t, shared, dir, 0, 1000)
	feats := filepath.Join(dir, "feats")
	if _, stderr, code := run(t, "extract", "--images", karpathy, "--image-root", filepath.Join(shared, "images"), "--ids", "filename",
		"--splits", "dev", "--taps", "s32", "--out", feats, "--workers", "2"); code != 0 {
		t.Fatalf("extract: exit %d: %s", code, stderr)
	}
	cache := filepath.Join(dir, "cache")
	ckpt, err := photomodel.Path(cache)
	if err != nil {
		t.Fatal(err)
	}
	rep := evalRecall(t, ckpt, feats, "dev")
	t.Logf("the built-in photo model on Flickr8k val: i2t R@1/5/10 %.1f/%.1f/%.1f, t2i %.1f/%.1f/%.1f, rsum %.1f (documented %.1f)",
		rep.I2T.R1, rep.I2T.R5, rep.I2T.R10, rep.T2I.R1, rep.T2I.R5, rep.T2I.R10, rep.RSum, builtinValRSum)
	if rep.RSum < builtinValRSum-1.5 {
		t.Errorf("rsum %.1f: the documented figure is %.1f", rep.RSum, builtinValRSum)
	}

	// A folder of photos and no checkpoint: the built-in model. The
	// detector's weights come from the default cache (needPhotos).
	sub := filepath.Join(dir, "some")
	photos, err := filepath.Glob(filepath.Join(valPhotos, "*.jpg"))
	if err != nil || len(photos) < 40 {
		t.Fatalf("%d val photos: %v", len(photos), err)
	}
	linkAll(t, photos[:40], sub)
	idx := filepath.Join(dir, "some.idx")
	stdout, stderr, code := run(t, "index", "--images", sub, "--out", idx)
	if code != 0 || !strings.Contains(stdout, "indexed 40 photos") || !strings.Contains(stderr, "built-in photo model") {
		t.Fatalf("index --images without --checkpoint: exit %d\n%s\n%s", code, stdout, stderr)
	}
	ix, err := index.Open(context.Background(), idx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if n, _ := ix.Len(); n != 40 {
		t.Fatalf("the index holds %d photos, want 40", n)
	}
}

// linkAll links the files into the new directory dir.
func linkAll(t *testing.T, files []string, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.Symlink(f, filepath.Join(dir, filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/photomodel"
)

// builtinValRSum is the built-in photo model's rsum on Flickr8k's 1,000
// val photos, as docs/photos.md and the README give it (the checkpoint
// was picked on val).
const builtinValRSum = 227.4

// builtinFusedValRSum is the rsum of the built-in photo model's models
// fused (its region model and photomodel.Partners at their weights) on
// the same photos, in half precision, with text-to-image ranking
// normalised by its query bank (photomodel.QueryBank), as its folder
// indexes search (docs/photos.md; 260.6 without the bank).
const builtinFusedValRSum = 263.1

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
	args, weights := []string{"eval", "--checkpoint", ckpt}, "1"
	for _, p := range photomodel.Partners() {
		path, err := p.Path(cache)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "--checkpoint", path)
		weights += fmt.Sprintf(",%g", p.Weight)
	}
	bank := filepath.Join(dir, "querybank.txt")
	if err := os.WriteFile(bank, []byte(strings.Join(photomodel.QueryBank(), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, append(args, "--weights", weights, "--data", feats, "--split", "dev", "--json", "--no-ndcg", "--querybank-captions", bank)...)
	if code != 0 {
		t.Fatalf("eval of the fusion: exit %d: %s", code, stderr)
	}
	var fused recallReport
	if err := json.Unmarshal([]byte(stdout), &fused); err != nil {
		t.Fatalf("eval --json printed %q: %v", stdout, err)
	}
	// The region model alone: the fusion's first member, evaluated as it
	// ranks before the fusion (eval's report of each member).
	if len(fused.Members) != len(photomodel.Partners())+1 {
		t.Fatalf("eval of the fusion reported %d members alone, want %d", len(fused.Members), len(photomodel.Partners())+1)
	}
	rep := fused.Members[0]
	t.Logf("the built-in photo model on Flickr8k val: i2t R@1/5/10 %.1f/%.1f/%.1f, t2i %.1f/%.1f/%.1f, rsum %.1f (documented %.1f)",
		rep.I2T.R1, rep.I2T.R5, rep.I2T.R10, rep.T2I.R1, rep.T2I.R5, rep.T2I.R10, rep.RSum, builtinValRSum)
	if rep.RSum < builtinValRSum-1.5 {
		t.Errorf("rsum %.1f: the documented figure is %.1f", rep.RSum, builtinValRSum)
	}
	t.Logf("the built-in models fused, with the query bank: i2t R@1/5/10 %.1f/%.1f/%.1f, t2i %.1f/%.1f/%.1f, rsum %.1f (documented %.1f)",
		fused.I2T.R1, fused.I2T.R5, fused.I2T.R10, fused.T2I.R1, fused.T2I.R5, fused.T2I.R10, fused.RSum, builtinFusedValRSum)
	if fused.RSum < builtinFusedValRSum-1.5 {
		t.Errorf("fused rsum %.1f: the documented figure is %.1f", fused.RSum, builtinFusedValRSum)
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
	stdout, stderr, code = run(t, "index", "--images", sub, "--out", idx)
	if code != 0 || !strings.Contains(stdout, "indexed 40 photos") || !strings.Contains(stdout, fmt.Sprintf("fused: teran + %g x seam", photomodel.Partners()[0].Weight)) || !strings.Contains(stdout, "x tern") || !strings.Contains(stderr, "built-in photo model") {
		t.Fatalf("index --images without --checkpoint: exit %d\n%s\n%s", code, stdout, stderr)
	}
	ix, err := index.OpenFusion(context.Background(), idx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if n, _ := ix.Len(); n != 40 {
		t.Fatalf("the index holds %d photos, want 40", n)
	}
	if got, want := len(ix.Members()), 1+len(photomodel.Partners()); got != want {
		t.Fatalf("the fusion has %d members, want the region model and its %d partners", got, want-1)
	}
}

// sharedPhotoFiles returns the shared set's photos whose names match
// pattern (needPhotos), failing when fewer than n do.
func sharedPhotoFiles(t testing.TB, pattern string, n int) []string {
	t.Helper()
	photos, err := filepath.Glob(filepath.Join(needPhotos(t), "images", pattern))
	if err != nil || len(photos) < n {
		t.Fatalf("%d shared photos match %s, want %d: %v", len(photos), pattern, n, err)
	}
	return photos
}

// redirectStdout sends what the command's code prints to w until the test
// ends.
func redirectStdout(t testing.TB, w io.Writer) {
	old := stdout
	stdout = w
	t.Cleanup(func() { stdout = old })
}

// linkAll links the files into the new directory dir.
func linkAll(t testing.TB, files []string, dir string) {
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

// TestFolderIndex checks the index that xmr serve --images builds for a
// folder with the built-in photo model: built under the cache the first
// time, reused while the folder holds as many photos, built again when a
// photo is added.
func TestFolderIndex(t *testing.T) {
	dir := t.TempDir()
	photos := sharedPhotoFiles(t, "1*.jpg", 8)
	folder := filepath.Join(dir, "photos")
	linkAll(t, photos[:5], folder)
	ctx := context.Background()
	cache := modelCache(t, dir)
	var out strings.Builder
	redirectStdout(t, &out)
	ix1, err := folderIndex(ctx, folder, cache)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ix1, cache) || !strings.Contains(out.String(), "indexing the 5 photos") {
		t.Fatalf("index %s, output %q: want an index under %s, built now", ix1, out.String(), cache)
	}
	out.Reset()
	ix2, err := folderIndex(ctx, folder, cache)
	if err != nil || ix2 != ix1 || out.Len() != 0 {
		t.Fatalf("second call: %s, %v, output %q; want %s reused", ix2, err, out.String(), ix1)
	}
	if err := os.Symlink(photos[5], filepath.Join(folder, filepath.Base(photos[5]))); err != nil {
		t.Fatal(err)
	}
	if _, err := folderIndex(ctx, folder, cache); err != nil || !strings.Contains(out.String(), "indexing the 6 photos") {
		t.Fatalf("a photo added: %v, output %q; want the index built again", err, out.String())
	}
	ix, err := index.OpenFusion(ctx, ix1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if n, _ := ix.Len(); n != 6 {
		t.Fatalf("the folder's index holds %d photos, want 6", n)
	}
	if n, beta := ix.QueryBank(); n != len(photomodel.QueryBank()) || beta != model.DefaultBankBeta {
		t.Fatalf("the folder's index has a query bank of %d captions at beta %v, want the built-in %d at %v", n, beta, len(photomodel.QueryBank()), model.DefaultBankBeta)
	}
	if cached, _ := filepath.Glob(filepath.Join(cache, "querybank", "*", "member-8-global.npy")); len(cached) == 0 {
		t.Fatalf("no query bank's encodings cached under %s: want a directory of the eight members'", cache)
	}

	// xmr index --images with no model writes the same fusion; it takes
	// no --append, and is written over only with --overwrite, never over
	// an index of one model.
	fused := filepath.Join(dir, "fused.idx")
	ckpt, err := photomodel.Path(cache)
	if err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain.idx")
	more := filepath.Join(dir, "more")
	linkAll(t, photos[6:8], more)
	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"index", "--images", folder, "--out", fused, "--models", cache}, 0, ""},
		{[]string{"index", "--images", folder, "--out", fused, "--models", cache}, 1, "already holds a fused index: --overwrite replaces it"},
		{[]string{"index", "--images", folder, "--out", fused, "--models", cache, "--append"}, 2, "--append: the built-in photo model's index of " + fused + " is a fusion of several indexes"},
		{[]string{"index", "--images", folder, "--out", fused, "--models", cache, "--overwrite"}, 0, ""},
		{[]string{"index", "--images", folder, "--out", plain, "--models", cache, "--checkpoint", ckpt}, 0, ""},
		{[]string{"index", "--images", folder, "--out", plain, "--models", cache, "--overwrite"}, 1, "holds an index of one model"},
		{[]string{"index", "--images", more, "--out", plain, "--models", cache, "--append"}, 0, ""},
	} {
		_, stderr, code := run(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args[3:], code, stderr, c.code, c.stderr)
		}
	}
	if !index.IsFusion(fused) || index.IsFusion(plain) {
		t.Errorf("want %s a fusion and %s an index of one model", fused, plain)
	}
}

// modelCache returns a models' cache of its own under dir, holding the
// detector's weights of the default one (needPhotos fetched them) and
// sharing its query bank's encodings.
func modelCache(t testing.TB, dir string) string {
	t.Helper()
	weights, err := detect.Fetch(context.Background(), detect.DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache")
	if err := os.Symlink(weights, filepath.Join(mkdir(t, cache), filepath.Base(weights))); err != nil {
		t.Fatal(err)
	}
	// The built-in query bank's encodings too, which every folder index
	// of the built-in model needs (bankEncodings): encoded by the first
	// test that indexes a folder, read by the others.
	shared := filepath.Join(detect.DefaultCacheDir(), "querybank")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(shared, filepath.Join(cache, "querybank")); err != nil {
		t.Fatal(err)
	}
	return cache
}

// mkdir makes dir and returns it.
func mkdir(t testing.TB, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestIndexOnlySplitBuiltin checks a large folder's path: xmr extract
// --taps s32 of a folder (an index-only split), then xmr index --data of
// it with no checkpoint: the built-in region model, its features
// recomputed from the activations, the same scores as the region member of
// the fusion that xmr index --images writes (to float16's rounding of the
// activations), whose other members score as each partner's own index of
// the photos, and which encodes a new photo with one detector run
// (checkFusionImages); without the activations it is refused, naming
// --taps.
func TestIndexOnlySplitBuiltin(t *testing.T) {
	dir := t.TempDir()
	photos := sharedPhotoFiles(t, "2*.jpg", 8)
	folder := filepath.Join(dir, "photos")
	linkAll(t, photos[:8], folder)
	feats := filepath.Join(dir, "feats")
	if _, stderr, code := run(t, "extract", "--images", folder, "--taps", "s32", "--out", feats); code != 0 {
		t.Fatalf("extract: exit %d: %s", code, stderr)
	}
	fromData, fromImages := filepath.Join(dir, "data.idx"), filepath.Join(dir, "images.idx")
	if _, stderr, code := run(t, "index", "--data", feats, "--split", "test", "--out", fromData); code != 0 || !strings.Contains(stderr, "built-in photo model") {
		t.Fatalf("index --data of an index-only split, no checkpoint: exit %d: %s", code, stderr)
	}
	if _, stderr, code := run(t, "index", "--images", folder, "--out", fromImages); code != 0 {
		t.Fatalf("index --images: exit %d: %s", code, stderr)
	}
	imageScores := func(ix string) map[string]float64 {
		out := searchFor(t, "--index", ix, "--text", "a dog runs on the grass", "-k", "8")
		m := map[string]float64{}
		for _, r := range out.Results {
			if r.Image != nil {
				m[r.Image.ID] = float64(r.Score)
			}
		}
		return m
	}
	// The photos' index is the built-in fusion: its region model's
	// member is what the extracted split's index holds.
	a, b := imageScores(fromData), imageScores(filepath.Join(fromImages, regionsMember))
	if len(a) != 8 || len(b) != 8 {
		t.Fatalf("%d and %d results, want 8", len(a), len(b))
	}
	for id, s := range a {
		if d := math.Abs(s - b[id]); d > 1e-2 {
			t.Errorf("%s: score %v from the extracted split, %v from the photos", id, s, b[id])
		}
	}

	// Each partner's member holds what the partner makes of the
	// published detector's features: its own index of the photos scores
	// them alike.
	for _, p := range photomodel.Partners() {
		path, err := p.Path(detect.DefaultCacheDir())
		if err != nil {
			t.Fatal(err)
		}
		alone := filepath.Join(dir, p.Name+".idx")
		if _, stderr, code := run(t, "index", "--checkpoint", path, "--images", folder, "--out", alone); code != 0 {
			t.Fatalf("index --images with %s: exit %d: %s", p.File, code, stderr)
		}
		a, b := imageScores(alone), imageScores(filepath.Join(fromImages, p.Name))
		if len(a) != 8 || len(b) != 8 {
			t.Fatalf("%s: %d and %d results, want 8", p.Name, len(a), len(b))
		}
		for id, s := range a {
			if d := math.Abs(s - b[id]); d > 1e-4 {
				t.Errorf("%s: %s: score %v from its own index, %v from the fusion's member", p.Name, id, s, b[id])
			}
		}
	}

	// A new photo is encoded for the eight members with one detector
	// run, as each member's own extraction would.
	checkFusionImages(t, fromImages, photos[0])

	// Extracted without the activations: refused, nothing written.
	plain := filepath.Join(dir, "plain")
	if _, stderr, code := run(t, "extract", "--images", folder, "--out", plain); code != 0 {
		t.Fatalf("extract: exit %d: %s", code, stderr)
	}
	refused := filepath.Join(dir, "refused.idx")
	if _, stderr, code := run(t, "index", "--data", plain, "--split", "test", "--out", refused); code == 0 || !strings.Contains(stderr, "--taps s32") {
		t.Errorf("index --data without activations: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(refused); err == nil {
		t.Errorf("a refused index left %s", refused)
	}
}

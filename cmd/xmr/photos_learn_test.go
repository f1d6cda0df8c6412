package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/wordvec"
)

// sharedPhotos is the shared set of real photos with their captions
// (../shared/data/flickr8k-photos: Karpathy's split file and images/).
const sharedPhotos = "../../../shared/data/flickr8k-photos"

// photoLearnConfig is the photo recipe (configs/teran-photos.yaml:
// standardised features, InfoNCE on MrSw) at 64-d, for a test.
const photoLearnConfig = tinyTERANYAML + `  feat-dim: 1056
  transformer-layers: 1
  heads: 4
  ff: 128
  hidden: 64
  feature-norm: standardize
training:
  lr: 0.0005
  grad-clip: 2.0
  max-violation: false
  contrastive: infonce
  temperature: 0.5
  loss-type: alignment
  alignment-mode: MrSw
  bs: 64
  warmup-period: 20
  val-step: 100
  seed: 1
`

// needPhotos returns the shared photos' directory, skipping the test when
// it is absent (and failing under CI=true, where it must be), and the
// detector's weights likewise.
func needPhotos(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs the real detector on hundreds of photos")
	}
	ci := os.Getenv("CI") == "true"
	dir, err := filepath.Abs(sharedPhotos)
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "dataset_flickr8k.json"))
	}
	if err != nil {
		if ci {
			t.Fatalf("the shared photos: %v", err)
		}
		t.Skipf("the shared photos (%s) are not here: %v", sharedPhotos, err)
	}
	if _, err := detect.Fetch(context.Background(), detect.DefaultCacheDir()); err != nil {
		if ci {
			t.Fatalf("the detector's weights: %v", err)
		}
		t.Skipf("the detector's weights are not available: %v", err)
	}
	return dir
}

// photoSubset writes a Karpathy split file holding the first nTrain train
// and nVal val photos of the shared set, and links those val photos into
// a folder of uncaptioned photos; it returns the file and the folder.
func photoSubset(t *testing.T, shared, dir string, nTrain, nVal int) (karpathy, valPhotos string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(shared, "dataset_flickr8k.json"))
	if err != nil {
		t.Fatal(err)
	}
	var all struct {
		Dataset string           `json:"dataset"`
		Images  []map[string]any `json:"images"`
	}
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatal(err)
	}
	valPhotos = filepath.Join(dir, "val-photos")
	if err := os.Mkdir(valPhotos, 0o755); err != nil {
		t.Fatal(err)
	}
	keep := all
	keep.Images = nil
	n := map[string]int{}
	for _, im := range all.Images {
		split, _ := im["split"].(string)
		if split == "train" && n[split] < nTrain || split == "val" && n[split] < nVal {
			n[split]++
			keep.Images = append(keep.Images, im)
			if split == "val" {
				name := im["filename"].(string)
				if err := os.Symlink(filepath.Join(shared, "images", name), filepath.Join(valPhotos, name)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	out, err := json.Marshal(keep)
	if err != nil {
		t.Fatal(err)
	}
	karpathy = filepath.Join(dir, "dataset_flickr8k.json")
	if err := os.WriteFile(karpathy, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return karpathy, valPhotos
}

// TestPhotosLearnAndSearch is the photo pipeline at a small size on real
// photos: 400 Flickr8k photos go through xmr extract with the real
// detector, the photo recipe trains on 300 of them, and on the 100
// held-out ones its recall is far above chance; those 100, indexed as a
// folder of uncaptioned photos (xmr index --images), are searched by each
// of their captions, and the photo a caption was written for comes back
// in the top 10 far more often than chance (10%).
func TestPhotosLearnAndSearch(t *testing.T) {
	shared := needPhotos(t)
	dir := t.TempDir()
	const nTrain, nVal = 300, 100
	karpathy, valPhotos := photoSubset(t, shared, dir, nTrain, nVal)
	feats := filepath.Join(dir, "feats")
	if _, stderr, code := run(t, "extract", "--images", karpathy, "--image-root", filepath.Join(shared, "images"), "--ids", "filename",
		"--out", feats, "--workers", "2"); code != 0 {
		t.Fatalf("extract: exit %d: %s", code, stderr)
	}
	cfg := filepath.Join(dir, "photos.yaml")
	if err := os.WriteFile(cfg, []byte(photoLearnConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(dir, "run")
	if _, stderr, code := run(t, "train", "--config", cfg, "--data", feats, "--out", runDir, "--max-iters", "150", "--val-images", "100"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	rep := evalRecall(t, runDir, feats, "dev")
	chance := chanceRSum(nVal, 5)
	t.Logf("held-out recall on %d photos: i2t R@1 %.1f R@5 %.1f R@10 %.1f; t2i R@1 %.1f R@5 %.1f R@10 %.1f; rsum %.1f (chance %.1f)",
		nVal, rep.I2T.R1, rep.I2T.R5, rep.I2T.R10, rep.T2I.R1, rep.T2I.R5, rep.T2I.R10, rep.RSum, chance)
	if rep.RSum < 2.5*chance || rep.T2I.R10 < 25 {
		t.Errorf("rsum %.1f, text-to-image R@10 %.1f: want at least 2.5 times chance (%.1f) and 25 (chance 10)", rep.RSum, rep.T2I.R10, 2.5*chance)
	}

	// The held-out photos as a folder without captions, through the
	// detector, searched by their captions.
	idx := filepath.Join(dir, "photos.idx")
	if _, stderr, code := run(t, "index", "--checkpoint", runDir, "--images", valPhotos, "--out", idx); code != 0 {
		t.Fatalf("index --images: exit %d: %s", code, stderr)
	}
	ctx := context.Background()
	ix, err := index.Open(ctx, idx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	k, err := data.LoadKarpathy(karpathy)
	if err != nil {
		t.Fatal(err)
	}
	hits, queries := 0, 0
	for _, im := range k.Images {
		if im.Split != "val" {
			continue
		}
		want := strings.TrimSuffix(im.Filename, filepath.Ext(im.Filename))
		for _, s := range im.Sentences[:5] {
			res, err := ix.SearchText(ctx, s.Raw, &index.SearchOptions{K: 10})
			if err != nil {
				t.Fatal(err)
			}
			queries++
			for _, r := range res {
				if r.Image != nil && r.Image.ID == want {
					hits++
				}
			}
		}
	}
	rate := 100 * float64(hits) / float64(queries)
	t.Logf("search by text: the captioned photo in the top 10 for %d of %d captions (%.1f%%; chance 10%%)", hits, queries, rate)
	if queries != 5*nVal || rate < 25 {
		t.Errorf("%d queries, the photo in the top 10 for %.1f%%: want %d queries and at least 25%% (chance 10%%)", queries, rate, 5*nVal)
	}
}

// TestPhotoDemo runs xmr demo --photos on 80 of the shared photos with a
// tiny model: it extracts, trains, evaluates on the val photos (the split
// file has no test split), draws on the photos and indexes them with
// their files; a second run reuses the features, the model and the index.
func TestPhotoDemo(t *testing.T) {
	shared := needPhotos(t)
	dir := t.TempDir()
	photos := filepath.Join(dir, "photos")
	if err := os.Mkdir(photos, 0o755); err != nil {
		t.Fatal(err)
	}
	karpathy, _ := photoSubset(t, shared, dir, 60, 20)
	if err := os.Rename(karpathy, filepath.Join(photos, "dataset_flickr8k.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(shared, "images"), filepath.Join(photos, "images")); err != nil {
		t.Fatal(err)
	}
	// The demo's recipe fine-tunes the detector from cut s32 and starts
	// its words from GloVe's vectors, as teran-photos-tuned does.
	cfg := filepath.Join(dir, "photos.yaml")
	recipe := strings.Replace(photoLearnConfig, "  max-positions: 64\n", "  max-positions: 64\n  word-vectors: "+wordvec.Wink+"\n", 1)
	if recipe == photoLearnConfig {
		t.Fatal("photoLearnConfig has no text-model.max-positions to put word-vectors after")
	}
	if err := os.WriteFile(cfg, []byte(recipe+"  vision-cut: s32\n  vision-lr: 0.0002\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	demo := filepath.Join(dir, "demo")
	args := []string{"demo", "--photos", photos, "--dir", demo, "--config", cfg, "--max-iters", "5", "--no-serve"}
	stdout, stderr, code := run(t, args...)
	if code != 0 {
		t.Fatalf("demo --photos: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"1/6 extracting the regions of 140 photos (train, dev; the train photos mirrored too)", "2/6 training", "5 iterations",
		"its word embeddings start from the pretrained vectors of " + wordvec.Wink,
		"what --total-time 57m0s leaves after", // the default, which 5 iterations do not reach
		"3/6 evaluating on the val split (the split file has no test split", "rsum", "4/6 drawing",
		"5/6 indexing the dev split", "20 images and 100 captions",
		fmt.Sprintf("2/6 training seam-e-photos (seed 1 of %d) on the photos' global vectors", partnerSeeds),
		fmt.Sprintf("2/6 training seam-e-photos (seed %d of %d)", partnerSeeds, partnerSeeds),
		fmt.Sprintf("seam-e-photos alone, seeds 1-%d: rsum", partnerSeeds), fmt.Sprintf("fused with the region model (weight %g each", partnerWeight),
		filepath.Join(demo, "fused") + " fuses " + filepath.Join(demo, "index") + " with " + filepath.Join(demo, "index-global") + fmt.Sprintf(" and %d more", partnerSeeds-1),
		"text-to-image ranking normalised by a query bank of 60 training captions", "with a query bank of 60 training captions",
		"xmr serve --index " + filepath.Join(demo, "fused") + " --images " + filepath.Join(photos, "images"),
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("first run: stdout lacks %q:\n%s", want, stdout)
		}
	}
	// The training log says how many of the words the vectors cover.
	if m := regexp.MustCompile(`word embeddings from pretrained vectors.* found=(\d+) vocab=(\d+)`).FindStringSubmatch(stderr); m == nil {
		t.Errorf("stderr lacks the word vectors' line:\n%s", stderr)
	} else if found, _ := strconv.Atoi(m[1]); found < 50 {
		t.Errorf("the word vectors covered %s of the %s words", m[1], m[2])
	}
	// The global-vector models train first, the region model last, with
	// what is left of the demo's total time.
	if a, b := strings.Index(stdout, "2/6 training seam-e-photos"), strings.Index(stdout, "2/6 training "+cfg); a < 0 || b < a {
		t.Errorf("the region model trains at %d of stdout, the first global-vector model at %d: want it after", b, a)
	}
	for _, f := range []string{"alignment-1.png", "query-1.png", "run/best-rsum.safetensors", "index/manifest.json", "features/train_ims.npy", "features/dev_ims.npy",
		"features/taps-s32/train.npy", "features/taps-s32/dev.npy", "run-global/best-rsum.safetensors", "index-global/manifest.json", "fused/fusion.json", "fused/querybank-images.npy",
		partnerPath("run-global", partnerSeeds-1) + "/best-rsum.safetensors", partnerPath("index-global", partnerSeeds-1) + "/manifest.json"} {
		if _, err := os.Stat(filepath.Join(demo, f)); err != nil {
			t.Errorf("the demo made no %s: %v", f, err)
		}
	}
	// The index knows each photo's file, for the page to draw on.
	ix, err := index.Open(context.Background(), filepath.Join(demo, "index"), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := ix.SearchText(context.Background(), "a dog runs on the grass", &index.SearchOptions{K: 3})
	ix.Close()
	if err != nil || len(res) != 3 {
		t.Fatalf("search: %v, %d results", err, len(res))
	}
	for _, r := range res {
		if p := r.Image.Path; !strings.HasPrefix(p, filepath.Join(photos, "images")) || !strings.HasSuffix(p, r.Image.ID+".jpg") {
			t.Errorf("result %s: file %q, want its photo under %s", r.Image.ID, p, filepath.Join(photos, "images"))
		}
	}

	// It records the extractor, the detector fine-tuned by the model, so
	// a new photo searches it (the page's uploads too) through the part
	// that the index's copy of the model carries.
	if rec, err := indexRecord(filepath.Join(demo, "index")); err != nil || rec == nil || rec.Extractor.Tuned != "s32" {
		t.Errorf("the index's extractor record: %+v, %v; want the detector tuned from s32", rec, err)
	}
	photo := res[0].Image.Path
	if out, errOut, code := run(t, "search", "--index", filepath.Join(demo, "index"), "--image-file", photo, "-k", "2"); code != 0 || !strings.Contains(out, "image-to-text") {
		t.Errorf("search --image-file %s on the demo's index: exit %d\n%s\n%s", photo, code, out, errOut)
	}
	// The fused index: a new photo is encoded by each member's model
	// from the features its own manifest records.
	if out, errOut, code := run(t, "search", "--index", filepath.Join(demo, "fused"), "--image-file", photo, "-k", "2"); code != 0 || !strings.Contains(out, fmt.Sprintf("fused scores: 1 x teran (MrSw) + %g x seam (order) + %g x seam (order)", partnerWeight, partnerWeight)) {
		t.Errorf("search --image-file %s on the demo's fused index: exit %d\n%s\n%s", photo, code, out, errOut)
	}

	stdout, stderr, code = run(t, args...)
	if code != 0 {
		t.Fatalf("second demo --photos: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"1/6 using the features in", "2/6 using the model", "2/6 using the global-vector model", "5/6 using the index in"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("second run: stdout lacks %q:\n%s", want, stdout)
		}
	}
	// Bad --photos: a folder without a split file, and --n with --photos.
	if _, stderr, code := run(t, "demo", "--photos", dir+"/demo/run", "--dir", filepath.Join(dir, "d2"), "--no-serve"); code == 0 || !strings.Contains(stderr, "no Karpathy split file") {
		t.Errorf("a folder without a split file: exit %d, %s", code, stderr)
	}
	if _, stderr, code := run(t, "demo", "--photos", photos, "--n", "300", "--dir", filepath.Join(dir, "d3"), "--no-serve"); code != 2 || !strings.Contains(stderr, "--n sizes the synthetic world") {
		t.Errorf("--n with --photos: exit %d, %s", code, stderr)
	}
}

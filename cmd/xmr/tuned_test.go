package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/finetune"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/npy"
)

// tunedConfig is the photo recipe at 64-d fine-tuning the detector from
// cut s32 (configs/teran-photos-tuned.yaml), for a few iterations on a
// few photos: 16 train photos' 80 captions are 5 batches of 16, an epoch,
// validated at its end. The part learns at 1e-3 so that its features
// differ from the detector's after these few iterations.
var tunedConfig = strings.NewReplacer("  bs: 64\n", "  bs: 16\n", "  warmup-period: 20\n", "  warmup-period: 2\n", "  val-step: 100\n", "  val-step: 0\n").
	Replace(photoLearnConfig) + "  vision-cut: s32\n  vision-lr: 0.001\n"

// tunedRun is a tuned model's run on a few shared photos extracted with
// --taps s32, and what TestTunedPipeline makes of it.
type tunedRun struct {
	dir      string // the test's directory
	feats    string // the data set, with taps-s32/
	run      string // the run directory
	valPhoto string // a dev photo's file
	valID    string // and its id
}

// searchJSON is what the tests read of `xmr search --json`.
type searchJSON struct {
	Mode    string         `json:"mode"`
	Results []index.Result `json:"results"`
}

// searchFor runs xmr search with args and --json and returns its results.
func searchFor(t *testing.T, args ...string) searchJSON {
	t.Helper()
	stdout, stderr, code := run(t, append([]string{"search", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("search %s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	var out searchJSON
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("search --json printed %q: %v", stdout, err)
	}
	return out
}

// TestTunedPipeline runs a model that fine-tunes the detector through the
// command line on 16 train and 8 val photos of the shared set with the
// real detector: xmr extract --taps s32, then xmr train with
// training.vision-cut s32, whose checkpoints carry the part; then every
// command that gives the model features makes them with its part:
//   - xmr eval scores the run's best validation again to the last digit,
//     NDCG included (on the features as extracted it scores otherwise);
//   - xmr index --data records the tuned identity and stores the part in
//     its copy of the model; searched by one of its photos' files (xmr
//     search --image-file) or by the photo uploaded as xmr serve takes it,
//     the photo scores the captions as its indexed vector (made from the
//     cached float16 activations) does, to 0.01, and a tenth as far as its
//     extracted features' vector;
//   - xmr index --images scores the photos, made by the tuned detector, as
//     xmr index --data does from their activations;
//   - xmr align draws (its extractor must match the tuned identity).
//
// A tuned model evaluated beside another is a usage error; a data set
// without the activations is refused by index, eval and train with the
// fix (--taps s32). Without the photos or the detector's weights the test
// is skipped, except under CI=true.
func TestTunedPipeline(t *testing.T) {
	for _, want := range []string{"bs: 16", "warmup-period: 2\n", "val-step: 0", "vision-cut: s32"} {
		if !strings.Contains(tunedConfig, want) {
			t.Fatalf("tunedConfig lacks %q: photoLearnConfig changed\n%s", want, tunedConfig)
		}
	}
	shared := needPhotos(t)
	start := time.Now()
	r := tunedRun{dir: t.TempDir()}
	karpathy, valPhotos := photoSubset(t, shared, r.dir, 16, 8)
	r.feats = filepath.Join(r.dir, "feats")
	stdout, stderr, code := run(t, "extract", "--images", karpathy, "--image-root", filepath.Join(shared, "images"),
		"--out", r.feats, "--taps", "s32", "--workers", "2")
	if code != 0 {
		t.Fatalf("extract --taps s32: exit %d: %s", code, stderr)
	}
	for _, split := range []string{data.SplitTrain, data.SplitDev} {
		if p := extract.TapsPath(r.feats, "s32", split); !strings.Contains(stdout, "wrote "+p) {
			t.Errorf("extract --taps s32 does not say it wrote %s:\n%s", p, stdout)
		}
	}
	t.Logf("extract: %v", time.Since(start).Round(time.Second))
	es, err := os.ReadDir(valPhotos)
	if err != nil || len(es) != 8 {
		t.Fatalf("%s: %d photos, %v", valPhotos, len(es), err)
	}
	r.valPhoto = filepath.Join(valPhotos, es[0].Name())
	r.valID = strings.TrimSuffix(es[0].Name(), filepath.Ext(es[0].Name()))

	cfg := filepath.Join(r.dir, "tuned.yaml")
	if err := os.WriteFile(cfg, []byte(tunedConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	r.run = filepath.Join(r.dir, "run")
	mark := time.Now()
	if _, stderr, code := run(t, "train", "--config", cfg, "--data", r.feats, "--out", r.run, "--max-iters", "10"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	t.Logf("train: %v", time.Since(mark).Round(time.Second))
	best := filepath.Join(r.run, "best-rsum.safetensors")
	cf, err := checkpoint.Open(best)
	if err != nil {
		t.Fatal(err)
	}
	ts, md, err := finetune.Carried(cf)
	cf.Close()
	if err != nil || len(ts) == 0 || md[finetune.MetaKey] != "s32" {
		t.Fatalf("%s carries %d tensors named %s*, metadata %v: %v", best, len(ts), finetune.Prefix, md, err)
	}

	t.Run("eval", func(t *testing.T) { r.eval(t) })
	t.Run("index-data", func(t *testing.T) { r.indexData(t) })
	t.Run("index-images", func(t *testing.T) { r.indexImages(t, valPhotos) })
	t.Run("align", func(t *testing.T) {
		png := filepath.Join(r.dir, "align.png")
		if _, stderr, code := run(t, "align", "--checkpoint", r.run, "--image", r.valPhoto, "--text", "a dog runs on the grass", "--out", png); code != 0 {
			t.Fatalf("align: exit %d: %s", code, stderr)
		}
		if st, err := os.Stat(png); err != nil || st.Size() == 0 {
			t.Fatalf("align wrote no picture: %v", err)
		}
	})
	t.Run("export", func(t *testing.T) { r.export(t) })
	t.Run("refused", func(t *testing.T) { r.refused(t) })
	t.Logf("the whole pipeline: %v", time.Since(start).Round(time.Second))
}

// eval checks that xmr eval of the tuned run scores, on the dev features
// its part recomputes, exactly what the run's best validation did; on the
// extracted features the model scores otherwise (NDCG, to the digit).
func (r *tunedRun) eval(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(r.run, "metrics.json"))
	if err != nil {
		t.Fatal(err)
	}
	var hist []struct {
		Iter int                `json:"iter"`
		RSum float64            `json:"rsum"`
		NDCG map[string]float64 `json:"ndcg"`
	}
	if err := json.Unmarshal(b, &hist); err != nil || len(hist) == 0 {
		t.Fatalf("metrics.json: %d records, %v", len(hist), err)
	}
	bestRec := hist[0]
	for _, h := range hist[1:] {
		if h.RSum > bestRec.RSum {
			bestRec = h
		}
	}
	stdout, stderr, code := run(t, "eval", "--checkpoint", r.run, "--data", r.feats, "--split", "dev", "--json")
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr)
	}
	var rep struct {
		RSum float64                       `json:"rsum"`
		NDCG map[string]map[string]float64 `json:"ndcg"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("eval --json printed %q: %v", stdout, err)
	}
	got := map[string]float64{"rsum": rep.RSum}
	want := map[string]float64{"rsum": bestRec.RSum}
	for name, nd := range rep.NDCG {
		for dir, v := range nd {
			got[name+"/"+dir] = v
		}
	}
	for k, v := range bestRec.NDCG {
		want[k] = v
	}
	t.Logf("eval: %v; the best validation (iteration %d): %v", got, bestRec.Iter, want)
	if len(want) < 3 {
		t.Fatalf("the validation recorded %v: no NDCG to compare", want)
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || math.Abs(g-w) > 1e-9 {
			t.Errorf("eval %s = %v (reported: %v), the run's best validation %v: eval did not make the features the model was validated on", k, g, ok, w)
		}
	}

	// On the features as extracted, the model scores otherwise.
	m, dev := r.modelAndDev(t)
	res, err := evalUntuned(m, dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("on the dev features as extracted: %v", res)
	if res["rouge-l/t2i"] == want["rouge-l/t2i"] && res["rouge-l/i2t"] == want["rouge-l/i2t"] {
		t.Errorf("on the extracted features the model scores NDCG %v too: the part changed nothing this test can see", res)
	}
}

// untunedCopy writes to path the checkpoint src without the detector's
// part: its model, trained on the features as extracted, as far as the
// commands can tell.
func untunedCopy(t *testing.T, src, path string) string {
	t.Helper()
	f, err := checkpoint.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var entries []checkpoint.Entry
	for _, name := range f.Names() {
		if strings.HasPrefix(name, finetune.Prefix) {
			continue
		}
		d, shape, err := f.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, checkpoint.Entry{Name: name, Shape: shape, Data: d})
	}
	md := f.Metadata()
	delete(md, finetune.MetaKey)
	id, err := extract.ParseIdentity(md[extract.MetaKey])
	if err != nil {
		t.Fatal(err)
	}
	id.Tuned = ""
	md[extract.MetaKey] = id.Marshal()
	if err := checkpoint.Save(path, entries, md); err != nil {
		t.Fatal(err)
	}
	return path
}

// evalUntuned evaluates m on s as it is, with the relevances xmr eval
// uses, and returns its NDCG as metrics.json names them.
func evalUntuned(m model.Model, s *data.Split) (map[string]float64, error) {
	ctx := context.Background()
	rel, err := eval.RelevanceMatrices(ctx, s.Captions, s.CapsPerImage)
	if err != nil {
		return nil, err
	}
	res, err := eval.EvaluateModels(ctx, []model.Model{m}, s, eval.ModelOptions{Options: eval.Options{Relevances: rel}})
	if err != nil {
		return nil, err
	}
	out := map[string]float64{"rsum": res.Report.Metrics.RSum}
	for name, nd := range res.Report.Metrics.NDCG {
		out[name+"/i2t"], out[name+"/t2i"] = nd.I2T, nd.T2I
	}
	return out, nil
}

// indexData checks xmr index --data of the tuned run: the index records
// the tuned identity, its copy of the model carries the part, and a
// search by one of its photos' files (the tuned detector's features)
// scores the captions as the photo's indexed vector (the part's, from the
// cached float16 activations) does, far nearer than the vector of the
// photo's features as extracted would.
func (r *tunedRun) indexData(t *testing.T) {
	ix := filepath.Join(r.dir, "ix")
	if _, stderr, code := run(t, "index", "--checkpoint", r.run, "--data", r.feats, "--split", "dev", "--out", ix); code != 0 {
		t.Fatalf("index --data: exit %d: %s", code, stderr)
	}
	checkTunedIndex(t, ix)
	const k = "40" // every caption of the 8 photos
	byID := scoresOf(t, searchFor(t, "--index", ix, "--image", r.valID, "-k", k))
	byFile := scoresOf(t, searchFor(t, "--index", ix, "--image-file", r.valPhoto, "-k", k))

	// The extracted features of the dev photos, indexed with the model as
	// they are: the vectors an extractor without the part would give.
	m, dev := r.modelAndDev(t)
	plain := filepath.Join(r.dir, "ix-extracted")
	if _, err := index.Build(context.Background(), plain, m, collection(dev, ""), nil); err != nil {
		t.Fatal(err)
	}
	untuned := scoresOf(t, searchFor(t, "--index", plain, "--image", r.valID, "-k", k))

	// The photo uploaded to xmr serve (its image query).
	byUpload := scoresOf(t, searchJSON{Mode: "image-to-text", Results: uploadSearch(t, ix, r.valPhoto)})

	extracted := maxDiff(t, untuned, byID)
	for _, c := range []struct {
		name   string
		scores map[string]float64
	}{{"search --image-file", byFile}, {"an upload to serve", byUpload}} {
		d := maxDiff(t, c.scores, byID)
		t.Logf("image-to-text scores of the photo by %s and by its indexed vector differ by up to %.3g; by its extracted features' vector, %.3g", c.name, d, extracted)
		if !(d < 1e-2 && d < extracted/10) {
			t.Errorf("the photo by %s scores the captions up to %.3g from its indexed vector's scores (its extracted features: %.3g): want under 0.01 and a tenth of the latter", c.name, d, extracted)
		}
	}
}

// uploadSearch searches the index in dir by the photo at path as xmr
// serve does an upload (uploadQuery), for 40 captions.
func uploadSearch(t *testing.T, dir, path string) []index.Result {
	t.Helper()
	ctx := context.Background()
	ix, err := index.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	query, err := uploadQuery(ctx, dir, ix, false, "", 1<<26)
	if err != nil || query == nil {
		t.Fatalf("uploadQuery: %v (a query: %v)", err, query != nil)
	}
	m, err := ix.Model()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := query(ctx, b, []model.Model{m})
	if err != nil || len(qs) != 1 {
		t.Fatalf("the upload's query: %v (%d queries)", err, len(qs))
	}
	res, err := ix.Search(ctx, qs[0], false, &index.SearchOptions{K: 40})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// scoresOf returns the score of each result of an image-to-text search,
// by caption.
func scoresOf(t *testing.T, out searchJSON) map[string]float64 {
	t.Helper()
	if out.Mode != "image-to-text" || len(out.Results) != 40 {
		t.Fatalf("search: %s, %d results, want image-to-text and 40", out.Mode, len(out.Results))
	}
	m := map[string]float64{}
	for _, r := range out.Results {
		if r.Caption == nil {
			t.Fatalf("result %d has no caption", r.Rank)
		}
		m[r.Caption.ImageID+"\x00"+r.Caption.Text] = float64(r.Score)
	}
	return m
}

// maxDiff returns the largest difference between two sets of scores of
// the same keys.
func maxDiff(t *testing.T, a, b map[string]float64) float64 {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d scores and %d", len(a), len(b))
	}
	d := 0.0
	for k, v := range a {
		w, ok := b[k]
		if !ok {
			t.Fatalf("%q scored in one search, not the other", k)
		}
		d = math.Max(d, math.Abs(v-w))
	}
	return d
}

// checkTunedIndex checks that the index in dir records the features of
// the detector tuned from cut s32 and carries the part in its copy of the
// model.
func checkTunedIndex(t *testing.T, dir string) {
	t.Helper()
	rec, err := indexRecord(dir)
	if err != nil || rec == nil {
		t.Fatalf("%s: its manifest records no extractor: %v", dir, err)
	}
	if rec.Extractor.Tuned != "s32" {
		t.Errorf("%s: its manifest records the extractor %s, not tuned from s32", dir, rec.Extractor)
	}
	ix, err := index.Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, ix.ModelInfo().File)
	ix.Close()
	cf, err := checkpoint.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	ts, md, err := finetune.Carried(cf)
	if err != nil || len(ts) == 0 || md[finetune.MetaKey] != "s32" {
		t.Errorf("%s: %d tensors named %s*, metadata %v: %v", file, len(ts), finetune.Prefix, md, err)
	}
}

// indexImages checks xmr index --images with the tuned run: the photos'
// features come from the tuned detector, so a text search scores them as
// in the index that xmr index --data made from the cached activations.
func (r *tunedRun) indexImages(t *testing.T, photos string) {
	ix := filepath.Join(r.dir, "ix-images")
	if _, stderr, code := run(t, "index", "--checkpoint", r.run, "--images", photos, "--out", ix); code != 0 {
		t.Fatalf("index --images: exit %d: %s", code, stderr)
	}
	checkTunedIndex(t, ix)
	fromData := filepath.Join(r.dir, "ix-data")
	if _, stderr, code := run(t, "index", "--checkpoint", r.run, "--data", r.feats, "--split", "dev", "--out", fromData); code != 0 {
		t.Fatalf("index --data: exit %d: %s", code, stderr)
	}
	scores := func(dir string) map[string]float64 {
		out := searchFor(t, "--index", dir, "--text", "a dog runs on the grass", "-k", "8")
		if out.Mode != "text-to-image" || len(out.Results) != 8 {
			t.Fatalf("search %s: %s, %d results, want text-to-image and 8", dir, out.Mode, len(out.Results))
		}
		m := map[string]float64{}
		for _, r := range out.Results {
			m[r.Image.ID] = float64(r.Score)
		}
		return m
	}
	d := maxDiff(t, scores(ix), scores(fromData))
	t.Logf("text-to-image scores of the photos indexed from their files and from the data set differ by up to %.3g", d)
	if d > 1e-2 {
		t.Errorf("the photos indexed from their files score up to %.3g from their vectors indexed from the data set's activations: want under 0.01", d)
	}
}

// refused checks that a tuned model evaluated with another reads its own
// features (each model of a fusion ranks as it does alone when the other's
// weight is negligible), and the errors for a data set without the cut's
// activations given to a tuned model.
func (r *tunedRun) refused(t *testing.T) {
	tuned := filepath.Join(r.run, "best-rsum.safetensors")
	untuned := untunedCopy(t, tuned, filepath.Join(r.dir, "untuned.safetensors"))
	rsum := func(args ...string) float64 {
		t.Helper()
		stdout, stderr, code := run(t, append([]string{"eval", "--data", r.feats, "--split", "dev", "--json", "--no-ndcg"}, args...)...)
		if code != 0 {
			t.Fatalf("eval %v: exit %d, %s", args, code, stderr)
		}
		var rep struct {
			RSum float64 `json:"rsum"`
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("eval --json printed %q: %v", stdout, err)
		}
		return rep.RSum
	}
	alone := map[string]float64{tuned: rsum("--checkpoint", tuned), untuned: rsum("--checkpoint", untuned)}
	for _, ckpts := range [][]string{{untuned, tuned}, {tuned, untuned}} {
		got := rsum("--checkpoint", ckpts[0], "--checkpoint", ckpts[1], "--weights", "1,0.00001")
		if got != alone[ckpts[0]] {
			t.Errorf("eval of %s fused with %s at weight 1e-5: rsum %.2f, want %.2f as alone", filepath.Base(ckpts[0]), filepath.Base(ckpts[1]), got, alone[ckpts[0]])
		}
	}

	// The data set as extracted without --taps: its files, not its
	// activations' folder.
	plain := filepath.Join(r.dir, "feats-plain")
	copyTree(t, r.feats, plain)
	rec, err := extract.ReadRecord(plain)
	if err != nil || rec == nil || rec.Taps != "s32" {
		t.Fatalf("%s: %+v, %v", extract.FileName, rec, err)
	}
	rec.Taps = ""
	if err := extract.WriteRecord(plain, rec); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(r.dir, "tuned.yaml")
	for _, args := range [][]string{
		{"index", "--checkpoint", r.run, "--data", plain, "--split", "dev", "--out", filepath.Join(r.dir, "ix-plain")},
		{"eval", "--checkpoint", r.run, "--data", plain, "--split", "dev"},
		{"train", "--config", cfg, "--data", plain, "--out", filepath.Join(r.dir, "run-plain"), "--max-iters", "1"},
	} {
		_, stderr, code := run(t, args...)
		if code == 0 || !strings.Contains(stderr, "--taps s32") || !strings.Contains(stderr, filepath.Join(plain, "taps-s32")) {
			t.Errorf("%s on a data set without activations: exit %d, %s", args[0], code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(r.dir, "run-plain", "last.safetensors")); err == nil {
		t.Error("train on a data set without activations wrote a checkpoint")
	}
	if _, err := os.Stat(filepath.Join(r.dir, "ix-plain", "manifest.json")); err == nil {
		t.Error("index --data on a data set without activations wrote an index")
	}
}

// export checks xmr export --half: the file carries the model, its part
// and its extractor in half precision, without the training state, at
// half the bytes, and scores the dev photos as the checkpoint does, to
// half precision's rounding.
func (r *tunedRun) export(t *testing.T) {
	out := filepath.Join(r.dir, "exported.safetensors")
	if _, stderr, code := run(t, "export", "--checkpoint", r.run, "--out", out, "--half"); code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	f, err := checkpoint.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	md := f.Metadata()
	names := f.Names()
	var vision int
	for _, n := range names {
		in, _ := f.Info(n)
		// The features' inverse deviations may be beyond half precision.
		if in.DType != "F16" && n != "img_feat_norm.inv_std" {
			t.Errorf("tensor %s is %s, want F16", n, in.DType)
		}
		if strings.HasPrefix(n, "optim.") {
			t.Errorf("the export carries the optimiser's %s", n)
		}
		if strings.HasPrefix(n, finetune.Prefix) {
			vision++
		}
	}
	f.Close()
	if vision == 0 || md[finetune.MetaKey] != "s32" || !strings.Contains(md[extract.MetaKey], `"tuned":"s32"`) {
		t.Errorf("the export lacks the part or its record: %d vision tensors, metadata %v", vision, md[finetune.MetaKey])
	}
	best, err := model.ResolveCheckpoint(r.run)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.Stat(best)
	b, _ := os.Stat(out)
	if b.Size() > a.Size()*6/10 {
		t.Errorf("the export is %d bytes, the checkpoint %d: want about half", b.Size(), a.Size())
	}
	// The similarities of every dev image and caption, both ways.
	sims := func(ckpt, name string) []float32 {
		path := filepath.Join(r.dir, name)
		if _, stderr, code := run(t, "eval", "--checkpoint", ckpt, "--data", r.feats, "--split", "dev", "--no-ndcg", "--save-sims", path); code != 0 {
			t.Fatalf("eval %s: exit %d: %s", ckpt, code, stderr)
		}
		a, err := npy.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		return a.Data
	}
	full, half := sims(r.run, "full.npy"), sims(out, "half.npy")
	var maxDiff, maxAbs float64
	for i := range full {
		maxDiff = max(maxDiff, math.Abs(float64(full[i]-half[i])))
		maxAbs = max(maxAbs, math.Abs(float64(full[i])))
	}
	t.Logf("%d similarities: largest difference %.3g of values up to %.3g", len(full), maxDiff, maxAbs)
	if len(full) != len(half) || len(full) == 0 || maxDiff > 1e-2*maxAbs {
		t.Errorf("%d and %d similarities, largest difference %.3g of values up to %.3g: want half precision's rounding (1e-2 of them)", len(full), len(half), maxDiff, maxAbs)
	}
}

// modelAndDev loads the run's best model and the dev split's features as
// they were extracted (closed when t ends).
func (r *tunedRun) modelAndDev(t *testing.T) (model.Model, *data.Split) {
	t.Helper()
	m, cf, err := model.Load(r.run)
	if err != nil {
		t.Fatal(err)
	}
	cf.Close()
	dev, err := data.Source{Path: r.feats}.Load(context.Background(), data.SplitDev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return m, dev
}

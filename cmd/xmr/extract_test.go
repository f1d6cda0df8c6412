package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/lockfile"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/npy"
	"github.com/xmr-project/xmr/server"
	"github.com/xmr-project/xmr/synth"
)

// pixelDetector is a deterministic stand-in for the detector: one map
// "px" of stride 32 whose 16 channels are fixed functions of each cell's
// mean colour, and one detection, the image's left half.
type pixelDetector struct{}

// MapInfo describes the map Run returns.
func (pixelDetector) MapInfo() []detect.MapSpec {
	return []detect.MapSpec{{Name: "px", Stride: 32, C: 16}}
}

func (pixelDetector) Run(ctx context.Context, rgb []float32, opt detect.RunOptions) (*detect.Output, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	const S, st, C = detect.InputSize, 32, 16
	n := S / st
	m := detect.FeatureMap{Name: "px", H: n, W: n, C: C, Stride: st, Data: make([]float32, n*n*C)}
	for cy := range n {
		for cx := range n {
			var mean [3]float32
			for y := cy * st; y < (cy+1)*st; y++ {
				for x := cx * st; x < (cx+1)*st; x++ {
					for k := range 3 {
						mean[k] += rgb[(y*S+x)*3+k] / (255 * st * st)
					}
				}
			}
			o := (cy*n + cx) * C
			for c := range C {
				// A fixed mix of the channels, rectified.
				v := mean[c%3]*float32(1+c/3) - mean[(c+1)%3]*float32(c%4)/3
				m.Data[o+c] = max(v, 0)
			}
		}
	}
	d := detect.Detection{Box: [4]float32{0, 0, S / 2, S}, Class: 0, Score: 0.9}
	return &detect.Output{Detections: []detect.Detection{d}, Maps: []detect.FeatureMap{m}}, nil
}

// useFakeDetector makes the commands use pixelDetector for the test.
func useFakeDetector(t *testing.T) {
	t.Helper()
	old := loadDetector
	loadDetector = func(context.Context, string) (extract.Detector, error) { return pixelDetector{}, nil }
	t.Cleanup(func() { loadDetector = old })
}

func writeColourPNG(t *testing.T, path string, w, h int, c color.RGBA) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, c)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestExtractTrainEval runs a synthetic world's PNGs through xmr extract,
// trains on the features, evaluates, and checks that checkpoints and data
// of different extractors are refused.
func TestExtractTrainEval(t *testing.T) {
	useFakeDetector(t)
	dir := t.TempDir()
	world := filepath.Join(dir, "world")
	if _, err := synth.Generate(context.Background(), world, synth.Config{N: 120, Seed: 3, Dim: 16, Regions: 6, Noise: 0.1, Dev: 30, Test: 30}); err != nil {
		t.Fatal(err)
	}
	feats := filepath.Join(dir, "feats")
	stdout, stderr, code := run(t, "extract", "--images", world, "--out", feats, "--splits", "train,dev,test", "--workers", "2", "--chunk", "16")
	if code != 0 {
		t.Fatalf("extract: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "extracted 120 images") || !strings.Contains(stdout, "wrote "+filepath.Join(feats, "train_ims.npy")+": 60 images") {
		t.Errorf("extract printed %q", stdout)
	}
	rec, err := extract.ReadRecord(feats)
	if err != nil || rec == nil || rec.Extractor.Width != 16 || rec.Splits["dev"].Images != 30 {
		t.Fatalf("features.json: %+v, %v", rec, err)
	}

	cfg := writeTinyConfig(t, dir, "teran", "alignment")
	runPx := filepath.Join(dir, "run-px")
	if _, stderr, code := run(t, "train", "--config", cfg, "--data", feats, "--out", runPx, "--max-iters", "3", "--val-images", "30"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	if _, stderr, code := run(t, "eval", "--checkpoint", runPx, "--data", feats, "--no-ndcg"); code != 0 {
		t.Fatalf("eval on its own features: exit %d: %s", code, stderr)
	}
	// A model trained on the regions is refused the global/ copy of the
	// same extraction, naming both sides.
	global := filepath.Join(feats, "global")
	for _, args := range [][]string{
		{"eval", "--checkpoint", runPx, "--data", global, "--no-ndcg"},
		{"index", "--checkpoint", runPx, "--data", global, "--out", filepath.Join(dir, "g.idx")},
		{"train", "--resume", "--data", global, "--out", runPx, "--max-iters", "4"},
	} {
		_, stderr, code := run(t, args...)
		if code != 1 || !strings.Contains(stderr, "trained on region features") || !strings.Contains(stderr, "--data "+global+" holds global features") {
			t.Errorf("%s of a region model on global features: exit %d, %s", args[0], code, stderr)
		}
	}
	// The world's own features record no extractor: both pairings across
	// are refused, naming both sides.
	_, stderr, code = run(t, "eval", "--checkpoint", runPx, "--data", world, "--no-ndcg")
	if code != 1 || !strings.Contains(stderr, "was trained on features of centernet") || !strings.Contains(stderr, "records no extractor") {
		t.Errorf("extracted-feature model on the world's features: exit %d, %s", code, stderr)
	}
	runWorld := filepath.Join(dir, "run-world")
	if _, stderr, code := run(t, "train", "--config", cfg, "--data", world, "--out", runWorld, "--max-iters", "2", "--val-images", "30"); code != 0 {
		t.Fatalf("train on the world: exit %d: %s", code, stderr)
	}
	_, stderr, code = run(t, "eval", "--checkpoint", runWorld, "--data", feats, "--no-ndcg")
	if code != 1 || !strings.Contains(stderr, "records no feature extractor") {
		t.Errorf("world model on extracted features: exit %d, %s", code, stderr)
	}
	_, stderr, code = run(t, "index", "--checkpoint", runWorld, "--data", feats, "--out", filepath.Join(dir, "x.idx"))
	if code != 1 || !strings.Contains(stderr, "records no feature extractor") {
		t.Errorf("index of a world model on extracted features: exit %d, %s", code, stderr)
	}
	// A resumed run refuses data of another extractor.
	_, stderr, code = run(t, "train", "--resume", "--data", world, "--out", runPx, "--max-iters", "4")
	if code != 1 || !strings.Contains(stderr, "records no extractor") {
		t.Errorf("resume on other features: exit %d, %s", code, stderr)
	}

	// Photos: a folder with a bad file, indexed from the images.
	photos := filepath.Join(dir, "photos")
	os.MkdirAll(filepath.Join(photos, "sub"), 0o755)
	writeColourPNG(t, filepath.Join(photos, "red.png"), 64, 48, color.RGBA{220, 10, 10, 255})
	writeColourPNG(t, filepath.Join(photos, "sub", "blue.png"), 30, 60, color.RGBA{10, 10, 220, 255})
	os.WriteFile(filepath.Join(photos, "broken.jpg"), []byte("\xff\xd8\xff\xe0 not really"), 0o644)
	idx := filepath.Join(dir, "photos.idx")
	stdout, stderr, code = run(t, "index", "--checkpoint", runPx, "--images", photos, "--out", idx)
	if code != 1 || !strings.Contains(stdout, "indexed 2 photos") || !strings.Contains(stdout, "skipped "+filepath.Join(photos, "broken.jpg")) {
		t.Fatalf("index --images: exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
	if r, err := indexRecord(idx); err != nil || r == nil || r.Extractor.Width != 16 || r.FeatureKind != "regions" {
		t.Errorf("the index records %+v, %v", r, err)
	}
	_, stderr, code = run(t, "index", "--checkpoint", runWorld, "--images", photos, "--out", filepath.Join(dir, "w.idx"))
	if code != 1 || !strings.Contains(stderr, "records no feature extractor") {
		t.Errorf("index --images with a world model: exit %d, %s", code, stderr)
	}
	stdout, stderr, code = run(t, "search", "--index", idx, "--text", "a red circle", "--json")
	if code != 0 {
		t.Fatalf("search: exit %d: %s", code, stderr)
	}
	var res struct {
		Results []struct {
			Image struct{ ID, Path string }
		}
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || len(res.Results) != 2 {
		t.Fatalf("search printed %q (%v)", stdout, err)
	}
	ids := res.Results[0].Image.ID + " " + res.Results[1].Image.ID
	if !strings.Contains(ids, "red") || !strings.Contains(ids, "sub/blue") {
		t.Errorf("results %q", ids)
	}

	// The same photos through xmr extract (index-only) and xmr index --data.
	photoFeats := filepath.Join(dir, "photo-feats")
	if _, stderr, code := run(t, "extract", "--images", photos, "--out", photoFeats); code != 1 {
		t.Fatalf("extract of the photos: exit %d, want 1 (a bad file): %s", code, stderr)
	}
	stdout, stderr, code = run(t, "index", "--checkpoint", runPx, "--data", photoFeats, "--images", photos, "--out", filepath.Join(dir, "photos2.idx"))
	if code != 0 || !strings.Contains(stdout, "indexed 2 images (no captions)") {
		t.Fatalf("index --data of an index-only split: exit %d, %s %s", code, stdout, stderr)
	}
	stdout, _, _ = run(t, "search", "--index", filepath.Join(dir, "photos2.idx"), "--text", "a red circle", "--json")
	if !strings.Contains(stdout, filepath.Join(photos, "sub", "blue.png")) {
		t.Errorf("search of the index-only index: %s", stdout)
	}

	// A new image as the query, against an index with captions.
	capIdx := filepath.Join(dir, "feats.idx")
	if _, stderr, code := run(t, "index", "--checkpoint", runPx, "--data", feats, "--split", "test", "--out", capIdx); code != 0 {
		t.Fatalf("index --data: exit %d: %s", code, stderr)
	}
	query := filepath.Join(world, "images", "test", "synth-0000003.png")
	stdout, stderr, code = run(t, "search", "--index", capIdx, "--image-file", query, "-k", "4", "--json")
	if code != 0 {
		t.Fatalf("search --image-file: exit %d: %s", code, stderr)
	}
	var capRes struct {
		Mode    string
		Results []struct{ Caption struct{ Text string } }
	}
	if err := json.Unmarshal([]byte(stdout), &capRes); err != nil || capRes.Mode != "image-to-text" || len(capRes.Results) != 4 || capRes.Results[0].Caption.Text == "" {
		t.Errorf("search --image-file printed %q (%v)", stdout, err)
	}
	// What xmr serve takes uploads with.
	uq, err := uploadQuery(context.Background(), capIdx, nil, false, "", 1<<20)
	if err != nil || uq == nil {
		t.Fatalf("uploadQuery: %v", err)
	}
	m, cf, err := model.Load(runPx)
	if err != nil {
		t.Fatal(err)
	}
	cf.Close()
	qb, _ := os.ReadFile(query)
	if q, err := uq(context.Background(), qb, []model.Model{m}); err != nil || len(q) != 1 || q[0].Len() != 1 {
		t.Errorf("upload of a PNG: %v", err)
	}
	if _, err := uq(context.Background(), []byte("GIF89a"), []model.Model{m}); !errors.Is(err, server.ErrBadImage) {
		t.Errorf("upload of a GIF: %v", err)
	}
	ihdr := []byte("IHDR\x00\x01\x86\xa0\x00\x01\x86\xa0\x08\x02\x00\x00\x00") // 100000 x 100000 RGB
	bomb := binary.BigEndian.AppendUint32(append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0d"), ihdr...), crc32.ChecksumIEEE(ihdr))
	if _, err := uq(context.Background(), bomb, []model.Model{m}); !errors.Is(err, server.ErrImageTooLarge) {
		t.Errorf("upload of a PNG claiming 100000x100000: %v", err)
	}
	if uq, err := uploadQuery(context.Background(), filepath.Join(dir, "x.idx"), nil, false, "", 1<<20); uq != nil || err != nil {
		t.Errorf("uploadQuery of a directory without an index: %v", err)
	}

	worldIdx := filepath.Join(dir, "world.idx")
	if _, stderr, code := run(t, "index", "--checkpoint", runWorld, "--data", world, "--split", "test", "--out", worldIdx); code != 0 {
		t.Fatalf("index of the world: exit %d: %s", code, stderr)
	}
	_, stderr, code = run(t, "search", "--index", worldIdx, "--image-file", query)
	if code != 1 || !strings.Contains(stderr, "records no feature extractor") {
		t.Errorf("--image-file on an index of precomputed features: exit %d, %s", code, stderr)
	}
	_, stderr, code = run(t, "search", "--index", capIdx, "--image-file", filepath.Join(photos, "broken.jpg"))
	if code != 1 || !strings.Contains(stderr, "broken.jpg") {
		t.Errorf("--image-file of a broken file: exit %d, %s", code, stderr)
	}

	// xmr align on a photo alone.
	png := filepath.Join(dir, "align.png")
	stdout, stderr, code = run(t, "align", "--checkpoint", runPx, "--image", filepath.Join(photos, "red.png"), "--text", "a red square", "--out", png)
	if code != 0 || !strings.Contains(stdout, "region") {
		t.Fatalf("align --image: exit %d: %s %s", code, stdout, stderr)
	}
	if st, err := os.Stat(png); err != nil || st.Size() == 0 {
		t.Errorf("align wrote %v, %v", st, err)
	}
	_, stderr, code = run(t, "align", "--checkpoint", runWorld, "--image", filepath.Join(photos, "red.png"), "--text", "a red square", "--out", png)
	if code != 1 || !strings.Contains(stderr, "give the image's --features and --boxes") {
		t.Errorf("align --image with a world model: exit %d, %s", code, stderr)
	}

	// A model trained on the global/ copy: given the regions' data set,
	// eval reads its global/ copy; align, which extracts regions, refuses
	// it.
	runGlobal := filepath.Join(dir, "run-global")
	if _, stderr, code := run(t, "train", "--config", cfg, "--data", global, "--out", runGlobal, "--max-iters", "2", "--val-images", "30"); code != 0 {
		t.Fatalf("train on global features: exit %d: %s", code, stderr)
	}
	_, stderr, code = run(t, "eval", "--checkpoint", runGlobal, "--data", feats, "--no-ndcg")
	if code != 0 || !strings.Contains(stderr, "its images are the data set's global copy") || !strings.Contains(stderr, "data="+global) {
		t.Errorf("global model on the regions' data set: exit %d, %s; want its global/ copy read", code, stderr)
	}
	_, stderr, code = run(t, "align", "--checkpoint", runGlobal, "--image", filepath.Join(photos, "red.png"), "--text", "a red square", "--out", png)
	if code != 1 || !strings.Contains(stderr, "trained on global features") || !strings.Contains(stderr, "(align extracts its regions) holds region features") {
		t.Errorf("align --image with a global model: exit %d, %s", code, stderr)
	}
}

// TestExtractFolder extracts a folder of photos with a captions file, and
// one without, with a bad image among them.
func TestExtractFolder(t *testing.T) {
	useFakeDetector(t)
	dir := t.TempDir()
	photos := filepath.Join(dir, "photos")
	os.MkdirAll(photos, 0o755)
	var caps strings.Builder
	for i, c := range []color.RGBA{{200, 0, 0, 255}, {0, 200, 0, 255}, {0, 0, 200, 255}} {
		name := string(rune('a'+i)) + ".png"
		writeColourPNG(t, filepath.Join(photos, name), 50+i, 40, c)
		for k := range 5 {
			caps.WriteString(name + "#" + string(rune('0'+k)) + "\tcaption " + string(rune('0'+k)) + " of " + name + "\n")
		}
	}
	capsFile := filepath.Join(dir, "caps.token")
	os.WriteFile(capsFile, []byte(caps.String()), 0o644)
	out := filepath.Join(dir, "out")
	if _, stderr, code := run(t, "extract", "--images", photos, "--captions", capsFile, "--split", "test", "--out", out); code != 0 {
		t.Fatalf("extract with captions: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "test_caps.txt"))
	if err != nil || strings.Count(string(b), "\n") != 15 || !strings.HasPrefix(string(b), "caption 0 of a.png\n") {
		t.Errorf("captions %q, %v", b, err)
	}

	// Index-only, with a truncated PNG: the rest is written, the command
	// fails naming the file.
	full, _ := os.ReadFile(filepath.Join(photos, "b.png"))
	os.WriteFile(filepath.Join(photos, "b.png"), full[:len(full)/2], 0o644)
	out2 := filepath.Join(dir, "out2")
	stdout, stderr, code := run(t, "extract", "--images", photos, "--out", out2)
	if code != 1 || !strings.Contains(stdout, "skipped "+filepath.Join(photos, "b.png")) || !strings.Contains(stderr, "1 images could not be read") {
		t.Errorf("bad image: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	set, err := extract.LoadImages(out2, "test")
	if err != nil || set.Images.N != 2 || set.IDs[1] != "c" {
		t.Errorf("index-only split: %v, %v", set, err)
	}
	// A detector that cannot be loaded (missing or damaged weights): a
	// clear error, and nothing written.
	loadDetector = func(context.Context, string) (extract.Detector, error) {
		return nil, errors.New("the detector's weights: detect: /cache/centernet-human-3.3.6/centernet.bin has SHA-256 0123, want bfb9 (a damaged or different file)")
	}
	out3 := filepath.Join(dir, "out3")
	_, stderr, code = run(t, "extract", "--images", photos, "--out", out3)
	if code != 1 || !strings.Contains(stderr, "centernet.bin has SHA-256") {
		t.Errorf("broken weights: exit %d, %s", code, stderr)
	}
	if _, err := os.Stat(out3); !os.IsNotExist(err) {
		t.Errorf("broken weights: %s was created (%v)", out3, err)
	}
	useFakeDetector(t)

	// Usage errors.
	for _, args := range [][]string{
		{"extract", "--images", photos},
		{"extract", "--images", photos, "--out", out2, "--shard", "3/2"},
		{"extract", "--images", photos, "--out", out2, "--shard", "1/2", "--join"},
		{"extract", "--images", photos, "--out", filepath.Join(photos, "feats")},
	} {
		if _, stderr, code := run(t, args...); code != 2 {
			t.Errorf("%q: exit %d, %s", args, code, stderr)
		}
	}
}

// killEnv asks the test binary to act as the process of
// TestExtractKill9 (see TestExtractKillHelper): its value is the
// command's arguments, separated by newlines.
const killEnv = "XMR_TEST_EXTRACT_KILL"

// slowDetector is pixelDetector taking 30 ms an image, so that a kill
// lands in the middle of a run.
type slowDetector struct{ pixelDetector }

func (d slowDetector) Run(ctx context.Context, rgb []float32, opt detect.RunOptions) (*detect.Output, error) {
	time.Sleep(30 * time.Millisecond)
	return d.pixelDetector.Run(ctx, rgb, opt)
}

// TestExtractKillHelper is not a test: run as a child process of
// TestExtractKill9, it runs xmr extract with slowDetector until killed.
func TestExtractKillHelper(t *testing.T) {
	args := os.Getenv(killEnv)
	if args == "" {
		t.Skip("the child process of TestExtractKill9")
	}
	loadDetector = func(context.Context, string) (extract.Detector, error) { return slowDetector{}, nil }
	os.Exit(runMain(strings.Split(args, "\n"), os.Stdout, os.Stderr))
}

// TestExtractKill9 kills xmr extract with SIGKILL in the middle of a run:
// the output holds finished parts only, and the same command run again
// extracts the rest and writes what an uninterrupted run writes.
func TestExtractKill9(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	useFakeDetector(t)
	dir := t.TempDir()
	photos := filepath.Join(dir, "photos")
	os.MkdirAll(photos, 0o755)
	for i := range 40 {
		writeColourPNG(t, filepath.Join(photos, fmt.Sprintf("p%02d.png", i)), 20+i, 30, color.RGBA{uint8(6 * i), 100, uint8(250 - 6*i), 255})
	}
	ref := filepath.Join(dir, "ref")
	if _, stderr, code := run(t, "extract", "--images", photos, "--out", ref, "--chunk", "4"); code != 0 {
		t.Fatalf("reference run: exit %d: %s", code, stderr)
	}
	out := filepath.Join(dir, "out")
	args := []string{"extract", "--images", photos, "--out", out, "--chunk", "4", "--workers", "1"}
	cmd := exec.Command(exe, "-test.run=^TestExtractKillHelper$")
	cmd.Env = append(os.Environ(), killEnv+"="+strings.Join(args, "\n"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(time.Minute)
	for {
		parts, _ := filepath.Glob(filepath.Join(out, extract.PartsDir, "test-*.part"))
		if len(parts) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no two parts in a minute")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// Only parts (and perhaps a temporary file being written) are there.
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		if e.Name() != extract.PartsDir && e.Name() != lockfile.Name {
			t.Errorf("after the kill, %s holds %s", out, e.Name())
		}
	}
	stdout, stderr, code := run(t, args...)
	if code != 0 {
		t.Fatalf("rerun: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "were done before") || strings.Contains(stdout, "; 0 were done before") {
		t.Errorf("rerun reused nothing: %s", stdout)
	}
	for _, name := range []string{"test_ims.npy", "test_boxes.npy", "test_ids.txt", "test_nregions.npy", "test_sizes.npy", "global/test_ims.npy", "features.json"} {
		a, err1 := os.ReadFile(filepath.Join(ref, name))
		b, err2 := os.ReadFile(filepath.Join(out, name))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs from the uninterrupted run's (%v, %v)", name, err1, err2)
		}
	}
	if _, err := os.Stat(filepath.Join(out, extract.PartsDir)); !os.IsNotExist(err) {
		t.Errorf("parts left after the join: %v", err)
	}
}

// tapPixelDetector is pixelDetector that can be loaded with taps, as
// detect.Detector.WithTaps does: its Run then also returns, for each node,
// a 16x16x8 map of the image (the px map's first 8 channels, scaled).
type tapPixelDetector struct {
	pixelDetector
	taps []string
}

// WithTaps returns the detector tapping nodes too.
func (d tapPixelDetector) WithTaps(nodes ...string) (extract.Detector, error) {
	return tapPixelDetector{taps: append(append([]string(nil), d.taps...), nodes...)}, nil
}

func (d tapPixelDetector) Run(ctx context.Context, rgb []float32, opt detect.RunOptions) (*detect.Output, error) {
	out, err := d.pixelDetector.Run(ctx, rgb, opt)
	if err != nil {
		return nil, err
	}
	px := out.Maps[0]
	for _, node := range d.taps {
		m := detect.FeatureMap{Name: node, H: px.H, W: px.W, C: 8, Stride: px.Stride, Data: make([]float32, px.H*px.W*8)}
		for i := range px.H * px.W {
			for c := range 8 {
				m.Data[i*8+c] = 3.7 * px.Data[i*16+c]
			}
		}
		out.Taps = append(out.Taps, m)
	}
	return out, nil
}

// TestExtractTaps: --taps caches the detector's activations at the cut,
// for the shards' join too; an unknown cut is a usage error, and a
// detector that cannot be tapped an error.
func TestExtractTaps(t *testing.T) {
	old := loadDetector
	t.Cleanup(func() { loadDetector = old })
	loadDetector = func(context.Context, string) (extract.Detector, error) { return tapPixelDetector{}, nil }
	dir := t.TempDir()
	photos := filepath.Join(dir, "photos")
	os.MkdirAll(photos, 0o755)
	for i, c := range []color.RGBA{{200, 0, 0, 255}, {0, 200, 0, 255}, {0, 0, 200, 255}} {
		writeColourPNG(t, filepath.Join(photos, string(rune('a'+i))+".png"), 50+i, 40, c)
	}
	out := filepath.Join(dir, "out")
	stdout, stderr, code := run(t, "extract", "--images", photos, "--out", out, "--taps", "s32")
	path := extract.TapsPath(out, "s32", "test")
	if code != 0 || !strings.Contains(stdout, "wrote "+path+": the detector's activations at cut s32") {
		t.Fatalf("extract --taps s32: exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
	f, err := npy.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if f.Header.String() != "(3,16,16,8) float16" {
		t.Errorf("%s is %s", path, f.Header)
	}
	if r, err := extract.ReadRecord(out); err != nil || r.Taps != "s32" {
		t.Errorf("features.json: %+v, %v", r, err)
	}

	// A shard's parts carry the taps, and the join command names them.
	sharded := filepath.Join(dir, "sharded")
	stdout, stderr, code = run(t, "extract", "--images", photos, "--out", sharded, "--taps", "s16", "--chunk", "1", "--shard", "1/2")
	if code != 0 || !strings.Contains(stdout, "--taps s16 --out "+sharded+" --join") {
		t.Errorf("a shard: exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}

	_, stderr, code = run(t, "extract", "--images", photos, "--out", filepath.Join(dir, "x"), "--taps", "s64")
	if code != 2 || !strings.Contains(stderr, `--taps "s64": want one of s16, s32`) {
		t.Errorf("--taps s64: exit %d, %s", code, stderr)
	}
	useFakeDetector(t) // pixelDetector: no WithTaps
	_, stderr, code = run(t, "extract", "--images", photos, "--out", filepath.Join(dir, "y"), "--taps", "s32")
	if code != 1 || !strings.Contains(stderr, "--taps s32: the detector's activation at "+mustCutNode(t, "s32")) {
		t.Errorf("--taps with a detector that cannot be tapped: exit %d, %s", code, stderr)
	}
}

func mustCutNode(t *testing.T, name string) string {
	t.Helper()
	c, err := detect.CutNamed(name)
	if err != nil {
		t.Fatal(err)
	}
	return c.Node
}

// TestExtractTapsDetector runs xmr extract --taps s32 with the real
// detector on three of the shared photos: the taps file is (3, 16, 16,
// 120) float16 of finite values. Without the photos or the detector's
// weights it is skipped, except under CI=true.
func TestExtractTapsDetector(t *testing.T) {
	ci := os.Getenv("CI") == "true"
	shared, err := filepath.Abs(filepath.Join(sharedPhotos, "images"))
	var names []string
	if err == nil {
		var es []os.DirEntry
		es, err = os.ReadDir(shared)
		for _, e := range es {
			if strings.HasSuffix(e.Name(), ".jpg") && len(names) < 3 {
				names = append(names, e.Name())
			}
		}
	}
	if err == nil && len(names) < 3 {
		err = fmt.Errorf("%s holds %d photos", shared, len(names))
	}
	if err != nil {
		if ci {
			t.Fatalf("the shared photos: %v", err)
		}
		t.Skipf("the shared photos are not here: %v", err)
	}
	if _, err := detect.Fetch(context.Background(), detect.DefaultCacheDir()); err != nil {
		if ci {
			t.Fatalf("the detector's weights: %v", err)
		}
		t.Skipf("the detector's weights are not available: %v", err)
	}
	dir := t.TempDir()
	photos := filepath.Join(dir, "photos")
	os.MkdirAll(photos, 0o755)
	for _, n := range names {
		if err := os.Symlink(filepath.Join(shared, n), filepath.Join(photos, n)); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "out")
	if _, stderr, code := run(t, "extract", "--images", photos, "--out", out, "--taps", "s32", "--workers", "1"); code != 0 {
		t.Fatalf("extract --taps s32: exit %d: %s", code, stderr)
	}
	a, err := npy.Read(extract.TapsPath(out, "s32", "test"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := npy.Open(extract.TapsPath(out, "s32", "test"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if f.Header.String() != "(3,16,16,120) float16" {
		t.Fatalf("the taps are %s, want (3,16,16,120) float16", f.Header)
	}
	nonzero := 0
	for _, v := range a.Data {
		if v != v || v > 65504 || v < -65504 {
			t.Fatalf("a tap value is %v", v)
		}
		if v != 0 {
			nonzero++
		}
	}
	if nonzero < len(a.Data)/4 {
		t.Errorf("only %d of %d tap values are not zero", nonzero, len(a.Data))
	}
}

package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/npy"
	"github.com/xmr-project/xmr/synth"
	"github.com/xmr-project/xmr/tensor"
	"github.com/xmr-project/xmr/text"
	"github.com/xmr-project/xmr/tools"
	"github.com/xmr-project/xmr/train"
)

// referencePython returns an interpreter with torch and numpy, or skips
// the test; under CI=true a missing PyTorch fails it (scripts/test
// installs Debian's python3-torch).
func referencePython(t *testing.T) string {
	t.Helper()
	py, err := tools.FindPython(context.Background(), "", "torch", "numpy")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no Python with torch and numpy for the PyTorch cross-check: %v", err)
		}
		t.Skipf("PyTorch cross-check skipped (Debian: apt-get install python3-torch python3-numpy; CI=true makes this a failure): %v", err)
	}
	return py
}

// pytorchReference runs tools/import_reference.py into a new directory and
// returns it.
func pytorchReference(t *testing.T) string {
	t.Helper()
	py := referencePython(t)
	dir := t.TempDir()
	script, err := tools.WriteScript(dir, "import_reference.py")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "ref")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	if b, err := exec.CommandContext(ctx, py, script, out).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", py, script, err, b)
	}
	t.Logf("import_reference.py (%s) ran in %.1f s", py, time.Since(start).Seconds())
	return out
}

func readFloats(t *testing.T, path string) ([]float32, []int) {
	t.Helper()
	a, err := npy.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return a.Data, a.Shape
}

func readInts(t *testing.T, path string) []int {
	t.Helper()
	f, err := npy.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := f.ReadInts()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// relErr is max |got - want| / max |want|: the error relative to the
// array's scale.
func relErr(got, want []float32) float64 {
	var diff, scale float64
	for i := range want {
		diff = math.Max(diff, math.Abs(float64(got[i])-float64(want[i])))
		scale = math.Max(scale, math.Abs(float64(want[i])))
		if math.IsNaN(float64(got[i])) {
			return math.Inf(1)
		}
	}
	return diff / math.Max(scale, 1e-30)
}

// referenceImages reads the reference's images: features (B, R, F), boxes
// (B, R, 4) already normalised, the real region count of each.
func referenceImages(t *testing.T, dir string) *arrayImages {
	feat, fs := readFloats(t, filepath.Join(dir, "feats.npy"))
	boxes, _ := readFloats(t, filepath.Join(dir, "boxes.npy"))
	src := &arrayImages{feat: feat, count: readInts(t, filepath.Join(dir, "nregions.npy")), r: fs[1], d: fs[2]}
	for i := 0; i < fs[0]; i++ {
		for r := 0; r < fs[1]; r++ {
			var b [4]float32
			if r < src.count[i] {
				copy(b[:], boxes[(i*fs[1]+r)*4:])
			}
			src.box5 = append(src.box5, boxCode(b, 1, 1))
		}
	}
	return src
}

func referenceCaptions(t *testing.T, dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "captions.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestImportMatchesPyTorch is the proof that xmr import reads official
// checkpoints right: tools/import_reference.py builds TERAN and TERN with
// the official module names in PyTorch, with random weights, saves them
// as the official train.py does (zip and legacy formats) and writes its
// outputs on fixed inputs; the imported models must give the same region
// vectors, word vectors, scores and loss. A HuggingFace BERT directory
// (model.safetensors, and pytorch_model.bin in the legacy format) must give
// the same last hidden state.
func TestImportMatchesPyTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("PyTorch cross-check skipped in -short mode")
	}
	ref := pytorchReference(t)
	ctx := context.Background()
	src := referenceImages(t, ref)
	captions := referenceCaptions(t, ref)
	ids := readInts(t, filepath.Join(ref, "ids.npy"))
	bertDir := filepath.Join(ref, "bert")
	vocab, err := text.LoadVocab(filepath.Join(bertDir, "vocab.txt"))
	if err != nil {
		t.Fatal(err)
	}
	bcfg, err := model.ReadBERTConfig(bertDir)
	if err != nil {
		t.Fatal(err)
	}
	const tol = 1e-4
	check := func(what string, got, want []float32) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: %d values, PyTorch %d", what, len(got), len(want))
			return
		}
		e := relErr(got, want)
		t.Logf("%-28s max relative error %.2e (%d values)", what, e, len(want))
		if e > tol {
			t.Errorf("%s: relative error %.3g > %g\n got %v\nwant %v", what, e, tol, got, want)
		}
	}
	for _, c := range []struct{ file, name, prefix string }{
		{"teran.pth", "teran", "teran"},
		{"teran_legacy.pth", "teran", "teran"},
		{"tern.pth", "tern", "tern"},
	} {
		t.Run(c.file, func(t *testing.T) {
			start := time.Now()
			m, rep, format, err := importCheckpoint(filepath.Join(ref, c.file), model.OfficialOptions{Vocab: vocab, BERT: &bcfg})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("imported %s (%s format) in %v: %d tensors, %d ignored", c.file, format, time.Since(start).Round(time.Millisecond), rep.Tensors, len(rep.Ignored))
			if m.Name() != c.name {
				t.Fatalf("imported a %s", m.Name())
			}
			tx := model.TextBatch(m, captions)
			gotIDs := make([]int, len(tx.IDs))
			for i, id := range tx.IDs {
				gotIDs[i] = int(id)
			}
			if !slices.Equal(gotIDs, ids) {
				t.Fatalf("xmr's WordPiece ids %v, the reference's %v", gotIDs, ids)
			}
			imgs, err := model.EncodeImages(ctx, m, src, nil)
			if err != nil {
				t.Fatal(err)
			}
			txts, err := model.EncodeTexts(ctx, m, captions, nil)
			if err != nil {
				t.Fatal(err)
			}
			wantRegions, _ := readFloats(t, filepath.Join(ref, c.prefix+"_regions.npy"))
			wantWords, _ := readFloats(t, filepath.Join(ref, c.prefix+"_words.npy"))
			wantScores, _ := readFloats(t, filepath.Join(ref, c.prefix+"_scores.npy"))
			wantLoss, _ := readFloats(t, filepath.Join(ref, c.prefix+"_loss.npy"))
			check(c.file+" region vectors", imgs.Vecs, wantRegions)
			check(c.file+" word vectors", txts.Vecs, wantWords)
			scores, err := model.ScoreMatrix(ctx, imgs, txts, m.Scoring())
			if err != nil {
				t.Fatal(err)
			}
			check(c.file+" scores ("+m.Scoring().String()+")", scores, wantScores)
			n := len(captions)
			loss := train.ContrastiveLoss(nil, tensor.FromData(scores, src.Len(), n), 0.2, true)
			check(c.file+" hinge loss", loss.Data, wantLoss)
		})
	}
	for _, dir := range []string{"bert", "bert_bin"} {
		t.Run(dir, func(t *testing.T) {
			b, err := model.LoadBERT(filepath.Join(ref, dir), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			wp, err := text.NewWordPiece(vocab)
			if err != nil {
				t.Fatal(err)
			}
			batch := wp.EncodeBatch(captions, text.EncodeOptions{})
			h := b.Forward(nil, batch.IDs, tensor.FromData(batch.FloatMask(), batch.B, batch.T), batch.Lens) // (C, T, W)
			w := h.Shape[2]
			var got []float32
			for i, l := range batch.Lens {
				got = append(got, h.Data[i*batch.T*w:(i*batch.T+l)*w]...)
			}
			want, _ := readFloats(t, filepath.Join(ref, "bert_hidden.npy"))
			check(dir+" last hidden state", got, want)
		})
	}
}

// TestImportCommand runs xmr import on the reference's checkpoints and
// the imported model through xmr eval, index, search and align.
func TestImportCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the PyTorch reference; skipped in -short mode")
	}
	ref := pytorchReference(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "teran.safetensors")
	stdout, stderr, code := run(t, "import", "--from", filepath.Join(ref, "teran.pth"), "--bert", filepath.Join(ref, "bert"), "--out", out)
	if code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	for _, w := range []string{"imported teran from", "(zip format)", "pooling MrSw", "final layers (separate)", "not used by xmr (8 tensors)",
		"img_txt_enc.txt_enc.word_embeddings.weight: the same table", "slot 0: a zero region", "wrote " + out} {
		if !strings.Contains(stdout, w) {
			t.Errorf("import output lacks %q:\n%s", w, stdout)
		}
	}
	if _, stderr, code := run(t, "import", "--from", filepath.Join(ref, "teran.pth"), "--bert", filepath.Join(ref, "bert"), "--out", out); code != 1 || !strings.Contains(stderr, "already exists") {
		t.Errorf("import over an existing file: exit %d: %s", code, stderr)
	}
	// The same with --vocab alone: BERT's heads are then guessed (64
	// dimensions each), which this 16-wide BERT with 2 heads refuses.
	_, stderr, code = run(t, "import", "--from", filepath.Join(ref, "tern.pth"), "--vocab", filepath.Join(ref, "bert", "vocab.txt"), "--out", filepath.Join(dir, "x.safetensors"))
	if code != 1 || !strings.Contains(stderr, "BERT config: 0 attention heads do not divide the width 16") {
		t.Errorf("import --vocab: exit %d: %s", code, stderr)
	}
	stdout, stderr, code = run(t, "import", "--from", filepath.Join(ref, "tern.pth"), "--bert", filepath.Join(ref, "bert"), "--out", filepath.Join(dir, "tern.safetensors"))
	if code != 0 || !strings.Contains(stdout, "I-CLS: the box MLP's output") {
		t.Fatalf("import tern: exit %d: %s%s", code, stdout, stderr)
	}

	// A precomp dataset of the reference's images (all 5 slots as regions)
	// with 5 captions each, for eval, index and search.
	src := referenceImages(t, ref)
	data := filepath.Join(dir, "data")
	os.MkdirAll(data, 0o755)
	if err := npy.WriteFile(filepath.Join(data, "test_ims.npy"), []int{src.Len(), src.r, src.d}, src.feat); err != nil {
		t.Fatal(err)
	}
	caps := referenceCaptions(t, ref)
	var lines []string
	for i := range src.Len() {
		for k := range 5 {
			lines = append(lines, caps[(i+k)%len(caps)])
		}
	}
	os.WriteFile(filepath.Join(data, "test_caps.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	if stdout, stderr, code = run(t, "eval", "--checkpoint", out, "--data", data, "--split", "test"); code != 0 || !strings.Contains(stdout, "R@1") {
		t.Fatalf("eval: exit %d: %s%s", code, stdout, stderr)
	}
	idx := filepath.Join(dir, "ref.idx")
	if stdout, stderr, code = run(t, "index", "--checkpoint", out, "--data", data, "--split", "test", "--out", idx); code != 0 {
		t.Fatalf("index: exit %d: %s%s", code, stdout, stderr)
	}
	if stdout, stderr, code = run(t, "search", "--index", idx, "--text", caps[0], "-k", "2"); code != 0 || !strings.Contains(stdout, "text-to-image") {
		t.Fatalf("search: exit %d: %s%s", code, stdout, stderr)
	}

	// xmr align on image 0 of the reference, boxes in pixels of a 200x100 image.
	feats := src.Image(0)[:src.count[0]*src.d]
	boxes, _ := readFloats(t, filepath.Join(ref, "boxes.npy"))
	px := make([]float32, src.count[0]*4)
	for r := range src.count[0] {
		for k := range 4 {
			px[r*4+k] = boxes[r*4+k] * []float32{200, 100}[k%2]
		}
	}
	npy.WriteFile(filepath.Join(dir, "f.npy"), []int{src.count[0], src.d}, feats)
	npy.WriteFile(filepath.Join(dir, "b.npy"), []int{src.count[0], 4}, px)
	png := filepath.Join(dir, "align.png")
	stdout, stderr, code = run(t, "align", "--checkpoint", out, "--features", filepath.Join(dir, "f.npy"), "--boxes", filepath.Join(dir, "b.npy"),
		"--size", "200x100", "--text", caps[0], "--out", png)
	if code != 0 {
		t.Fatalf("align: exit %d: %s", code, stderr)
	}
	// The score align prints is the reference's for the pair.
	want, _ := readFloats(t, filepath.Join(ref, "teran_scores.npy"))
	if !strings.Contains(stdout, fmt.Sprintf("teran score of the pair: %.4f (MrSw)", want[0])) {
		t.Errorf("align printed\n%s\nwant the reference's score %.4f", stdout, want[0])
	}
	checkPNG(t, png, 400)
}

// checkPNG decodes a PNG and checks it is at least minWidth wide.
func checkPNG(t *testing.T, path string, minWidth int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if img.Bounds().Dx() < minWidth {
		t.Errorf("%s is %v", path, img.Bounds())
	}
}

// writeBERTDir writes a small HuggingFace BERT directory (config.json,
// vocab.txt, model.safetensors with random weights) of width 16.
func writeBERTDir(t *testing.T, dir string, vocab []string) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	cfg := fmt.Sprintf(`{"vocab_size": %d, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 24,
		"max_position_embeddings": 64, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu"}`, len(vocab))
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vocab.txt"), []byte(strings.Join(vocab, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bc, err := model.ReadBERTConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := model.NewBERT(rand.New(rand.NewPCG(5, 5)), bc, 2, 0)
	var entries []checkpoint.Entry
	for _, p := range b.Params() {
		entries = append(entries, checkpoint.Entry{Name: p.Name, Shape: p.T.Shape, Data: p.T.Data})
	}
	if err := checkpoint.Save(filepath.Join(dir, "model.safetensors"), entries, nil); err != nil {
		t.Fatal(err)
	}
}

// TestTrainFromPretrainedBERT trains with xmr train --bert: the run's
// model has the BERT directory's vocabulary and sizes; and xmr import
// --bert --config makes the untrained model with it.
func TestTrainFromPretrainedBERT(t *testing.T) {
	dir := t.TempDir()
	world := filepath.Join(dir, "world")
	if _, err := synth.Generate(context.Background(), world, synth.Config{N: 120, Seed: 3, Dim: 16, Regions: 6, Noise: 0.1, Dev: 30, Test: 30}); err != nil {
		t.Fatal(err)
	}
	vocab := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "red", "blue", "green", "circle", "square", "triangle", "left", "of", "the"}
	bertDir := filepath.Join(dir, "bert")
	writeBERTDir(t, bertDir, vocab)
	cfgPath := writeTinyConfig(t, dir, "teran", "alignment")
	runDir := filepath.Join(dir, "run")
	if _, stderr, code := run(t, "train", "--config", cfgPath, "--bert", bertDir, "--data", world, "--out", runDir, "--max-iters", "2", "--val-images", "30"); code != 0 {
		t.Fatalf("train --bert: exit %d: %s", code, stderr)
	}
	m, f, err := model.Load(filepath.Join(runDir, "last.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	tm := m.Config().TextModel
	if !slices.Equal(m.Tokenizer().Vocab().Tokens(), vocab) || tm.VocabSize != len(vocab) || tm.FF != 24 || tm.MaxPositions != 64 || tm.ExtractionHiddenLayer != 1 {
		t.Errorf("trained model: vocabulary %v, text model %+v", m.Tokenizer().Vocab().Tokens()[:6], tm)
	}
	if _, stderr, code := run(t, "train", "--bert", bertDir, "--data", world, "--out", runDir, "--resume"); code != 2 || !strings.Contains(stderr, "--bert goes with --config") {
		t.Errorf("train --resume --bert: exit %d: %s", code, stderr)
	}
	out := filepath.Join(dir, "init.safetensors")
	stdout, stderr, code := run(t, "import", "--bert", bertDir, "--config", cfgPath, "--out", out)
	if code != 0 || !strings.Contains(stdout, "the rest is untrained") {
		t.Fatalf("import --bert: exit %d: %s%s", code, stdout, stderr)
	}
	m2, f2, err := model.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	f2.Close()
	if m2.Config().TextModel.VocabSize != len(vocab) {
		t.Errorf("import --bert: text model %+v", m2.Config().TextModel)
	}
}

func TestImportUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"import", "--from", "x.pth"}, 2, "--out is required"},
		{[]string{"import", "--out", "x"}, 2, "give --from"},
		{[]string{"import", "--from", "x.pth", "--config", "c", "--out", "o"}, 2, "--config goes with --bert alone"},
		{[]string{"import", "--bert", "d", "--out", "o"}, 2, "needs --config"},
		{[]string{"import", "--from", "x.pth", "--out", filepath.Join(t.TempDir(), "o")}, 2, "official checkpoints hold no vocabulary"},
		{[]string{"import", "--from", "x.pth", "--vocab", "v", "--pooling", "order", "--out", filepath.Join(t.TempDir(), "o")}, 2, "--pooling \"order\""},
		{[]string{"align", "--checkpoint", "c", "--features", "f", "--boxes", "b", "--out", "o", "--text", "a dog"}, 2, "give --image"},
		{[]string{"align", "--checkpoint", "c", "--features", "f", "--boxes", "b", "--out", "o", "--size", "10x10"}, 2, "--text is required"},
		{[]string{"align", "--checkpoint", "c", "--features", "f", "--boxes", "b", "--out", "o", "--size", "ten", "--text", "a"}, 2, "--size \"ten\""},
	} {
		_, stderr, code := run(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}

// TestImportRefusesCode gives xmr import a checkpoint whose pickle calls
// os.system (as a malicious torch.save file does): it is refused, naming
// the global, and the command never runs.
func TestImportRefusesCode(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "pwned")
	cmd := "touch " + marker
	pickle := []byte("\x80\x02cposix\nsystem\nX")
	pickle = binary.LittleEndian.AppendUint32(pickle, uint32(len(cmd)))
	pickle = append(append(pickle, cmd...), "\x85R."...)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.CreateHeader(&zip.FileHeader{Name: "evil/data.pkl", Method: zip.Store})
	w.Write(pickle)
	zw.Close()
	evil := filepath.Join(dir, "evil.pth")
	os.WriteFile(evil, buf.Bytes(), 0o644)
	vocab := filepath.Join(dir, "vocab.txt")
	os.WriteFile(vocab, []byte("[PAD]\n[UNK]\n[CLS]\n[SEP]\n"), 0o644)
	_, stderr, code := run(t, "import", "--from", evil, "--vocab", vocab, "--out", filepath.Join(dir, "out.safetensors"))
	if code != 1 || !strings.Contains(stderr, "refused global posix.system") || !strings.Contains(stderr, evil) {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the pickle's command ran")
	}
	if _, err := os.Stat(filepath.Join(dir, "out.safetensors")); err == nil {
		t.Error("a refused import wrote its output")
	}
}

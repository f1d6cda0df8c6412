package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"image"
	"image/color"
	"image/png"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/npy"
	"github.com/xmr-project/xmr/synth"
	"github.com/xmr-project/xmr/text"
)

// flagArg is a flag and its value.
type flagArg struct{ flag, value string }

// outArg is an output flag of a command; stream says that it may be a
// FIFO or a terminal, written directly.
type outArg struct {
	flag, value string
	stream      bool
}

// outputsCase is one command line of the outputs table: a run that would
// work, with the files it reads and the paths it writes.
type outputsCase struct {
	name    string
	args    []string  // the command and its other flags
	inputs  []flagArg // what it reads
	extras  []flagArg // inputs added only to the runs that aim an output at them
	outputs []outArg
	// works says that the command line as given runs to the end: the
	// stream outputs are then run into a FIFO.
	works bool
}

// line returns the arguments of c with the outputs' values
// replaced by set, and the extra input with that flag added.
func (c outputsCase) line(set map[string]string, extra *flagArg) []string {
	args := slices.Clone(c.args)
	for _, in := range c.inputs {
		args = appendArg(args, in.flag, in.value)
	}
	if extra != nil {
		args = appendArg(args, extra.flag, extra.value)
	}
	for _, o := range c.outputs {
		v := o.value
		if s, ok := set[o.flag]; ok {
			v = s
		}
		args = appendArg(args, o.flag, v)
	}
	return args
}

// appendArg appends flag and its value to args: as two arguments, or as
// one for a benchmark's key=value argument (a flag ending in "=").
func appendArg(args []string, flag, value string) []string {
	if strings.HasSuffix(flag, "=") {
		return append(args, flag+value)
	}
	return append(args, flag, value)
}

// noFileOutputs are the commands that write no file a flag names, with
// why.
var noFileOutputs = map[string]string{
	"search":   "prints results; reads an index",
	"serve":    "serves HTTP; reads an index and images",
	"tokenize": "prints tokens",
	"version":  "prints the version",
}

// notYetInTable are commands that write files but are not in the table
// yet, with why: each is a gap to close, listed so that it is seen.
var notYetInTable = map[string]string{
	"hang": "a test command (interrupt_test.go)",
}

// TestOutputsNeverReplaceInputs is the table of issue 27: every command
// that writes a file is run with each output aimed at each of its inputs
// (and at a file inside each input directory), at a character device and
// at a FIFO. An output aimed at an input is refused before any work, exit
// 2, with a message naming both flags; the device is refused and stays a
// device; the FIFO is refused where the output must be a regular file or a
// directory, and otherwise written as a stream and left a FIFO. After every
// run every input has its sha256 of before.
func TestOutputsNeverReplaceInputs(t *testing.T) {
	root := t.TempDir()
	in := filepath.Join(root, "in")
	fx := writeOutputsFixture(t, in)
	outDir := filepath.Join(root, "out")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := func(name string) string { return filepath.Join(outDir, name) }
	dataExtras := []flagArg{{"--karpathy", fx.karpathy}, {"--sizes", fx.sizes}, {"--coco-annotations", fx.cocoAnns}}

	cases := []outputsCase{
		{
			name: "eval --checkpoint", args: []string{"eval", "--split", "test"},
			inputs:  []flagArg{{"--checkpoint", fx.ckpt}, {"--checkpoint", fx.runDir}, {"--data", fx.world}, {"--relevance", fx.rel}, {"--relevance-spice", fx.relSpice}},
			extras:  dataExtras,
			outputs: []outArg{{"--out", out("m.json"), true}, {"--save-sims", out("s.npy"), true}, {"--cpuprofile", out("cpu.prof"), true}},
			works:   true,
		},
		{
			name: "eval --sims", args: []string{"eval"},
			inputs:  []flagArg{{"--sims", fx.sims}, {"--relevance", fx.simsRel}, {"--relevance-spice", fx.simsRel2}},
			outputs: []outArg{{"--out", out("m.json"), true}, {"--cpuprofile", out("cpu.prof"), true}},
			works:   true,
		},
		{
			name: "relevance", args: []string{"relevance", "--metric", "rouge-l"},
			inputs:  []flagArg{{"--captions", fx.caps}},
			outputs: []outArg{{"--out", out("rel.bin"), false}},
			works:   true,
		},
		{
			name: "align", args: []string{"align", "--text", "a red circle"},
			inputs:  []flagArg{{"--checkpoint", fx.runDir}, {"--features", fx.feats}, {"--boxes", fx.boxes}, {"--image", fx.image}},
			outputs: []outArg{{"--out", out("align.png"), true}},
			works:   true,
		},
		{
			name: "import --bert", args: []string{"import", "--overwrite"},
			inputs:  []flagArg{{"--bert", fx.bert}, {"--config", fx.config}},
			outputs: []outArg{{"--out", out("init.safetensors"), true}},
			works:   true,
		},
		{
			// The checkpoint here is no real one: only refusals are run.
			name: "import --from", args: []string{"import", "--overwrite"},
			inputs:  []flagArg{{"--from", fx.pth}, {"--vocab", fx.vocab}},
			outputs: []outArg{{"--out", out("imported.safetensors"), true}},
		},
		{
			name: "train", args: []string{"train", "--max-iters", "1", "--val-images", "30"},
			inputs:  []flagArg{{"--config", fx.config}, {"--data", fx.world}},
			extras:  append([]flagArg{{"--bert", fx.bert}}, dataExtras...),
			outputs: []outArg{{"--out", out("run"), false}, {"--cpuprofile", out("train.prof"), true}},
			works:   true,
		},
		{
			name: "export", args: []string{"export", "--half"},
			inputs:  []flagArg{{"--checkpoint", fx.ckpt}},
			outputs: []outArg{{"--out", out("exported.safetensors"), true}},
			works:   true,
		},
		{
			name: "convert", args: []string{"convert", "--splits", "test"},
			inputs:  []flagArg{{"--data", fx.world}},
			extras:  dataExtras,
			outputs: []outArg{{"--out", out("precomp"), false}},
			works:   true,
		},
		{
			name: "index", args: []string{"index", "--split", "test"},
			inputs:  []flagArg{{"--checkpoint", fx.ckpt}, {"--data", fx.world}, {"--images", fx.images}},
			extras:  dataExtras,
			outputs: []outArg{{"--out", out("idx"), false}},
			works:   true,
		},
		{
			name: "fuse", args: []string{"fuse", "--weights", "1,0.5"},
			inputs:  []flagArg{{"--index", fx.idxA}, {"--index", fx.idxB}},
			outputs: []outArg{{"--out", out("fused"), false}},
			works:   true,
		},
		{
			name: "synth", args: []string{"synth", "-n", "100", "--dim", "8", "--regions", "4", "--no-images"},
			outputs: []outArg{{"--out", out("world"), false}},
			works:   true,
		},
		{
			// The detector is fetched with npm: only refusals are run.
			name: "extract", args: []string{"extract", "--split", "test"},
			inputs:  []flagArg{{"--images", fx.images}, {"--captions", fx.photoCaps}},
			extras:  []flagArg{{"--image-root", fx.world}},
			outputs: []outArg{{"--out", out("feats"), false}},
		},
		{
			// The demo takes minutes: only refusals are run.
			name: "demo", args: []string{"demo", "--n", "200", "--max-iters", "1", "--no-serve"},
			inputs:  []flagArg{{"--config", fx.config}},
			outputs: []outArg{{"--dir", out("demo"), false}},
		},
		// A benchmark's dir= is its scratch directory; only refusals
		// are run (the benchmarks take seconds to minutes).
		{
			name: "bench search", args: []string{"bench", "--no-peer", "--quick", "search"},
			inputs:  []flagArg{{"world=", fx.world}, {"checkpoint=", fx.ckpt}},
			outputs: []outArg{{"dir=", out("bench-search"), false}},
		},
		{
			name: "bench serve", args: []string{"bench", "--no-peer", "--quick", "serve"},
			inputs:  []flagArg{{"checkpoint=", fx.ckpt}, {"config=", fx.config}},
			outputs: []outArg{{"dir=", out("bench-serve"), false}},
		},
		{
			name: "bench weaviate", args: []string{"bench", "--no-peer", "--quick", "weaviate"},
			inputs:  []flagArg{{"server=", fx.pth}},
			outputs: []outArg{{"dir=", out("bench-weaviate"), false}},
		},
	}

	// Every command that writes a file is in the table.
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.args[0]] = true
	}
	for name := range commands {
		if !covered[name] && noFileOutputs[name] == "" && notYetInTable[name] == "" {
			t.Errorf("command %s is not in the outputs table: add its inputs and outputs to it, or list it in noFileOutputs with why it writes no file", name)
		}
	}

	before := hashTree(t, in)
	checkInputs := func(t *testing.T) {
		t.Helper()
		after := hashTree(t, in)
		for p, h := range before {
			if after[p] != h {
				t.Errorf("input %s changed: %s, was %s", p, orGone(after[p]), h)
			}
		}
		for p := range after {
			if _, ok := before[p]; !ok {
				t.Errorf("new file among the inputs: %s", p)
			}
		}
	}
	// refused runs args and wants a usage error on the command's error
	// line with every one of want.
	refused := func(t *testing.T, cmd string, args []string, want ...string) {
		t.Helper()
		_, stderr, code := run(t, args...)
		line := errorLine(stderr, cmd)
		ok := code == 2
		for _, w := range want {
			ok = ok && strings.Contains(line, w)
		}
		if !ok {
			t.Errorf("xmr %s: exit %d, stderr:\n%s\nwant exit 2 and an error naming %q", strings.Join(args, " "), code, stderr, want)
		}
	}

	dev, devOK := mknodFull(t, root)
	fifo := filepath.Join(root, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := c.args[0]
			targets := append(slices.Clone(c.inputs), c.extras...)
			for _, o := range c.outputs {
				for k, i := range targets {
					var extra *flagArg
					if k >= len(c.inputs) {
						extra = &targets[k]
					}
					aims := []string{i.value}
					if inner := firstFile(i.value); inner != "" {
						aims = append(aims, inner)
					}
					for _, aim := range aims {
						refused(t, cmd, c.line(map[string]string{o.flag: aim}, extra), o.flag+" ", i.flag+" ")
						checkInputs(t)
					}
				}
				// Another output of the same command.
				for _, o2 := range c.outputs {
					if o2.flag != o.flag {
						refused(t, cmd, c.line(map[string]string{o.flag: o2.value}, nil), o.flag+" ", o2.flag+" ")
					}
				}
				if devOK {
					refused(t, cmd, c.line(map[string]string{o.flag: dev}, nil), o.flag+" "+dev+" is a character device")
					if st, err := os.Stat(dev); err != nil || st.Mode()&fs.ModeCharDevice == 0 {
						t.Fatalf("%s %s: the device node is now %v (%v)", c.name, o.flag, st.Mode(), err)
					}
				}
				if !o.stream {
					refused(t, cmd, c.line(map[string]string{o.flag: fifo}, nil), o.flag+" "+fifo+" is a FIFO")
				} else if c.works {
					got, stderr, code := runIntoFIFO(t, fifo, c.line(map[string]string{o.flag: fifo}, nil))
					if code != 0 || len(got) == 0 {
						t.Errorf("%s %s FIFO: exit %d, %d bytes through the FIFO; stderr:\n%s", c.name, o.flag, code, len(got), stderr)
					}
				}
				if st, err := os.Stat(fifo); err != nil || st.Mode()&fs.ModeNamedPipe == 0 {
					t.Fatalf("%s %s: the FIFO is now %v (%v)", c.name, o.flag, st.Mode(), err)
				}
				checkInputs(t)
			}
		})
	}
	// The two cases of the issue, as a user would type them.
	refused(t, "eval", []string{"eval", "--checkpoint", fx.runDir, "--data", fx.world, "--no-ndcg", "--save-sims", filepath.Join(fx.runDir, "best-rsum.safetensors")}, "--save-sims ", "--checkpoint ")
	refused(t, "train", []string{"train", "--config", fx.config, "--data", fx.world, "--out", out("run2"), "--cpuprofile", fx.config}, "--cpuprofile ", "--config ")
	checkInputs(t)
	if ents, _ := os.ReadDir(outDir); len(ents) > 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		// Only the runs that work leave files, and no temporary.
		for _, n := range names {
			if strings.HasPrefix(n, ".") {
				t.Errorf("temporary file left: %s", n)
			}
		}
	}
}

// outputsFixture names the small inputs of TestOutputsNeverReplaceInputs.
type outputsFixture struct {
	world, images, ckpt, runDir, rel, relSpice, sims, simsRel, simsRel2, caps string
	feats, boxes, image, config, bert, vocab, pth                             string
	karpathy, sizes, cocoAnns, photoCaps                                      string
	idxA, idxB                                                                string // two indexes of the world's test split
}

// writeOutputsFixture writes, under dir, a synthetic world of 30 test and
// 30 dev images of 6 regions of 16 features, an untrained TERAN that reads
// it (as a file and as a run directory), relevance and similarity
// matrices, captions, one image's features, boxes and picture, a training
// config, a small BERT directory, and stand-ins for the files that only
// refused runs name.
func writeOutputsFixture(t *testing.T, dir string) outputsFixture {
	t.Helper()
	fx := outputsFixture{
		world: filepath.Join(dir, "world"), images: filepath.Join(dir, "images"), ckpt: filepath.Join(dir, "tiny.safetensors"),
		runDir: filepath.Join(dir, "run"), rel: filepath.Join(dir, "rouge.bin"), relSpice: filepath.Join(dir, "spice.bin"),
		sims: filepath.Join(dir, "sims.npy"), simsRel: filepath.Join(dir, "sims-rouge.bin"), simsRel2: filepath.Join(dir, "sims-spice.bin"), caps: filepath.Join(dir, "caps.txt"),
		feats: filepath.Join(dir, "feat.npy"), boxes: filepath.Join(dir, "boxes.npy"), image: filepath.Join(dir, "images", "0.png"),
		bert: filepath.Join(dir, "bert"), pth: filepath.Join(dir, "official.pth"),
		photoCaps: filepath.Join(dir, "photo-caps.txt"), karpathy: filepath.Join(dir, "dataset_x.json"), sizes: filepath.Join(dir, "sizes.txt"), cocoAnns: filepath.Join(dir, "captions_val.json"),
		idxA: filepath.Join(dir, "a.idx"), idxB: filepath.Join(dir, "b.idx"),
	}
	if _, err := synth.Generate(context.Background(), fx.world, synth.Config{N: 90, Seed: 1, Dim: 16, Regions: 6, Noise: 0.1, NoImages: true, Dev: 30, Test: 30}); err != nil {
		t.Fatal(err)
	}
	vocab := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "red", "blue", "green", "circle", "square", "triangle", "left", "of", "the"}
	m := tinyTERAN(t, vocab)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(model.Save(fx.ckpt, m, nil, nil))
	must(os.MkdirAll(fx.runDir, 0o755))
	must(model.Save(filepath.Join(fx.runDir, "best-rsum.safetensors"), m, nil, nil))
	// Relevance of the test split (150 captions x 30 images), and of a
	// 4 x 20 similarity matrix.
	must(os.WriteFile(fx.rel, rawFloats(150*30, 1), 0o644))
	must(os.WriteFile(fx.relSpice, rawFloats(150*30, 2), 0o644))
	must(os.WriteFile(fx.simsRel, rawFloats(20*4, 3), 0o644))
	must(os.WriteFile(fx.simsRel2, rawFloats(20*4, 4), 0o644))
	sims := make([]float32, 4*20)
	for i := range sims {
		sims[i] = float32(math.Sin(float64(i)))
	}
	must(npy.WriteFile(fx.sims, []int{4, 20}, sims))
	var caps []string
	for i := range 10 {
		caps = append(caps, []string{"a red circle", "a blue square left of a green triangle"}[i%2])
	}
	must(os.WriteFile(fx.caps, []byte(strings.Join(caps, "\n")+"\n"), 0o644))
	feats := make([]float32, 6*16)
	for i := range feats {
		feats[i] = float32(math.Cos(float64(i)))
	}
	must(npy.WriteFile(fx.feats, []int{6, 16}, feats))
	must(npy.WriteFile(fx.boxes, []int{6, 4}, []float32{0, 0, 10, 10, 5, 5, 20, 20, 0, 10, 30, 30, 2, 2, 4, 4, 10, 0, 31, 12, 1, 1, 31, 31}))
	must(os.MkdirAll(fx.images, 0o755))
	img := image.NewRGBA(image.Rect(0, 0, 32, 32))
	for i := range img.Pix {
		img.Pix[i] = uint8(i)
	}
	img.Set(3, 3, color.White)
	f, err := os.Create(fx.image)
	must(err)
	must(png.Encode(f, img))
	must(f.Close())
	fx.config = writeTinyConfig(t, dir, "teran", "alignment")
	writeBERTDir(t, fx.bert, vocab)
	fx.vocab = filepath.Join(fx.bert, "vocab.txt")
	must(os.WriteFile(fx.pth, []byte("not read: every run that names it is refused first"), 0o644))
	must(os.WriteFile(fx.photoCaps, []byte(strings.Repeat("0.png\ta red circle\n", 5)), 0o644))
	must(os.WriteFile(fx.karpathy, []byte(`{"images": []}`), 0o644))
	must(os.WriteFile(fx.sizes, []byte("0 32 32\n"), 0o644))
	must(os.WriteFile(fx.cocoAnns, []byte(`{"images": []}`), 0o644))
	for _, idx := range []string{fx.idxA, fx.idxB} {
		if _, stderr, code := run(t, "index", "--checkpoint", fx.ckpt, "--data", fx.world, "--split", "test", "--out", idx); code != 0 {
			t.Fatalf("index %s: exit %d: %s", idx, code, stderr)
		}
	}
	return fx
}

// rawFloats returns n little-endian float32 values in [0, 1).
func rawFloats(n int, seed float64) []byte {
	b := make([]byte, 0, 4*n)
	for i := range n {
		v := float32(math.Abs(math.Sin(float64(i) + seed)))
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// hashTree returns the sha256 of every regular file under dir, and the
// kind of every other entry, by relative path.
func hashTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if !d.Type().IsRegular() {
			out[rel] = d.Type().String()
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		out[rel] = hex.EncodeToString(h.Sum(nil))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func orGone(h string) string {
	if h == "" {
		return "gone"
	}
	return h
}

// firstFile returns the first regular file, in name order, under
// directory dir; "" when dir is not a directory or holds none.
func firstFile(dir string) string {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return ""
	}
	var files []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	if len(files) == 0 {
		return ""
	}
	return files[0]
}

// errorLine returns the line of stderr that carries command cmd's error.
func errorLine(stderr, cmd string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "xmr "+cmd+": ") {
			return l
		}
	}
	return ""
}

// mknodFull makes a character device node with /dev/full's numbers in
// dir; ok is false (and the test logs why) where the process may not.
func mknodFull(t *testing.T, dir string) (path string, ok bool) {
	t.Helper()
	path = filepath.Join(dir, "full")
	if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, 1<<8|7); err != nil {
		t.Logf("no device node rows: cannot make one here (needs root, or CAP_MKNOD): %v", err)
		return "", false
	}
	return path, true
}

// runIntoFIFO runs xmr with args while this process reads fifo, and
// returns what came through it.
func runIntoFIFO(t *testing.T, fifo string, args []string) (got []byte, stderr string, code int) {
	t.Helper()
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// A FIFO without a writer reads as ended: hold one open until the
	// command is done.
	hold, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	_, stderr, code = run(t, args...)
	hold.Close()
	return <-done, stderr, code
}

// tinyTERAN is an untrained TERAN of 16-d region features and 8-d
// embeddings whose WordPiece tokenizer knows the words of vocab.
func tinyTERAN(t *testing.T, vocab []string) model.Model {
	t.Helper()
	cfg := model.Default()
	cfg.ImageModel = model.ImageConfig{Name: "bottomup", FeatDim: 16, TransformerLayers: 1, Heads: 2, FF: 8, Hidden: 8, PosEncoding: "concat-and-process"}
	cfg.TextModel = model.TextConfig{Name: "bert", WordDim: 8, ExtractionHiddenLayer: 1, FineTune: true, Heads: 2, FF: 8, MaxPositions: 32}
	cfg.Model = model.JointConfig{Name: "teran", EmbedSize: 8, Layers: 1, Heads: 2, FF: 8}
	cfg.MaxCaptionTokens = 32
	tok, err := text.NewWordPiece(text.NewVocab(vocab))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, tok, 1)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

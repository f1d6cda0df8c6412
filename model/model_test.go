package model

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/tensor"
	"github.com/xmr-project/xmr/text"
)

// tinyConfig is a small TERAN with a random BERT over a toy vocabulary.
func tinyConfig(edit func(*Config)) Config {
	cfg := Default()
	cfg.ImageModel = ImageConfig{Name: "bottomup", FeatDim: 6, TransformerLayers: 1, Heads: 2, FF: 8, Hidden: 8, PosEncoding: "concat-and-process"}
	cfg.TextModel = TextConfig{Name: "bert", WordDim: 8, ExtractionHiddenLayer: 1, FineTune: true, Heads: 2, FF: 8, MaxPositions: 16,
		EmbedDim: 8, Hidden: 4, Bidirectional: true, Layers: 1}
	cfg.Model = JointConfig{Name: "teran", EmbedSize: 8, Layers: 1, Heads: 2, FF: 8}
	cfg.MaxCaptionTokens = 16 // within BERT's 16 positions
	if edit != nil {
		edit(&cfg)
	}
	return cfg
}

// tinySEAM makes a config a small SEAM of the given variant.
func tinySEAM(variant string) func(*Config) {
	return func(c *Config) {
		c.Model = JointConfig{Name: "seam", EmbedSize: 8, Similarity: Order}
		c.ImageModel = ImageConfig{Name: "global", FeatDim: 6}
		c.TextModel = TextConfig{Name: variant, EmbedDim: 5, Hops: 3, AttentionUnits: 4, Filters: 3, Hidden: 4, AttentionPenalty: 0.5}
	}
}

// tinyVSEPP makes a config VSE++ at a small size.
func tinyVSEPP(c *Config) {
	c.Model = JointConfig{Name: "vsepp", EmbedSize: 7}
	c.ImageModel = ImageConfig{Name: "global", FeatDim: 6}
	c.TextModel = TextConfig{Name: "gru", EmbedDim: 5}
}

// tinyMEMBER makes a config MEMBER at a small size, over word embeddings
// with a transformer layer, with the given fusion.
func tinyMEMBER(fusion string) func(*Config) {
	return func(c *Config) {
		c.Model = JointConfig{Name: "member", EmbedSize: 8, Layers: 1, Heads: 2, FF: 8, Pool: "max", Fusion: fusion,
			Responses: 5, UsageRatio: 1, Space: "comb", Combination: "similarity", GenerationWeight: 1}
		c.TextModel = TextConfig{Name: "transformer", EmbedDim: 6, Layers: 1, Heads: 2, FF: 8}
	}
}

// named makes a config the registered model name at a small size (SEAM as
// SEAM-C, its variant with the most parts).
func named(name string) func(*Config) {
	switch name {
	case "seam":
		return tinySEAM("seam-c")
	case "vsepp":
		return tinyVSEPP
	case "member":
		return tinyMEMBER("late")
	}
	return func(c *Config) { c.Model.Name = name }
}

// tinyModel builds a small model (see tinyConfig).
func tinyModel(t testing.TB, edit func(*Config)) Model {
	t.Helper()
	cfg := tinyConfig(edit)
	m, err := New(cfg, testTokenizer(t, cfg), 1)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// testTokenizer is a toy vocabulary of the kind cfg's text model needs.
func testTokenizer(t testing.TB, cfg Config) Tokenizer {
	t.Helper()
	toks := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "red", "blue", "circle", "square", "left", "of"}
	var tok Tokenizer
	var err error
	if cfg.TextModel.Name == "bert" {
		tok, err = text.NewWordPiece(text.NewVocab(toks))
	} else {
		tok, err = text.NewWordVocab(text.NewVocab(append([]string{"<pad>", "<start>", "<end>", "<unk>"}, toks[4:]...)))
	}
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

var tinyCaptions = []string{"a red circle", "blue square left of a red circle", "a square"}

// tinyImages are 3 images of up to 4 regions of 6 features.
type tinyImages struct {
	feat  []float32
	boxes [][5]float32
	count []int
}

func newTinyImages(rng *rand.Rand) *tinyImages {
	im := &tinyImages{feat: make([]float32, 3*4*6), boxes: make([][5]float32, 12), count: []int{3, 2, 4}}
	for i := range im.feat {
		im.feat[i] = float32(rng.NormFloat64())
	}
	for i := range im.boxes {
		for k := range 4 {
			im.boxes[i][k] = rng.Float32()
		}
	}
	return im
}

func (im *tinyImages) Len() int                 { return 3 }
func (im *tinyImages) Dims() (int, int)         { return 4, 6 }
func (im *tinyImages) Image(i int) []float32    { return im.feat[i*24 : (i+1)*24] }
func (im *tinyImages) NumRegions(i int) int     { return im.count[i] }
func (im *tinyImages) Box5(i, r int) [5]float32 { return im.boxes[i*4+r] }

// TestEncoderGradients checks every model's gradient (every parameter
// group, through both pipelines and the scoring) against finite
// differences, with a smooth function of the similarities.
func TestEncoderGradients(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Config)
		s    Scoring
	}{
		{"teran-mrsw-bert", nil, MrSw},
		{"teran-zero-region-slot", func(c *Config) { c.ImageModel.Slot0 = "zero-region" }, MrSw},
		{"teran-symm-shared", func(c *Config) { c.Pooling = Symm; c.Model.SharedTransformer = true }, Symm},
		{"tern-global", func(c *Config) { c.Model.Name = "tern" }, Global},
		{"tern-mrsw", func(c *Config) { c.Model.Name = "tern" }, MrSw},
		{"teran-global", nil, Global},
		{"teran-gru", func(c *Config) { c.TextModel.Name = "gru" }, MrSw},
		{"teran-lstm", func(c *Config) { c.TextModel.Name = "lstm" }, MwSr},
		{"teran-transformer", func(c *Config) { c.TextModel.Name = "transformer" }, MrAvgw},
		{"seam-e-order", tinySEAM("seam-e"), Order},
		{"seam-c-order", tinySEAM("seam-c"), Order},
		{"seam-g-order", tinySEAM("seam-g"), Order},
		{"seam-c-cosine", func(c *Config) { tinySEAM("seam-c")(c); c.Model.Similarity = Global }, Global},
		{"vsepp", tinyVSEPP, Global},
		// MEMBER through its memory banks (built from the tiny set, so
		// that the responses carry gradient to the self-embeddings) and
		// its generation losses.
		{"member-late-comb", tinyMEMBER("late"), Global},
		{"member-early-mean-embedding", func(c *Config) {
			tinyMEMBER("early")(c)
			c.Model.Pool, c.Model.Combination = "mean", "embedding"
		}, Global},
		{"member-late-first-cross", func(c *Config) {
			tinyMEMBER("late")(c)
			c.Model.Pool, c.Model.Space = "first", "cross"
		}, Global},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := tinyModel(t, func(cfg *Config) {
				cfg.ImageModel.Dropout, cfg.TextModel.Dropout, cfg.Model.Dropout = 0, 0, 0
				if c.edit != nil {
					c.edit(cfg)
				}
			})
			rng := rand.New(rand.NewPCG(1, 1))
			imgs := newTinyImages(rng)
			im := ImageBatch(imgs, []int{0, 1, 2})
			tx := TextBatch(m, tinyCaptions)
			if mem, ok := m.(Memorizer); ok {
				if err := mem.BuildMemory(context.Background(), imgs, tinyCaptions, []int{0, 1, 2}); err != nil {
					t.Fatal(err)
				}
			}
			pair, _ := m.(PairLosser)
			weights := tensor.RandN(rng, 3, 3)
			var params []*tensor.Tensor
			names := map[*tensor.Tensor]string{}
			for _, p := range m.Params() {
				params = append(params, p.T)
				names[p.T] = p.Name
			}
			f := func(tp *tensor.Tape) *tensor.Tensor {
				ie := m.EncodeImages(tp, im)
				s := Similarity(tp, ie, m.EncodeTexts(tp, tx), c.s)
				out := tp.SumAll(tp.Mul(s, weights))
				if pair != nil {
					out = tp.Add(out, tp.Reshape(pair.PairLoss(tp, ie, tx)))
				}
				return out
			}
			tp := tensor.NewTape()
			tp.Backward(f(tp))
			for _, p := range params {
				if p.Grad == nil {
					t.Errorf("%s gets no gradient", names[p])
				}
			}
			tp.Reset()
			for _, p := range params {
				p.Grad = nil
			}
			if err := tensor.GradCheck(f, params, tensor.GradCheckOptions{MaxPerInput: 4, Eps: 1e-3, ATol: 1e-2, RTol: 5e-2}); err != nil {
				t.Fatal(fmt.Errorf("%w (params in order: first %s)", err, names[params[0]]))
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	if got := Names(); !slices.Equal(got, []string{"member", "seam", "teran", "tern", "vsepp"}) {
		t.Fatalf("Names() = %v", got)
	}
	for _, name := range Names() {
		m := tinyModel(t, named(name))
		if m.Name() != name {
			t.Errorf("New built %q for %q", m.Name(), name)
		}
	}
	cfg := tinyConfig(func(c *Config) { c.Model.Name = "clip" })
	_, err := New(cfg, testTokenizer(t, cfg), 1)
	if err == nil || !strings.Contains(err.Error(), "member, seam, teran, tern, vsepp") {
		t.Fatalf("unknown model: error %v, want one listing member, seam, teran, tern, vsepp", err)
	}
}

func TestScorings(t *testing.T) {
	for _, s := range []string{"global", "MrSw", "mrsw", "MWSR", "Symm", "MrAvgw"} {
		if _, err := ParseScoring(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	_, err := ParseScoring("bogus")
	if err == nil || !strings.Contains(err.Error(), "global, order, MrSw, MwSr, Symm, MrAvgw") {
		t.Fatalf("bogus scoring: error %v, want the valid names", err)
	}
	if m := tinyModel(t, func(c *Config) { c.Pooling = Symm }); m.Scoring() != Symm {
		t.Errorf("TERAN scores with %v, configured Symm", m.Scoring())
	}
	if m := tinyModel(t, func(c *Config) { c.Model.Name = "tern" }); m.Scoring() != Global {
		t.Errorf("TERN scores with %v, want global", m.Scoring())
	}
	if m := tinyModel(t, tinySEAM("seam-e")); m.Scoring() != Order {
		t.Errorf("SEAM scores with %v, configured order", m.Scoring())
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"model:\n  name: bert\n", "model.name: \"bert\" is not one of member, seam, teran, tern"},
		{"model:\n  name: seam\n  similarity: order\ntext-model:\n  name: seam-x\nimage-model:\n  name: global\n", "text-model.name: \"seam-x\" is not one of seam-e, seam-c, seam-g"},
		{"model:\n  name: seam\n  similarity: MrSw\ntext-model:\n  name: seam-e\nimage-model:\n  name: global\n", "model.similarity: \"MrSw\" is not one of order, global"},
		{"model:\n  name: seam\n  similarity: order\ntext-model:\n  name: seam-e\n", "image-model.name: \"bottomup\" is not one of global"},
		{"model:\n  name: seam\n  similarity: order\ntext-model:\n  name: seam-c\n  filters: 0\nimage-model:\n  name: global\n", "text-model.filters: 0 is out of range [1, "},
		{"model:\n  similarity: order\n", "only seam chooses its similarity"},
		{"pooling: MaxMax\n", "unknown scoring \"MaxMax\""},
		{"pooling: global\n", "not an alignment pooling"},
		{"model:\n  embed-size: 30\n  heads: 4\n", "does not divide"},
		{"text-model:\n  name: elmo\n", "bert, gru, lstm, transformer"},
		{"model:\n  nme: teran\n", "nme"}, // unknown key, with its line
	}
	for _, c := range cases {
		_, err := ParseConfig([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one mentioning %q", c.yaml, err, c.want)
		}
	}
}

// TestSaveLoad saves every model and reloads it, from the file and from
// its run directory: same name, config, weights and embeddings.
func TestSaveLoad(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	imgs := newTinyImages(rng)
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			m := tinyModel(t, named(name))
			if mem, ok := m.(Memorizer); ok { // the banks travel with the checkpoint
				if err := mem.BuildMemory(context.Background(), imgs, tinyCaptions, []int{0, 1, 2}); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			path := filepath.Join(dir, BestCheckpoint)
			if err := Save(path, m, nil, map[string]string{"note": "kept"}); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{path, dir} {
				m2, f, err := Load(p)
				if err != nil {
					t.Fatal(err)
				}
				if f.Metadata()["note"] != "kept" {
					t.Errorf("metadata lost")
				}
				f.Close()
				if m2.Name() != name || m2.Config().Marshal() != m.Config().Marshal() {
					t.Fatalf("reloaded %s with config\n%s\nwant %s with\n%s", m2.Name(), m2.Config().Marshal(), name, m.Config().Marshal())
				}
				checkSameEmbeddings(t, m, m2, imgs)
			}
		})
	}
}

func checkSameEmbeddings(t *testing.T, a, b Model, imgs ImageSource) {
	t.Helper()
	ctx := context.Background()
	ea, err := EncodeImages(ctx, a, imgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := EncodeImages(ctx, b, imgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	ta, _ := EncodeTexts(ctx, a, tinyCaptions, nil)
	tb, _ := EncodeTexts(ctx, b, tinyCaptions, nil)
	if !slices.Equal(ea.Vecs, eb.Vecs) || !slices.Equal(ea.Global, eb.Global) || !slices.Equal(ta.Vecs, tb.Vecs) || !slices.Equal(ta.Global, tb.Global) {
		t.Fatal("the reloaded model encodes differently")
	}
}

// TestLoadVersion1 reads a checkpoint in the first format, whose metadata
// held the whole training config (pooling under training, caption length
// under dataset) and TERN w. Align's loss weights among the tensors.
func TestLoadVersion1(t *testing.T) {
	m := tinyModel(t, func(c *Config) { c.Model.Name = "tern" })
	cfg := m.Config()
	v1 := fmt.Sprintf("dataset:\n  name: synth\n  max-caption-tokens: 12\ntext-model:\n%simage-model:\n%smodel:\n%straining:\n  lr: 0.001\n  loss-type: matching+alignment\n  alignment-mode: MwSr\n",
		indent(cfg.TextModel), indent(cfg.ImageModel), indent(cfg.Model))
	var entries []checkpoint.Entry
	for _, p := range m.Params() {
		entries = append(entries, checkpoint.Entry{Name: p.Name, Shape: p.T.Shape, Data: p.T.Data})
	}
	entries = append(entries, checkpoint.Entry{Name: "loss.log_vars", Shape: []int{2}, Data: []float32{0.1, 0.2}})
	path := filepath.Join(t.TempDir(), "v1.safetensors")
	md := map[string]string{"format": "xmr-model/1", "config": v1, "tokenizer": "wordpiece", "vocab": strings.Join(m.Tokenizer().Vocab().Tokens(), "\n")}
	if err := checkpoint.Save(path, entries, md); err != nil {
		t.Fatal(err)
	}
	m2, f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if m2.Name() != "tern" || m2.Config().Pooling != MwSr || m2.Config().MaxCaptionTokens != 12 {
		t.Fatalf("v1 checkpoint read as %s, pooling %v, max tokens %d", m2.Name(), m2.Config().Pooling, m2.Config().MaxCaptionTokens)
	}
	checkSameEmbeddings(t, m, m2, newTinyImages(rand.New(rand.NewPCG(3, 3))))
}

func indent(v any) string {
	y, err := yaml.Marshal(v)
	if err != nil {
		panic(err)
	}
	b := string(y)
	var out strings.Builder
	for _, l := range strings.Split(strings.TrimRight(b, "\n"), "\n") {
		out.WriteString("  " + l + "\n")
	}
	return out.String()
}

func TestResolveCheckpoint(t *testing.T) {
	dir := t.TempDir()
	if _, err := ResolveCheckpoint(dir); err == nil || !strings.Contains(err.Error(), "without checkpoints") {
		t.Errorf("empty directory: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "last.safetensors"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ResolveCheckpoint(dir); err == nil || !strings.Contains(err.Error(), "last.safetensors") {
		t.Errorf("directory without best-rsum: %v, want the list of what it has", err)
	}
	if p, err := ResolveCheckpoint("x.safetensors"); err != nil || p != "x.safetensors" {
		t.Errorf("file path: %q, %v", p, err)
	}
}

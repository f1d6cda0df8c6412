package model

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/xmr-project/xmr/tensor"
	"github.com/xmr-project/xmr/text"
)

// tinyModel builds a model with a small random BERT (or another text
// encoder) over a toy vocabulary.
func tinyModel(t *testing.T, edit func(*Config)) *Model {
	t.Helper()
	cfg := Default()
	cfg.ImageModel = ImageModelConfig{Name: "bottomup", FeatDim: 6, TransformerLayers: 1, Heads: 2, FF: 8, Hidden: 8, PosEncoding: "concat-and-process"}
	cfg.TextModel = TextModelConfig{Name: "bert", WordDim: 8, ExtractionHiddenLayer: 1, FineTune: true, Heads: 2, FF: 8, MaxPositions: 16,
		EmbedDim: 8, Hidden: 4, Bidirectional: true, Layers: 1}
	cfg.Model = ModelConfig{Name: "teran", EmbedSize: 8, Layers: 1, Heads: 2, FF: 8}
	cfg.Training.Margin = 0.2
	if edit != nil {
		edit(&cfg)
	}
	m, err := NewWithTokenizer(cfg, testTokenizer(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// testTokenizer is a toy vocabulary of the kind cfg's text model needs.
func testTokenizer(t *testing.T, cfg Config) Tokenizer {
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

func tinyBatch(rng *rand.Rand, m *Model) (Images, Texts) {
	feat := tensor.RandN(rng, 3, 4, 6)
	boxes := tensor.New(3, 4, 5)
	for i := range boxes.Data {
		boxes.Data[i] = rng.Float32()
	}
	valid := tensor.FromData([]float32{1, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 1}, 3, 4)
	tx, _ := m.TextsOf([]string{"a red circle", "blue square left of a red circle", "a square"})
	return Images{Feat: feat, Boxes: boxes, Valid: valid}, tx
}

// TestModelGradients checks the whole model's gradient (every parameter
// group, through both pipelines, the alignment pooling and the loss)
// against finite differences.
func TestModelGradients(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Config)
	}{
		{"teran-mrsw-bert", nil},
		{"teran-symm-shared", func(c *Config) { c.Training.AlignmentMode = "Symm"; c.Model.SharedTransformer = true }},
		{"tern", func(c *Config) { c.Model.Name = "tern"; c.Training.LossType = "matching" }},
		{"tern-align", func(c *Config) { c.Model.Name = "tern"; c.Training.LossType = "matching+alignment" }},
		{"teran-gru", func(c *Config) { c.TextModel.Name = "gru" }},
		{"teran-lstm", func(c *Config) { c.TextModel.Name = "lstm" }},
		{"teran-transformer", func(c *Config) { c.TextModel.Name = "transformer" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := tinyModel(t, func(cfg *Config) {
				cfg.ImageModel.Dropout, cfg.TextModel.Dropout, cfg.Model.Dropout = 0, 0, 0
				cfg.Training.MaxViolation = false // smooth enough for finite differences
				if c.edit != nil {
					c.edit(cfg)
				}
			})
			rng := rand.New(rand.NewPCG(1, 1))
			im, tx := tinyBatch(rng, m)
			var params []*tensor.Tensor
			names := map[*tensor.Tensor]string{}
			for _, p := range m.Params() {
				params = append(params, p.T)
				names[p.T] = p.Name
			}
			f := func(tp *tensor.Tape) *tensor.Tensor {
				return m.Loss(tp, m.EncodeImages(tp, im), m.EncodeTexts(tp, tx), 0)
			}
			// Every parameter must receive a gradient.
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
			err := tensor.GradCheck(f, params, tensor.GradCheckOptions{MaxPerInput: 4, Eps: 1e-3, ATol: 1e-2, RTol: 5e-2})
			if err != nil {
				// Name the parameter.
				t.Fatal(fmt.Errorf("%w (params in order: first %s)", err, names[params[0]]))
			}
		})
	}
}

package model

import (
	"strings"
	"testing"
)

// TestNumParams compares the formula with the parameters each model
// really has, over the encoders and options that change the count.
func TestNumParams(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Config)
	}{
		{"teran-bert", nil},
		{"tern-bert", func(c *Config) { c.Model.Name = "tern" }},
		{"shared-final", func(c *Config) { c.Model.SharedTransformer = true; c.Model.Layers = 2 }},
		{"no-pos-encoding", func(c *Config) { c.ImageModel.PosEncoding = "none"; c.ImageModel.TransformerLayers = 0 }},
		{"bert-3-layers", func(c *Config) { c.TextModel.ExtractionHiddenLayer = 3 }},
		{"bigru-2-layers", func(c *Config) { c.TextModel.Name = "gru"; c.TextModel.Layers = 2 }},
		{"gru", func(c *Config) { c.TextModel.Name = "gru"; c.TextModel.Bidirectional = false }},
		{"bilstm", func(c *Config) { c.TextModel.Name = "lstm" }},
		{"lstm-3-layers", func(c *Config) {
			c.TextModel.Name = "lstm"
			c.TextModel.Layers = 3
			c.TextModel.Bidirectional = false
		}},
		{"transformer-text", func(c *Config) { c.TextModel.Name = "transformer"; c.TextModel.Layers = 2 }},
		{"seam-e", tinySEAM("seam-e")},
		{"seam-c", tinySEAM("seam-c")},
		{"seam-g", tinySEAM("seam-g")},
		{"vsepp", tinyVSEPP},
		{"member-transformer", tinyMEMBER("late")},
		{"member-bert", func(c *Config) { tinyMEMBER("early")(c); c.TextModel = tinyConfig(nil).TextModel; c.Model.Layers = 2 }},
		{"member-bigru", func(c *Config) {
			tinyMEMBER("late")(c)
			c.TextModel = TextConfig{Name: "gru", EmbedDim: 5, Hidden: 4, Bidirectional: true, Layers: 1}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := tinyModel(t, c.edit)
			have := 0
			for _, p := range m.Params() {
				have += p.T.Numel()
			}
			if got := m.Config().NumParams(); got != float64(have) {
				t.Fatalf("NumParams() = %.0f, the model has %d", got, have)
			}
		})
	}
	if n := Default().NumParams(); n < 1e8 || n > 3e8 {
		t.Errorf("TERAN at paper size: %.3g parameters, want 1e8 to 3e8", n)
	}
	huge := Default()
	huge.Model.EmbedSize = 2_000_000_000
	if n := huge.NumParams(); !(n > 1e18) {
		t.Errorf("embed-size 2e9: %g parameters", n)
	}
}

// TestValidate lists nonsense a careless user writes: each is refused,
// naming the key and the valid values or range.
func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"ok", nil, ""},
		{"text name", func(c *Config) { c.TextModel.Name = "gpt" }, `text-model.name: "gpt" is not one of bert, gru, lstm, transformer`},
		{"image name", func(c *Config) { c.ImageModel.Name = "resnet" }, `image-model.name: "resnet" is not one of bottomup`},
		{"pos encoding", func(c *Config) { c.ImageModel.PosEncoding = "sine" }, `image-model.pos-encoding: "sine" is not one of concat-and-process, none`},
		{"model name", func(c *Config) { c.Model.Name = "vse" }, `model.name: "vse" is not one of`},
		{"dropout 1.5", func(c *Config) { c.Model.Dropout = 1.5 }, "model.dropout: 1.5 is not a probability in [0, 1)"},
		{"negative dropout", func(c *Config) { c.TextModel.Dropout = -0.1 }, "text-model.dropout: -0.1 is not a probability"},
		{"image dropout", func(c *Config) { c.ImageModel.Dropout = 1 }, "image-model.dropout: 1 is not a probability"},
		{"transformer-layers -1", func(c *Config) { c.ImageModel.TransformerLayers = -1 }, "image-model.transformer-layers: -1 is out of range [0, 256]"},
		{"layers 100000", func(c *Config) { c.Model.Layers = 100000 }, "model.layers: 100000 is out of range [0, 256]"},
		{"embed-size 2e9", func(c *Config) { c.Model.EmbedSize = 2_000_000_000 }, "model.embed-size: 2000000000 is out of range [1, 65536]"},
		{"heads 0", func(c *Config) { c.Model.Heads = 0 }, "model.heads: 0 is out of range [1, 1024]"},
		{"heads divide", func(c *Config) { c.Model.EmbedSize = 30; c.Model.Heads = 4 }, "model.heads: 4 does not divide embed-size 30"},
		{"image ff", func(c *Config) { c.ImageModel.FF = 0 }, "image-model.ff: 0 is out of range"},
		{"bert layers", func(c *Config) { c.TextModel.ExtractionHiddenLayer = 0 }, "text-model.extraction-hidden-layer: 0 is out of range [1, 256]"},
		{"bert heads", func(c *Config) { c.TextModel.Heads = 5 }, "text-model.heads: 5 does not divide word-dim 8"},
		{"max tokens 0 with bert", func(c *Config) { c.MaxCaptionTokens = 0 }, "max-caption-tokens: 0 (no limit) lets captions run past BERT's 16 positions"},
		{"max tokens past positions", func(c *Config) { c.MaxCaptionTokens = 17 }, "max-caption-tokens: 17: BERT has 16 positions"},
		{"max tokens 1", func(c *Config) { c.MaxCaptionTokens = 1 }, "max-caption-tokens: must be 0 (no limit) or in [2,"},
		{"gru hidden", func(c *Config) { c.TextModel.Name = "gru"; c.TextModel.Hidden = 0 }, "text-model.hidden: 0 is out of range"},
		{"gru layers", func(c *Config) { c.TextModel.Name = "gru"; c.TextModel.Layers = -2 }, "text-model.layers: -2 is out of range"},
		{"transformer heads", func(c *Config) { c.TextModel.Name = "transformer"; c.TextModel.Heads = 3 }, "text-model.heads: 3 does not divide embed-dim 8"},
		{"pretrain with gru", func(c *Config) { c.TextModel.Name = "gru"; c.TextModel.Pretrain = "bert-base" }, "text-model.pretrain: a pretrained BERT directory goes with name bert"},
		{"vocab size", func(c *Config) { c.TextModel.VocabSize = -1 }, "text-model.vocab-size: -1 is out of range"},
		{"pooling", func(c *Config) { c.Pooling = Global }, `pooling: "global" is not an alignment pooling`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := tinyConfig(c.edit).Validate()
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

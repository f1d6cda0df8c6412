package model

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/text"
	"github.com/xmr-project/xmr/torchfile"
	"github.com/xmr-project/xmr/torchfile/torchfiletest"
)

// officialCheckpoint writes m's weights as the official code saves them:
// a dict with the state dict under "model" (official names: the final
// layers' numbers swapped when not shared, plus the tensors the official
// modules have and xmr's do not) and the YAML config under "config".
// edit may change the state dict before it is written.
func officialCheckpoint(t *testing.T, m Model, edit func(sd *torchfiletest.Dict)) string {
	t.Helper()
	cfg := m.Config()
	sd := &torchfiletest.Dict{Ordered: true}
	for _, p := range m.Params() {
		if p.Name == "img_txt_enc.img_enc.cls" {
			continue // the official TERN has no such parameter
		}
		sd.Add(officialSource(p.Name, cfg.Model.SharedTransformer)[0], &torchfiletest.Tensor{Shape: p.T.Shape, Data: p.T.Data})
	}
	h, e, w := cfg.ImageModel.Hidden, cfg.Model.EmbedSize, cfg.TextModel.WordDim
	tr, ok := m.(*TERAN)
	if tern, isTERN := m.(*TERN); isTERN {
		tr, ok = tern.TERAN, true
	}
	if !ok {
		t.Fatalf("a %s is not TERAN or TERN", m.Name())
	}
	bert := tr.Text.(bertText)
	sd.Add("img_txt_enc.img_enc.fc.weight", &torchfiletest.Tensor{Shape: []int{e, h}, Data: make([]float32, e*h)})
	sd.Add("img_txt_enc.txt_enc.map.bias", &torchfiletest.Tensor{Shape: []int{e}, Data: make([]float32, e)})
	sd.Add("img_txt_enc.txt_enc.bert_model.pooler.dense.weight", &torchfiletest.Tensor{Shape: []int{w, w}, Data: make([]float32, w*w)})
	sd.Add("img_txt_enc.txt_enc.word_embeddings.weight", &torchfiletest.Tensor{Shape: bert.WordEmb.W.Shape, Data: bert.WordEmb.W.Data})
	if edit != nil {
		edit(sd)
	}
	config := map[string]any{
		"text-model":  map[string]any{"name": "bert", "layers": 0, "extraction-hidden-layer": cfg.TextModel.ExtractionHiddenLayer, "fine-tune": true, "dropout": 0.1},
		"image-model": map[string]any{"name": "bottomup", "pos-encoding": "concat-and-process", "feat-dim": cfg.ImageModel.FeatDim, "dropout": 0.1},
		"model": map[string]any{"name": m.Name(), "embed-size": e, "shared-transformer": cfg.Model.SharedTransformer,
			"text-aggregation": "first", "image-aggregation": "first", "dropout": 0.1},
		"training": map[string]any{"alignment-mode": "MwSr", "measure": "dot"},
	}
	root := map[string]any{"epoch": 3, "model": sd, "config": config, "Eiters": 1500,
		"opt": &torchfiletest.Dict{Namespace: true, Keys: []string{"config"}, Values: []any{"configs/x.yaml"}}}
	path := filepath.Join(t.TempDir(), "model_best_rsum.pth.tar")
	if err := torchfiletest.Write(path, root); err != nil {
		t.Fatal(err)
	}
	return path
}

func officialModel(t *testing.T, name string, shared bool) Model {
	return tinyModel(t, func(c *Config) {
		c.Model.Name = name
		c.Model.SharedTransformer = shared
		c.ImageModel.Heads, c.Model.Heads = officialHeads, officialHeads
		c.ImageModel.FeatDim = c.ImageModel.Hidden // the official visual encoder keeps the feature width
	})
}

func importFile(t *testing.T, path string, vocab *text.Vocab) (Model, *ImportReport, error) {
	t.Helper()
	f, err := torchfile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return ImportOfficial(f, OfficialOptions{Vocab: vocab, BERT: &BERTConfig{HiddenSize: 8, NumAttentionHeads: 2, LayerNormEps: 1e-12}})
}

func TestImportOfficial(t *testing.T) {
	for _, c := range []struct {
		name   string
		shared bool
	}{{"teran", false}, {"teran", true}, {"tern", true}, {"tern", false}} {
		t.Run(c.name+map[bool]string{true: "-shared", false: "-separate"}[c.shared], func(t *testing.T) {
			src := officialModel(t, c.name, c.shared)
			path := officialCheckpoint(t, src, nil)
			m, rep, err := importFile(t, path, src.Tokenizer().Vocab())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]float32{}
			for _, p := range m.Params() {
				got[p.Name] = p.T.Data
			}
			for _, p := range src.Params() {
				if p.Name == "img_txt_enc.img_enc.cls" {
					continue
				}
				if !slices.Equal(got[p.Name], p.T.Data) {
					t.Errorf("%s differs from the source", p.Name)
				}
			}
			cfg := m.Config()
			if cfg.Pooling != MwSr || cfg.Model.SharedTransformer != c.shared || cfg.ImageModel.Heads != 4 || cfg.TextModel.Heads != 2 {
				t.Errorf("config: pooling %s, shared %v, heads %d/%d", cfg.Pooling, cfg.Model.SharedTransformer, cfg.ImageModel.Heads, cfg.TextModel.Heads)
			}
			if len(rep.Ignored) != 4 {
				t.Errorf("ignored %v, want the 4 unused official tensors", rep.Ignored)
			}
			if tern, ok := m.(*TERN); ok {
				want := make([]float32, len(tern.ImgCLS.Data))
				zeroRegion(tern.PosMap1, tern.PosMap2, want)
				if !slices.Equal(tern.ImgCLS.Data, want) || cfg.ImageModel.Slot0 != "" {
					t.Errorf("I-CLS %v, want the box MLP of a zero region %v", tern.ImgCLS.Data, want)
				}
			} else if cfg.ImageModel.Slot0 != "zero-region" {
				t.Errorf("TERAN slot0 %q, want zero-region", cfg.ImageModel.Slot0)
			}
			// The imported model saves and loads as any xmr checkpoint.
			out := filepath.Join(t.TempDir(), "imported.safetensors")
			if err := Save(out, m, nil, nil); err != nil {
				t.Fatal(err)
			}
			m2, f, err := Load(out)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			if Fingerprint(m2) != Fingerprint(m) {
				t.Error("the saved import reloads as another model")
			}
		})
	}
}

func TestImportOfficialErrors(t *testing.T) {
	src := officialModel(t, "teran", false)
	vocab := src.Tokenizer().Vocab()
	drop := func(names ...string) func(*torchfiletest.Dict) {
		return func(sd *torchfiletest.Dict) {
			for i := len(sd.Keys) - 1; i >= 0; i-- {
				if slices.Contains(names, sd.Keys[i]) {
					sd.Keys = slices.Delete(sd.Keys, i, i+1)
					sd.Values = slices.Delete(sd.Values, i, i+1)
				}
			}
		}
	}
	cases := []struct {
		name  string
		edit  func(*torchfiletest.Dict)
		vocab *text.Vocab
		want  []string
	}{
		{"missing and unknown listed together", func(sd *torchfiletest.Dict) {
			drop("img_txt_enc.cap_proj.bias", "img_txt_enc.transformer_encoder_2.layers.0.norm1.weight")(sd)
			sd.Add("img_txt_enc.txt_enc.transformer_encoder.layers.0.linear1.weight", &torchfiletest.Tensor{Shape: []int{1}, Data: []float32{0}})
			sd.Add("img_txt_enc.image_aggregation.gate_fn.0.bias", &torchfiletest.Tensor{Shape: []int{1}, Data: []float32{0}})
			sd.Add("something.else", &torchfiletest.Tensor{Shape: []int{1}, Data: []float32{0}})
		}, nil, []string{
			`2 tensors missing from the file: "img_txt_enc.cap_proj.bias", "img_txt_enc.transformer_encoder_2.layers.0.norm1.weight"`,
			`2 tensors that xmr's teran has no place for: "img_txt_enc.txt_enc.transformer_encoder.layers.0.linear1.weight", "something.else"`}},
		{"wrong shape", func(sd *torchfiletest.Dict) {
			i := slices.Index(sd.Keys, "img_txt_enc.img_proj.bias")
			sd.Values[i] = &torchfiletest.Tensor{Shape: []int{2, 4}, Data: make([]float32, 8)}
		}, nil, []string{`tensor "img_txt_enc.img_proj.bias": shape [2 4] in the file, the model expects [8]`}},
		{"non-finite weight", func(sd *torchfiletest.Dict) {
			i := slices.Index(sd.Keys, "img_txt_enc.img_proj.bias")
			v := slices.Clone(sd.Values[i].(*torchfiletest.Tensor).Data)
			v[3] = float32(math.Inf(1))
			sd.Values[i] = &torchfiletest.Tensor{Shape: []int{8}, Data: v}
		}, nil, []string{`element 3 is +Inf`}},
		{"alias differs", func(sd *torchfiletest.Dict) {
			i := slices.Index(sd.Keys, "img_txt_enc.txt_enc.word_embeddings.weight")
			tt := sd.Values[i].(*torchfiletest.Tensor)
			v := slices.Clone(tt.Data)
			v[0]++
			sd.Values[i] = &torchfiletest.Tensor{Shape: tt.Shape, Data: v}
		}, nil, []string{`"img_txt_enc.txt_enc.word_embeddings.weight" differs from "img_txt_enc.txt_enc.bert_model.embeddings.word_embeddings.weight"`}},
		{"sizes the data does not back", func(sd *torchfiletest.Dict) {
			// A zero-stride view claims a 200-wide box MLP over one value.
			i := slices.Index(sd.Keys, "img_txt_enc.img_enc.pos_encoding_image.map.0.weight")
			sd.Values[i] = &torchfiletest.Tensor{Shape: []int{200, 13}, Stride: []int{0, 0}, Data: []float32{1}}
		}, nil, []string{"the shapes describe a model of", "parameters, the file holds"}},
		{"wrong vocabulary", nil, text.NewVocab([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]"}),
			[]string{"vocabulary: 4 tokens, the checkpoint's word embeddings have 11 rows"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := vocab
			if c.vocab != nil {
				v = c.vocab
			}
			_, _, err := importFile(t, officialCheckpoint(t, src, c.edit), v)
			if err == nil {
				t.Fatal("imported")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not say %q", err, w)
				}
			}
		})
	}
}

package model

import (
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/torchfile/torchfiletest"
)

// writeHFBERT writes a tiny BERT in the HuggingFace layout (config.json,
// vocab.txt, model.safetensors with "bert."-prefixed names and a pooler),
// as BertModel.save_pretrained would, and returns the weights it wrote.
func writeHFBERT(t *testing.T, dir string, corrupt string) map[string][]float32 {
	t.Helper()
	cfg := `{"vocab_size": 12, "hidden_size": 8, "num_hidden_layers": 3, "num_attention_heads": 2,
	"intermediate_size": 16, "max_position_embeddings": 20, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu"}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	vocab := "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nred\nblue\ncircle\nsquare\nleft\nof\n"
	if err := os.WriteFile(filepath.Join(dir, "vocab.txt"), []byte(vocab), 0o644); err != nil {
		t.Fatal(err)
	}
	rc, _ := ReadBERTConfig(dir)
	ref := NewBERT(rand.New(rand.NewPCG(7, 7)), rc, 3, 0)
	written := map[string][]float32{}
	var entries []checkpoint.Entry
	for _, p := range ref.Params() {
		shape := p.T.Shape
		if p.Name == corrupt {
			shape = []int{shape[len(shape)-1], prod(shape[:len(shape)-1])}
		}
		entries = append(entries, checkpoint.Entry{Name: "bert." + p.Name, Shape: shape, Data: p.T.Data})
		written[p.Name] = p.T.Data
	}
	entries = append(entries, checkpoint.Entry{Name: "bert.pooler.dense.weight", Shape: []int{8, 8}, Data: make([]float32, 64)})
	if err := checkpoint.Save(filepath.Join(dir, "model.safetensors"), entries, nil); err != nil {
		t.Fatal(err)
	}
	return written
}

func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

func TestLoadPretrainedBERT(t *testing.T) {
	dir := t.TempDir()
	want := writeHFBERT(t, dir, "")
	cfg := Default()
	cfg.ImageModel = ImageConfig{Name: "bottomup", FeatDim: 6, TransformerLayers: 1, Heads: 2, FF: 8, Hidden: 8, PosEncoding: "concat-and-process"}
	cfg.Model = JointConfig{Name: "teran", EmbedSize: 8, Layers: 1, Heads: 2, FF: 8}
	cfg.TextModel.Pretrain = dir
	cfg.TextModel.ExtractionHiddenLayer = 2 // keep the first 2 of 3 layers, as TERAN keeps 6 of 12
	cfg.MaxCaptionTokens = 20               // the test BERT's positions
	tok, err := BuildTokenizer(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tok.Vocab().Tokens()[5:7], " "); got != "a red" {
		t.Fatalf("tokenizer vocabulary starts %q, want the directory's vocab.txt", got)
	}
	m, err := New(cfg, tok, 1)
	if err != nil {
		t.Fatal(err)
	}
	bert := m.(*TERAN).Text.(bertText).BERT
	if len(bert.Layers) != 2 {
		t.Fatalf("kept %d BERT layers, want 2", len(bert.Layers))
	}
	for _, p := range bert.Params() {
		w := want[p.Name]
		for i := range w {
			if p.T.Data[i] != w[i] {
				t.Fatalf("%s[%d] = %v, file has %v", p.Name, i, p.T.Data[i], w[i])
			}
		}
	}
	// The model's text pipeline runs on the loaded weights.
	tx := TextBatch(m, []string{"a red circle left of a blue square"})
	if e := m.EncodeTexts(nil, tx); e.Vecs.HasNaN() {
		t.Fatal("NaN in text vectors")
	}
	// A checkpoint of the fine-tuned model reloads without the BERT directory.
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := Save(path, m, nil, nil); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(dir)
	m2, f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got, want := m2.(*TERAN).Text.(bertText).BERT.Layers[1].Out.W.Data[3], bert.Layers[1].Out.W.Data[3]; got != want {
		t.Fatalf("reloaded weight %v, want %v", got, want)
	}
}

func TestLoadPretrainedBERTNamesWrongShape(t *testing.T) {
	dir := t.TempDir()
	writeHFBERT(t, dir, "encoder.layer.1.intermediate.dense.weight")
	_, err := LoadBERT(dir, 2, 0)
	if err == nil {
		t.Fatal("a wrong shape loaded without error")
	}
	for _, want := range []string{"encoder.layer.1.intermediate.dense.weight", "[16 8]", "[8 16]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestLoadBERTPytorchModelBin(t *testing.T) {
	dir := t.TempDir()
	want := writeHFBERT(t, dir, "")
	// The same weights as a pytorch_model.bin (old names: LayerNorm
	// gamma/beta) and no model.safetensors.
	sd := &torchfiletest.Dict{Ordered: true}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		w := want[name]
		f, err := checkpoint.Open(filepath.Join(dir, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		_, shape, err := f.Tensor("bert." + name)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		name = strings.Replace(strings.Replace(name, "LayerNorm.weight", "LayerNorm.gamma", 1), "LayerNorm.bias", "LayerNorm.beta", 1)
		sd.Add("bert."+name, &torchfiletest.Tensor{Shape: shape, Data: w})
	}
	sd.Add("cls.predictions.bias", &torchfiletest.Tensor{Shape: []int{12}, Data: make([]float32, 12)})
	if err := os.Remove(filepath.Join(dir, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	if err := torchfiletest.Write(filepath.Join(dir, "pytorch_model.bin"), sd); err != nil {
		t.Fatal(err)
	}
	b, err := LoadBERT(dir, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range b.Params() {
		if !slices.Equal(p.T.Data, want[p.Name]) {
			t.Errorf("%s differs from the file", p.Name)
		}
	}
	// A directory with neither file says so.
	os.Remove(filepath.Join(dir, "pytorch_model.bin"))
	if _, err := LoadBERT(dir, 2, 0); err == nil || !strings.Contains(err.Error(), "neither model.safetensors nor pytorch_model.bin") {
		t.Errorf("error %v", err)
	}
}

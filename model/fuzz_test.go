package model

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/xmr-project/xmr/checkpoint"
)

// FuzzLoadBERT feeds arbitrary config.json and model.safetensors pairs to
// LoadBERT: each must load a BERT of finite weights or fail cleanly, and a
// config asking for sizes the weights file does not hold must not allocate
// them. The seed BERT is tiny (width 2, one layer): the fuzzer slows to a
// crawl on inputs of kilobytes.
func FuzzLoadBERT(f *testing.F) {
	cfg := []byte(`{"vocab_size": 4, "hidden_size": 2, "num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 2, "max_position_embeddings": 4, "type_vocab_size": 1}`)
	rc, err := ParseBERTConfig(cfg, "seed")
	if err != nil {
		f.Fatal(err)
	}
	ref := NewBERT(rand.New(rand.NewPCG(1, 1)), rc, 1, 0)
	var entries []checkpoint.Entry
	for _, p := range ref.Params() {
		entries = append(entries, checkpoint.Entry{Name: "bert." + p.Name, Shape: p.T.Shape, Data: p.T.Data})
	}
	var buf bytes.Buffer
	if err := checkpoint.Write(&buf, entries, nil); err != nil {
		f.Fatal(err)
	}
	f.Add(cfg, buf.Bytes())
	f.Add([]byte(`{"vocab_size": 30522, "hidden_size": 65536, "num_hidden_layers": 256, "num_attention_heads": 1, "intermediate_size": 65536, "max_position_embeddings": 4194304}`), buf.Bytes())
	f.Add([]byte(`{"hidden_act": "relu"}`), []byte{})
	// LoadBERT is ReadBERTConfig, checkpoint.Open and loadBERT; the files
	// stay in memory, as writing them on every input costs more than the
	// parsing.
	f.Fuzz(func(t *testing.T, cfg, weights []byte) {
		c, err := ParseBERTConfig(cfg, "config.json")
		if err != nil {
			return
		}
		wf, err := checkpoint.OpenBytes("model.safetensors", weights)
		if err != nil {
			return
		}
		b, err := loadBERT(c, wf, c.NumHiddenLayers, 0)
		if err != nil {
			return
		}
		for _, p := range b.Params() {
			for _, v := range p.T.Data {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("%s holds %v", p.Name, v)
				}
			}
		}
	})
}

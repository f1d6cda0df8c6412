package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/internal/infile"
	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/tensor"
	"github.com/xmr-project/xmr/torchfile"
)

// BERTConfig holds the sizes of a BERT encoder, as in a HuggingFace
// config.json.
type BERTConfig struct {
	VocabSize             int     `json:"vocab_size"`
	HiddenSize            int     `json:"hidden_size"`
	NumHiddenLayers       int     `json:"num_hidden_layers"`
	NumAttentionHeads     int     `json:"num_attention_heads"`
	IntermediateSize      int     `json:"intermediate_size"`
	MaxPositionEmbeddings int     `json:"max_position_embeddings"`
	TypeVocabSize         int     `json:"type_vocab_size"`
	LayerNormEps          float64 `json:"layer_norm_eps"`
	HiddenAct             string  `json:"hidden_act"`
	HiddenDropoutProb     float64 `json:"hidden_dropout_prob"`
}

// ReadBERTConfig reads dir/config.json (see ParseBERTConfig).
func ReadBERTConfig(dir string) (BERTConfig, error) {
	path := filepath.Join(dir, "config.json")
	b, err := infile.ReadFile(path)
	if err != nil {
		return BERTConfig{}, fmt.Errorf("read BERT config: %w", err)
	}
	return ParseBERTConfig(b, path)
}

// ParseBERTConfig parses a HuggingFace config.json (name names it in
// errors) and checks its sizes: positive, within model's limits (MaxWidth,
// MaxLayers, MaxHeads, MaxVocab), heads dividing the width, a known
// activation.
func ParseBERTConfig(b []byte, name string) (BERTConfig, error) {
	var c BERTConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return BERTConfig{}, fmt.Errorf("parse %s: %w", name, err)
	}
	if c.HiddenSize <= 0 || c.NumAttentionHeads <= 0 || c.HiddenSize%c.NumAttentionHeads != 0 || c.VocabSize <= 0 || c.IntermediateSize <= 0 || c.MaxPositionEmbeddings <= 0 {
		return BERTConfig{}, fmt.Errorf("%s: hidden_size %d, num_attention_heads %d, vocab_size %d, intermediate_size %d, max_position_embeddings %d: all must be positive and heads must divide hidden_size",
			name, c.HiddenSize, c.NumAttentionHeads, c.VocabSize, c.IntermediateSize, c.MaxPositionEmbeddings)
	}
	if c.HiddenSize > MaxWidth || c.IntermediateSize > MaxWidth || c.NumAttentionHeads > MaxHeads || c.NumHiddenLayers < 0 || c.NumHiddenLayers > MaxLayers ||
		c.VocabSize > MaxVocab || c.MaxPositionEmbeddings > MaxVocab || c.TypeVocabSize < 0 || c.TypeVocabSize > MaxVocab {
		return BERTConfig{}, fmt.Errorf("%s: hidden_size %d, intermediate_size %d, num_attention_heads %d, num_hidden_layers %d, vocab_size %d, max_position_embeddings %d, type_vocab_size %d: beyond the limits (widths %d, heads %d, layers %d, tables %d)",
			name, c.HiddenSize, c.IntermediateSize, c.NumAttentionHeads, c.NumHiddenLayers, c.VocabSize, c.MaxPositionEmbeddings, c.TypeVocabSize, MaxWidth, MaxHeads, MaxLayers, MaxVocab)
	}
	if c.TypeVocabSize == 0 {
		c.TypeVocabSize = 2
	}
	if c.LayerNormEps == 0 {
		c.LayerNormEps = 1e-12
	}
	if math.IsNaN(c.LayerNormEps) || c.LayerNormEps < 0 || c.LayerNormEps > 1 {
		return BERTConfig{}, fmt.Errorf("%s: layer_norm_eps %v is not in [0, 1]", name, c.LayerNormEps)
	}
	if c.HiddenAct != "" && c.HiddenAct != "gelu" {
		return BERTConfig{}, fmt.Errorf("%s: hidden_act %q: only gelu is supported", name, c.HiddenAct)
	}
	return c, nil
}

// numParams returns the parameters of the BERT cfg describes, with layers
// layers.
func (c BERTConfig) numParams(layers int) float64 {
	d, ff := float64(c.HiddenSize), float64(c.IntermediateSize)
	emb := (float64(c.VocabSize)+float64(c.MaxPositionEmbeddings)+float64(c.TypeVocabSize))*d + 2*d
	return emb + float64(layers)*(4*d*d+4*d+2*d*ff+ff+d+4*d)
}

// BERT is the encoder of BERT (embeddings and the first layers), with
// HuggingFace's parameter names.
type BERT struct {
	Cfg       BERTConfig
	WordEmb   *nn.Embedding
	PosEmb    *nn.Embedding
	TypeEmb   *nn.Embedding
	EmbNorm   *nn.LayerNorm
	Layers    []*BERTLayer
	Dropout   float32
	trainable bool
}

// BERTLayer is one post-norm BERT transformer layer.
type BERTLayer struct {
	Query, Key, Value, AttnOut *nn.Linear
	AttnNorm                   *nn.LayerNorm
	Inter, Out                 *nn.Linear
	OutNorm                    *nn.LayerNorm
	Heads                      int
}

// NewBERT builds a randomly initialised BERT with the given sizes, keeping
// layers layers (<= cfg.NumHiddenLayers when loading weights).
func NewBERT(rng *rand.Rand, cfg BERTConfig, layers int, dropout float32) *BERT {
	eps := float32(cfg.LayerNormEps)
	b := &BERT{
		Cfg:       cfg,
		WordEmb:   nn.NewEmbedding(rng, cfg.VocabSize, cfg.HiddenSize),
		PosEmb:    nn.NewEmbedding(rng, cfg.MaxPositionEmbeddings, cfg.HiddenSize),
		TypeEmb:   nn.NewEmbedding(rng, cfg.TypeVocabSize, cfg.HiddenSize),
		EmbNorm:   nn.NewLayerNorm(cfg.HiddenSize, eps),
		Dropout:   dropout,
		trainable: true,
	}
	// BERT initialises embeddings with N(0, 0.02).
	for _, e := range []*nn.Embedding{b.WordEmb, b.PosEmb, b.TypeEmb} {
		for i := range e.W.Data {
			e.W.Data[i] *= 0.02
		}
	}
	d := cfg.HiddenSize
	for i := 0; i < layers; i++ {
		b.Layers = append(b.Layers, &BERTLayer{
			Query: nn.NewLinear(rng, d, d, true), Key: nn.NewLinear(rng, d, d, true), Value: nn.NewLinear(rng, d, d, true),
			AttnOut: nn.NewLinear(rng, d, d, true), AttnNorm: nn.NewLayerNorm(d, eps),
			Inter: nn.NewLinear(rng, d, cfg.IntermediateSize, true), Out: nn.NewLinear(rng, cfg.IntermediateSize, d, true),
			OutNorm: nn.NewLayerNorm(d, eps), Heads: cfg.NumAttentionHeads,
		})
	}
	return b
}

// LoadBERT reads a HuggingFace BERT directory (config.json and
// model.safetensors, or pytorch_model.bin, a torch.save file read by
// package torchfile) keeping its first layers layers.
func LoadBERT(dir string, layers int, dropout float32) (*BERT, error) {
	cfg, err := ReadBERTConfig(dir)
	if err != nil {
		return nil, err
	}
	if layers <= 0 || layers > cfg.NumHiddenLayers {
		layers = cfg.NumHiddenLayers
	}
	path := filepath.Join(dir, "model.safetensors")
	bin := filepath.Join(dir, "pytorch_model.bin")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if _, berr := os.Stat(bin); berr == nil {
			return loadBERTTorch(cfg, bin, layers, dropout)
		}
		return nil, fmt.Errorf("%s holds neither model.safetensors nor pytorch_model.bin: not a HuggingFace BERT directory", dir)
	}
	f, err := checkpoint.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return loadBERT(cfg, f, layers, dropout)
}

// bertName maps a HuggingFace BERT tensor name to xmr's: without the
// "bert." prefix of BertForPreTraining files, LayerNorm gamma/beta (old
// TF-converted files) as weight/bias.
func bertName(name string) string {
	name = strings.TrimPrefix(name, "bert.")
	name = strings.Replace(name, "LayerNorm.gamma", "LayerNorm.weight", 1)
	return strings.Replace(name, "LayerNorm.beta", "LayerNorm.bias", 1)
}

// loadBERTTorch builds the BERT of cfg with layers layers from a
// pytorch_model.bin.
func loadBERTTorch(cfg BERTConfig, path string, layers int, dropout float32) (*BERT, error) {
	f, err := torchfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w, err := readStateDict(f, "state_dict", "model")
	if err != nil {
		return nil, err
	}
	if need := cfg.numParams(layers); need > w.floatElements() {
		return nil, fmt.Errorf("%s: the BERT config describes %.0f parameters for %d layers, the file holds only %.0f values: the two do not belong together", path, need, layers, w.floatElements())
	}
	// The file's names, by xmr's name for them.
	byName := map[string][]string{}
	for _, n := range w.names {
		byName[bertName(n)] = append(byName[bertName(n)], n)
	}
	b := NewBERT(rand.New(rand.NewPCG(1, 1)), cfg, layers, dropout)
	_, err = w.fill(b.Params(), func(name string) []string {
		if c := byName[name]; len(c) > 0 {
			return c
		}
		return []string{name}
	})
	if err != nil {
		return nil, fmt.Errorf("load BERT weights: %w", err)
	}
	return b, nil
}

// loadBERT builds the BERT of cfg with layers layers from the weights of f.
func loadBERT(cfg BERTConfig, f *checkpoint.File, layers int, dropout float32) (*BERT, error) {
	path := f.Path()
	// The weights must be in the file: a config.json asking for more than
	// the file holds is refused before anything is allocated.
	var inFile float64
	for _, name := range f.Names() {
		if in, _ := f.Info(name); in.Float32() {
			inFile += float64(in.Numel())
		}
	}
	if need := cfg.numParams(layers); need > inFile {
		return nil, fmt.Errorf("%s: the BERT config describes %.0f parameters for %d layers, the file holds only %.0f values: the two do not belong together", path, need, layers, inFile)
	}
	b := NewBERT(rand.New(rand.NewPCG(1, 1)), cfg, layers, dropout)
	want := []checkpoint.Entry{}
	for _, p := range b.Params() {
		want = append(want, checkpoint.Entry{Name: p.Name, Shape: p.T.Shape, Data: p.T.Data})
	}
	err := f.LoadInto(want, checkpoint.LoadOptions{AllowUnexpected: true, Rename: bertName})
	if err != nil {
		return nil, fmt.Errorf("load BERT weights: %w", err)
	}
	return b, nil
}

// SetTrainable freezes (false) or fine-tunes (true) every BERT parameter.
func (b *BERT) SetTrainable(v bool) {
	b.trainable = v
	for _, p := range b.Params() {
		p.T.SetRequiresGrad(v)
	}
}

// Params returns the parameters with HuggingFace names.
func (b *BERT) Params() []nn.Named {
	ps := nn.Prefix("embeddings.word_embeddings", b.WordEmb.Params())
	ps = append(ps, nn.Prefix("embeddings.position_embeddings", b.PosEmb.Params())...)
	ps = append(ps, nn.Prefix("embeddings.token_type_embeddings", b.TypeEmb.Params())...)
	ps = append(ps, nn.Prefix("embeddings.LayerNorm", b.EmbNorm.Params())...)
	for i, l := range b.Layers {
		pre := fmt.Sprintf("encoder.layer.%d.", i)
		ps = append(ps, nn.Prefix(pre+"attention.self.query", l.Query.Params())...)
		ps = append(ps, nn.Prefix(pre+"attention.self.key", l.Key.Params())...)
		ps = append(ps, nn.Prefix(pre+"attention.self.value", l.Value.Params())...)
		ps = append(ps, nn.Prefix(pre+"attention.output.dense", l.AttnOut.Params())...)
		ps = append(ps, nn.Prefix(pre+"attention.output.LayerNorm", l.AttnNorm.Params())...)
		ps = append(ps, nn.Prefix(pre+"intermediate.dense", l.Inter.Params())...)
		ps = append(ps, nn.Prefix(pre+"output.dense", l.Out.Params())...)
		ps = append(ps, nn.Prefix(pre+"output.LayerNorm", l.OutNorm.Params())...)
	}
	return ps
}

// Forward encodes ids (C*T, row-major (C, T)) with valid (C, T) and returns
// the last hidden state (C, T, hidden).
func (b *BERT) Forward(tp *tensor.Tape, ids []int32, valid *tensor.Tensor, lengths []int) *tensor.Tensor {
	c, t := valid.Shape[0], valid.Shape[1]
	if t > b.Cfg.MaxPositionEmbeddings {
		panic(&tensor.ShapeError{Op: "BERT", Msg: fmt.Sprintf("%d tokens exceed max_position_embeddings %d", t, b.Cfg.MaxPositionEmbeddings)})
	}
	if !b.trainable {
		// A frozen BERT needs no tape: its output is a constant input.
		tp = nil
	}
	pos := make([]int32, t)
	for i := range pos {
		pos[i] = int32(i)
	}
	x := b.WordEmb.Forward(tp, ids, c, t)                  // (C, T, D)
	x = tp.Add(x, b.PosEmb.Forward(tp, pos, 1, t))         // + positions (1, T, D)
	x = tp.Add(x, b.TypeEmb.Forward(tp, []int32{0}, 1, 1)) // + segment A
	x = tp.Dropout(b.EmbNorm.Forward(tp, x), b.Dropout)    // (C, T, D)
	for _, l := range b.Layers {
		x = l.forward(tp, x, valid, b.Dropout)
	}
	return x
}

func (l *BERTLayer) forward(tp *tensor.Tape, x, valid *tensor.Tensor, p float32) *tensor.Tensor {
	q, k, v := l.Query.Forward(tp, x), l.Key.Forward(tp, x), l.Value.Forward(tp, x)                  // (C, T, D) each
	a := tp.Attention(q, k, v, tensor.AttentionOptions{Heads: l.Heads, KeyValid: valid, Dropout: p}) // (C, T, D)
	x = l.AttnNorm.Forward(tp, tp.Add(x, tp.Dropout(l.AttnOut.Forward(tp, a), p)))
	h := tp.GELU(l.Inter.Forward(tp, x)) // (C, T, FF)
	return l.OutNorm.Forward(tp, tp.Add(x, tp.Dropout(l.Out.Forward(tp, h), p)))
}

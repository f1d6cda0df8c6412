package model

import (
	"fmt"
	"strings"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/text"
)

// FormatVersion identifies xmr model checkpoints in their metadata.
const FormatVersion = "xmr-model/1"

// Save writes the model's weights, config and vocabulary to a safetensors
// file (atomically); extra tensors (e.g. optimiser state) and metadata are
// stored beside them.
func (m *Model) Save(path string, extra []nn.Named, meta map[string]string) error {
	var entries []checkpoint.Entry
	for _, p := range append(m.Params(), extra...) {
		entries = append(entries, checkpoint.Entry{Name: p.Name, Shape: p.T.Shape, Data: p.T.Data})
	}
	md := map[string]string{
		"format":    FormatVersion,
		"config":    m.Cfg.Marshal(),
		"tokenizer": m.Cfg.TokenizerKind(),
		"vocab":     strings.Join(m.Tok.Vocab().Tokens(), "\n"),
	}
	for k, v := range meta {
		md[k] = v
	}
	return checkpoint.Save(path, entries, md)
}

// Load rebuilds a model from a checkpoint written by Save; the returned file
// stays open for reading extra tensors and must be closed by the caller.
func Load(path string) (*Model, *checkpoint.File, error) {
	f, err := checkpoint.Open(path)
	if err != nil {
		return nil, nil, err
	}
	md := f.Metadata()
	if md["format"] != FormatVersion {
		f.Close()
		return nil, nil, fmt.Errorf("%s: not an xmr model checkpoint (metadata format %q, want %q)", path, md["format"], FormatVersion)
	}
	cfg, err := ParseConfig([]byte(md["config"]))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: stored config: %w", path, err)
	}
	// The weights come from the file: never read a pretrained BERT again.
	cfg.TextModel.Pretrain = ""
	tok, err := NewTokenizer(md["tokenizer"], text.NewVocab(strings.Split(md["vocab"], "\n")))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: stored tokenizer: %w", path, err)
	}
	m, err := NewWithTokenizer(cfg, tok)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	var want []checkpoint.Entry
	for _, p := range m.Params() {
		want = append(want, checkpoint.Entry{Name: p.Name, Shape: p.T.Shape, Data: p.T.Data})
	}
	if err := f.LoadInto(want, checkpoint.LoadOptions{AllowUnexpected: true}); err != nil {
		f.Close()
		return nil, nil, err
	}
	return m, f, nil
}

// LoadExtra fills tensors stored beside the model (e.g. optimiser state)
// from f.
func LoadExtra(f *checkpoint.File, extra []nn.Named) error {
	var want []checkpoint.Entry
	for _, p := range extra {
		want = append(want, checkpoint.Entry{Name: p.Name, Shape: p.T.Shape, Data: p.T.Data})
	}
	return f.LoadInto(want, checkpoint.LoadOptions{AllowUnexpected: true})
}

// NewWithTokenizer builds a model whose text vocabulary is tok's.
func NewWithTokenizer(cfg Config, tok Tokenizer) (*Model, error) {
	if cfg.TextModel.Pretrain == "" {
		cfg.TextModel.VocabSize = tok.Vocab().Len()
	}
	m, err := New(cfg)
	if err != nil {
		return nil, err
	}
	m.Tok = tok
	return m, nil
}

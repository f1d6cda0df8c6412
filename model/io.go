package model

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/text"
)

// FormatVersion identifies xmr model checkpoints in their metadata.
// Version 1 stored the whole training config under "config"; version 2
// stores the model's config under "model_config" (see Config) and leaves
// the rest to its writer (a training run stores its own config and state).
const FormatVersion = "xmr-model/2"

const formatV1 = "xmr-model/1"

// Metadata keys of a model checkpoint.
const (
	metaFormat    = "format"
	metaModel     = "model"
	metaConfig    = "model_config"
	metaTokenizer = "tokenizer"
	metaVocab     = "vocab"
	metaConfigV1  = "config"
)

// BestCheckpoint is the checkpoint of a training run directory that Load
// reads when given the directory.
const BestCheckpoint = "best-rsum.safetensors"

// Save writes m's weights, state (Stateful: MEMBER's memory banks), config
// and vocabulary to a safetensors file (atomically); extra tensors (e.g.
// optimiser state) and metadata are stored beside them.
func Save(path string, m Model, extra []nn.Named, meta map[string]string) error {
	return save(path, m, extra, meta, false)
}

// SaveHalf is Save with the tensors stored in half precision
// (checkpoint.Entry.Half): half the bytes, for a model shipped rather
// than trained on (xmr export). A tensor with a value beyond half
// precision's range (a feature channel's inverse deviation, say) stays
// float32.
func SaveHalf(path string, m Model, extra []nn.Named, meta map[string]string) error {
	return save(path, m, extra, meta, true)
}

func save(path string, m Model, extra []nn.Named, meta map[string]string, half bool) error {
	var entries []checkpoint.Entry
	for _, p := range append(append(m.Params(), state(m)...), extra...) {
		entries = append(entries, checkpoint.Entry{Name: p.Name, Shape: p.T.Shape, Data: p.T.Data, Half: half && fitsHalf(p.T.Data)})
	}
	cfg := m.Config()
	md := map[string]string{}
	for k, v := range meta {
		md[k] = v
	}
	md[metaFormat] = FormatVersion
	md[metaModel] = m.Name()
	md[metaConfig] = cfg.Marshal()
	md[metaTokenizer] = cfg.TokenizerKind()
	md[metaVocab] = strings.Join(m.Tokenizer().Vocab().Tokens(), "\n")
	return checkpoint.Save(path, entries, md)
}

// Load rebuilds a model from a checkpoint written by Save; path may also be
// a training run directory, whose best-rsum checkpoint is read. The
// returned file stays open for reading extra tensors and metadata and must
// be closed by the caller.
func Load(path string) (Model, *checkpoint.File, error) {
	path, err := ResolveCheckpoint(path)
	if err != nil {
		return nil, nil, err
	}
	f, err := checkpoint.Open(path)
	if err != nil {
		return nil, nil, err
	}
	m, err := fromFile(path, f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return m, f, nil
}

// ResolveCheckpoint returns path, or for a directory (a training run) the
// best-rsum checkpoint in it; the error for a directory without one lists
// the checkpoints it has.
func ResolveCheckpoint(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return path, nil // checkpoint.Open reports a missing file
	}
	best := filepath.Join(path, BestCheckpoint)
	if _, err := os.Stat(best); err == nil {
		return best, nil
	}
	have, _ := filepath.Glob(filepath.Join(path, "*.safetensors"))
	for i := range have {
		have[i] = filepath.Base(have[i])
	}
	if len(have) == 0 {
		return "", fmt.Errorf("%s is a directory without checkpoints (*.safetensors): give a checkpoint file or a training run directory", path)
	}
	return "", fmt.Errorf("%s: no %s in this directory; it has %s: name one of them", path, BestCheckpoint, strings.Join(have, ", "))
}

// fromFile builds the model a checkpoint describes and fills its weights.
func fromFile(path string, f *checkpoint.File) (Model, error) {
	md := f.Metadata()
	var cfg Config
	var err error
	switch md[metaFormat] {
	case FormatVersion:
		cfg, err = ParseConfig([]byte(md[metaConfig]))
	case formatV1:
		cfg, err = parseConfigV1([]byte(md[metaConfigV1]))
	default:
		return nil, fmt.Errorf("%s: not an xmr model checkpoint (metadata format %q, want %q)", path, md[metaFormat], FormatVersion)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: stored config: %w", path, err)
	}
	// The weights come from the file: never read a pretrained BERT again.
	cfg.TextModel.Pretrain = ""
	tok, err := NewTokenizer(md[metaTokenizer], text.NewVocab(strings.Split(md[metaVocab], "\n")))
	if err != nil {
		return nil, fmt.Errorf("%s: stored tokenizer: %w", path, err)
	}
	m, err := New(cfg, tok, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !f.HasChecksums() {
		slog.Warn("checkpoint without checksums (written before xmr stored them): its weights cannot be verified", "path", path)
	}
	if err := LoadTensors(f, m.Params()); err != nil {
		return nil, err
	}
	if sm, ok := m.(Stateful); ok {
		err := sm.LoadState(func(name string) ([]float32, []int, bool, error) {
			if _, ok := f.Info(name); !ok {
				return nil, nil, false, nil
			}
			d, shape, err := f.Tensor(name)
			return d, shape, true, err
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return m, nil
}

// fitsHalf reports whether every value of x has a finite half-precision
// value (within +-65504 once rounded).
func fitsHalf(x []float32) bool {
	for _, v := range x {
		if !(math.Abs(float64(v)) < 65520) { // 65520 and up round to infinity
			return false
		}
	}
	return true
}

// state returns the state tensors of a Stateful model, nil for others.
func state(m Model) []nn.Named {
	if sm, ok := m.(Stateful); ok {
		return sm.State()
	}
	return nil
}

// Fingerprint identifies a model's weights (and state: MEMBER's memory
// banks, which change its embeddings), config and vocabulary: the SHA-256
// of all of them, as "sha256:HEX". Two checkpoints of the same model
// (a best-rsum and a copy with optimiser state beside it, say) have the same
// fingerprint; an index records it to refuse vectors of another model.
func Fingerprint(m Model) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", m.Name(), m.Config().Marshal(), strings.Join(m.Tokenizer().Vocab().Tokens(), "\n"))
	var buf []byte
	for _, p := range append(m.Params(), state(m)...) {
		fmt.Fprintf(h, "%s %v\n", p.Name, p.T.Shape)
		buf = buf[:0]
		for _, v := range p.T.Data {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
		h.Write(buf)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// LoadTensors fills the named tensors from f (model weights, or tensors
// stored beside them such as optimiser state); tensors of f that are not
// asked for are ignored.
func LoadTensors(f *checkpoint.File, ts []nn.Named) error {
	want := make([]checkpoint.Entry, len(ts))
	for i, p := range ts {
		want[i] = checkpoint.Entry{Name: p.Name, Shape: p.T.Shape, Data: p.T.Data}
	}
	return f.LoadInto(want, checkpoint.LoadOptions{AllowUnexpected: true})
}

// parseConfigV1 reads the model part of a version-1 checkpoint's config: a
// whole training config in the official layout, whose pooling and caption
// length lived in its training and dataset sections.
func parseConfigV1(b []byte) (Config, error) {
	var v1 struct {
		TextModel  yaml.Node `yaml:"text-model"`
		ImageModel yaml.Node `yaml:"image-model"`
		Model      yaml.Node `yaml:"model"`
		Dataset    struct {
			MaxCaptionTokens *int `yaml:"max-caption-tokens"`
		} `yaml:"dataset"`
		Training struct {
			AlignmentMode *Scoring `yaml:"alignment-mode"`
		} `yaml:"training"`
	}
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&v1); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, err
	}
	c := Default()
	for _, s := range []struct {
		node *yaml.Node
		dst  any
	}{{&v1.TextModel, &c.TextModel}, {&v1.ImageModel, &c.ImageModel}, {&v1.Model, &c.Model}} {
		if s.node.Kind != 0 {
			if err := s.node.Decode(s.dst); err != nil {
				return Config{}, err
			}
		}
	}
	if v1.Dataset.MaxCaptionTokens != nil {
		c.MaxCaptionTokens = *v1.Dataset.MaxCaptionTokens
	}
	if v1.Training.AlignmentMode != nil {
		c.Pooling = *v1.Training.AlignmentMode
	}
	return c, c.Validate()
}

// Package model holds the image-text matching models of xmr: TERAN
// (fine-grained region-word alignment) and TERN (global I-CLS/T-CLS
// embeddings), their encoders and their losses.
//
// A model is built from a Config that has the same sections and keys as the
// official TERAN/TERN YAML configs (text-model, image-model, model,
// training), so a checkpoint carries everything needed to rebuild it.
package model

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/xmr-project/xmr/configs"
)

// Config is a whole model and training configuration, as in the official
// YAML files.
type Config struct {
	Dataset    DatasetConfig    `yaml:"dataset"`
	TextModel  TextModelConfig  `yaml:"text-model"`
	ImageModel ImageModelConfig `yaml:"image-model"`
	Model      ModelConfig      `yaml:"model"`
	Training   TrainingConfig   `yaml:"training"`
}

// DatasetConfig names the data; --data on the command line overrides Data.
type DatasetConfig struct {
	Name string `yaml:"name"`
	Data string `yaml:"data"`
	// MaxCaptionTokens truncates captions (WordPiece tokens incl. [CLS]/[SEP]).
	MaxCaptionTokens int `yaml:"max-caption-tokens"`
}

// TextModelConfig selects and sizes the text encoder.
type TextModelConfig struct {
	// Name is "bert", "gru", "lstm" or "transformer" (word embeddings plus
	// transformer layers).
	Name string `yaml:"name"`
	// Pretrain is a HuggingFace BERT directory (config.json, vocab.txt,
	// model.safetensors); empty means a randomly initialised BERT of the
	// sizes below.
	Pretrain string `yaml:"pretrain"`
	// Vocab is a vocab.txt (WordPiece for bert) or word vocabulary file; when
	// empty for bert, Pretrain's vocab.txt is used; for word models the
	// vocabulary is built from the training captions.
	Vocab string `yaml:"vocab"`
	// WordDim is the width of the text encoder's output (768 for BERT-base).
	WordDim int `yaml:"word-dim"`
	// ExtractionHiddenLayer keeps the first N BERT layers (6 in TERAN).
	ExtractionHiddenLayer int  `yaml:"extraction-hidden-layer"`
	FineTune              bool `yaml:"fine-tune"`
	// Layers is the number of transformer layers for name "transformer", or
	// recurrent layers for gru/lstm.
	Layers  int     `yaml:"layers"`
	Dropout float32 `yaml:"dropout"`
	// Small-BERT sizes, used when Pretrain is empty.
	Heads        int `yaml:"heads"`
	FF           int `yaml:"ff"`
	MaxPositions int `yaml:"max-positions"`
	// EmbedDim and Hidden size the word embeddings and recurrent state of
	// gru/lstm/transformer (300 and 512 in the TERAN ablation).
	EmbedDim      int  `yaml:"embed-dim"`
	Hidden        int  `yaml:"hidden"`
	Bidirectional bool `yaml:"bidirectional"`
	// VocabSize is filled in when the vocabulary is known.
	VocabSize int `yaml:"vocab-size"`
}

// ImageModelConfig sizes the visual pipeline.
type ImageModelConfig struct {
	Name              string  `yaml:"name"`
	FeatDim           int     `yaml:"feat-dim"`
	TransformerLayers int     `yaml:"transformer-layers"`
	Heads             int     `yaml:"heads"`
	FF                int     `yaml:"ff"`
	Dropout           float32 `yaml:"dropout"`
	// PosEncoding is "concat-and-process" (box code concatenated to the
	// features, then Linear-ReLU-Linear) or "none".
	PosEncoding string `yaml:"pos-encoding"`
	// Hidden is the width of the visual pipeline (2048 in TERAN).
	Hidden int `yaml:"hidden"`
}

// ModelConfig is the part shared by the two modalities.
type ModelConfig struct {
	// Name is "teran" or "tern".
	Name      string `yaml:"name"`
	EmbedSize int    `yaml:"embed-size"`
	// Layers is the number of final transformer layers at EmbedSize.
	Layers            int     `yaml:"layers"`
	Heads             int     `yaml:"heads"`
	FF                int     `yaml:"ff"`
	SharedTransformer bool    `yaml:"shared-transformer"`
	ExcludeStopwords  bool    `yaml:"exclude-stopwords"`
	Dropout           float32 `yaml:"dropout"`
}

// TrainingConfig holds the optimisation settings.
type TrainingConfig struct {
	LR float64 `yaml:"lr"`
	// BERTLR is the learning rate of the BERT parameters (0: same as LR).
	BERTLR       float64 `yaml:"bert-lr"`
	GradClip     float64 `yaml:"grad-clip"`
	MaxViolation bool    `yaml:"max-violation"`
	// MaxViolationAfter trains with the sum over negatives for this many
	// iterations before switching to the hardest negative (as VSE-infinity's
	// warm-up): from random weights the hardest-negative loss tends to
	// collapse every embedding onto one point. 0 uses MaxViolation from the
	// start, as the papers do from pretrained encoders.
	MaxViolationAfter int `yaml:"max-violation-after"`
	// LossType is "alignment" (TERAN), "matching" (TERN) or
	// "matching+alignment" (TERN w. Align, uncertainty-weighted).
	LossType string `yaml:"loss-type"`
	// AlignmentMode is the pooling: MrSw, MwSr, Symm or MrAvgw.
	AlignmentMode string  `yaml:"alignment-mode"`
	Margin        float32 `yaml:"margin"`
	BatchSize     int     `yaml:"bs"`
	Epochs        int     `yaml:"epochs"`
	// Scheduler "steplr" multiplies the lr by Gamma every StepSize epochs.
	Scheduler string  `yaml:"scheduler"`
	Gamma     float64 `yaml:"gamma"`
	StepSize  int     `yaml:"step-size"`
	// WarmupPeriod is the number of linear warm-up iterations (0: none).
	WarmupPeriod int `yaml:"warmup-period"`
	// ValStep validates every ValStep iterations (and after every epoch).
	ValStep int    `yaml:"val-step"`
	Seed    uint64 `yaml:"seed"`
}

// Default returns TERAN MrSw at the published size (REFERENCE.md).
func Default() Config {
	return Config{
		Dataset: DatasetConfig{Name: "coco", MaxCaptionTokens: 40},
		TextModel: TextModelConfig{Name: "bert", Pretrain: "", WordDim: 768, ExtractionHiddenLayer: 6, FineTune: true,
			Dropout: 0.1, Heads: 12, FF: 3072, MaxPositions: 512, EmbedDim: 300, Hidden: 512, Bidirectional: true, VocabSize: 30522},
		ImageModel: ImageModelConfig{Name: "bottomup", FeatDim: 2048, TransformerLayers: 4, Heads: 4, FF: 2048, Dropout: 0.1,
			PosEncoding: "concat-and-process", Hidden: 2048},
		Model: ModelConfig{Name: "teran", EmbedSize: 1024, Layers: 2, Heads: 4, FF: 2048, SharedTransformer: false, Dropout: 0.1},
		Training: TrainingConfig{LR: 1e-5, GradClip: 2.0, MaxViolation: true, LossType: "alignment", AlignmentMode: "MrSw",
			Margin: 0.2, BatchSize: 40, Epochs: 30, Scheduler: "steplr", Gamma: 0.1, StepSize: 20, ValStep: 500, Seed: 1},
	}
}

// LoadConfig reads a YAML config file, or when no such file exists, the
// built-in config of that name (see package configs: "teran-mrsw-small");
// keys it does not set keep Default's values. Unknown keys are an error
// naming the file and line.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		builtin, ok := configs.Lookup(filepath.Base(path))
		if !ok || !errors.Is(err, os.ErrNotExist) {
			return Config{}, fmt.Errorf("read config: %w (built-in configs: %s)", err, strings.Join(configs.Names(), ", "))
		}
		b = builtin
	}
	c, err := ParseConfig(b)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses YAML text over Default and validates the result.
func ParseConfig(b []byte) (Config, error) {
	c := Default()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && err.Error() != "EOF" {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Marshal returns the config as YAML (stored in checkpoints).
func (c Config) Marshal() string {
	b, err := yaml.Marshal(c)
	if err != nil {
		panic(err) // plain struct: cannot fail
	}
	return string(b)
}

// Validate checks the values a model needs and says which key is wrong.
func (c Config) Validate() error {
	var errs []string
	bad := func(key, format string, args ...any) {
		errs = append(errs, key+": "+fmt.Sprintf(format, args...))
	}
	switch c.TextModel.Name {
	case "bert", "gru", "lstm", "transformer":
	default:
		bad("text-model.name", "%q is not one of bert, gru, lstm, transformer", c.TextModel.Name)
	}
	switch c.Model.Name {
	case "teran", "tern":
	default:
		bad("model.name", "%q is not one of teran, tern", c.Model.Name)
	}
	switch c.Training.AlignmentMode {
	case "MrSw", "MwSr", "Symm", "MrAvgw":
	default:
		bad("training.alignment-mode", "%q is not one of MrSw, MwSr, Symm, MrAvgw", c.Training.AlignmentMode)
	}
	switch c.Training.LossType {
	case "alignment", "matching", "matching+alignment":
	default:
		bad("training.loss-type", "%q is not one of alignment, matching, matching+alignment", c.Training.LossType)
	}
	if c.Model.Name == "teran" && c.Training.LossType != "alignment" {
		bad("training.loss-type", "teran trains with the alignment loss, not %q", c.Training.LossType)
	}
	pos := func(key string, v int) {
		if v <= 0 {
			bad(key, "must be positive, is %d", v)
		}
	}
	pos("model.embed-size", c.Model.EmbedSize)
	pos("model.heads", c.Model.Heads)
	pos("model.ff", c.Model.FF)
	pos("image-model.feat-dim", c.ImageModel.FeatDim)
	pos("image-model.hidden", c.ImageModel.Hidden)
	pos("image-model.heads", c.ImageModel.Heads)
	pos("text-model.word-dim", c.TextModel.WordDim)
	pos("training.bs", c.Training.BatchSize)
	if c.Model.EmbedSize%c.Model.Heads != 0 {
		bad("model.heads", "%d does not divide embed-size %d", c.Model.Heads, c.Model.EmbedSize)
	}
	if c.ImageModel.Hidden%max(c.ImageModel.Heads, 1) != 0 {
		bad("image-model.heads", "%d does not divide hidden %d", c.ImageModel.Heads, c.ImageModel.Hidden)
	}
	if c.TextModel.Name == "bert" && c.TextModel.Pretrain == "" && c.TextModel.WordDim%max(c.TextModel.Heads, 1) != 0 {
		bad("text-model.heads", "%d does not divide word-dim %d", c.TextModel.Heads, c.TextModel.WordDim)
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid config: %s", strings.Join(errs, "; "))
	}
	return nil
}

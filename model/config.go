package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/xmr-project/xmr/configs"
)

// Config is everything needed to build a model: its name, its two encoders
// and the common space. It is what a checkpoint stores beside the weights,
// so a model reloads without its training flags. The sections and keys are
// those of the official TERAN/TERN YAML files; a training config (package
// train) holds the same sections plus dataset and training settings.
type Config struct {
	TextModel  TextConfig  `yaml:"text-model"`
	ImageModel ImageConfig `yaml:"image-model"`
	Model      JointConfig `yaml:"model"`
	// Pooling is the alignment pooling of TERAN's score
	// (training.alignment-mode in the official configs). Models that score
	// by global vectors (TERN) ignore it.
	Pooling Scoring `yaml:"pooling"`
	// MaxCaptionTokens truncates captions (WordPiece tokens incl.
	// [CLS]/[SEP]; dataset.max-caption-tokens in the official configs); 0
	// keeps every token.
	MaxCaptionTokens int `yaml:"max-caption-tokens"`
}

// TextConfig selects and sizes the text encoder.
type TextConfig struct {
	// Name is, for TERAN and TERN, "bert", "gru", "lstm" or "transformer"
	// (word embeddings plus transformer layers); for SEAM the variant:
	// "seam-e", "seam-c" or "seam-g" (see seam.go).
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
	// gru/lstm/transformer (300 and 512 in the TERAN ablation) and of SEAM
	// (d = 300; Hidden is SEAM-G's GRU, 512 or 1024).
	EmbedDim      int  `yaml:"embed-dim"`
	Hidden        int  `yaml:"hidden"`
	Bidirectional bool `yaml:"bidirectional"`
	// SEAM's self-attention (sec. 2.1): Hops is h, the number of attention
	// distributions over the words; AttentionUnits is p, the width of V =
	// tanh(H W1) (300); Filters is f, the filters of each of SEAM-C's two
	// convolutions (100); AttentionPenalty is lambda, the weight of the
	// penalty ||A^T A - I||_F^2 in the training loss (0 turns it off).
	Hops             int     `yaml:"hops,omitempty"`
	AttentionUnits   int     `yaml:"attention-units,omitempty"`
	Filters          int     `yaml:"filters,omitempty"`
	AttentionPenalty float32 `yaml:"attention-penalty,omitempty"`
	// VocabSize is filled in when the vocabulary is known.
	VocabSize int `yaml:"vocab-size"`
}

// textEncoders lists the valid TextConfig.Name values of TERAN and TERN;
// seamVariants (seam.go) those of SEAM.
var textEncoders = []string{"bert", "gru", "lstm", "transformer"}

// ImageConfig sizes the visual pipeline.
type ImageConfig struct {
	// Name says what the image encoder reads: "bottomup" region features
	// (TERAN, TERN) or "global", one CNN feature vector per image (SEAM;
	// given region features, the mean of an image's regions stands in).
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

// posEncodings lists the valid ImageConfig.PosEncoding values.
var posEncodings = []string{"concat-and-process", "none"}

// JointConfig is the part of the model shared by the two modalities: which
// model it is and the common space.
type JointConfig struct {
	// Name is the model's name in the registry (see Names): "teran",
	// "tern" or "seam".
	Name      string `yaml:"name"`
	EmbedSize int    `yaml:"embed-size"`
	// Layers is the number of final transformer layers at EmbedSize.
	Layers            int     `yaml:"layers"`
	Heads             int     `yaml:"heads"`
	FF                int     `yaml:"ff"`
	SharedTransformer bool    `yaml:"shared-transformer"`
	ExcludeStopwords  bool    `yaml:"exclude-stopwords"`
	Dropout           float32 `yaml:"dropout"`
	// Similarity is SEAM's score and training similarity: order (the
	// paper's) or global (the cosine). TERAN and TERN leave it empty: they
	// score by Pooling and by the CLS cosine.
	Similarity Scoring `yaml:"similarity,omitempty"`
}

// Default returns TERAN MrSw at the published size (REFERENCE.md).
func Default() Config {
	return Config{
		TextModel: TextConfig{Name: "bert", WordDim: 768, ExtractionHiddenLayer: 6, FineTune: true,
			Dropout: 0.1, Heads: 12, FF: 3072, MaxPositions: 512, EmbedDim: 300, Hidden: 512, Bidirectional: true, VocabSize: 30522},
		ImageModel: ImageConfig{Name: "bottomup", FeatDim: 2048, TransformerLayers: 4, Heads: 4, FF: 2048, Dropout: 0.1,
			PosEncoding: "concat-and-process", Hidden: 2048},
		Model:            JointConfig{Name: "teran", EmbedSize: 1024, Layers: 2, Heads: 4, FF: 2048, Dropout: 0.1},
		Pooling:          MrSw,
		MaxCaptionTokens: 40,
	}
}

// ParseConfig parses a model config (as Marshal writes it) over Default and
// validates it. Unknown keys are an error naming the line.
func ParseConfig(b []byte) (Config, error) {
	return configs.Parse(b, Default())
}

// Marshal returns the config as YAML (stored in checkpoints).
func (c Config) Marshal() string { return configs.Marshal(c) }

// Validate checks the values a model needs and says which key is wrong and
// what the valid values are.
func (c Config) Validate() error {
	var p problems
	p.oneOf("model.name", c.Model.Name, Names())
	if !c.Pooling.Alignment() {
		p.bad("pooling", "%q is not an alignment pooling (%s)", c.Pooling, joinScorings(alignmentPoolings))
	}
	p.positive("model.embed-size", c.Model.EmbedSize)
	p.positive("image-model.feat-dim", c.ImageModel.FeatDim)
	if c.MaxCaptionTokens < 0 || c.MaxCaptionTokens == 1 {
		p.bad("max-caption-tokens", "must be 0 (no limit) or at least 2, is %d", c.MaxCaptionTokens)
	}
	if c.Model.Name == "seam" {
		c.validateSEAM(&p)
		return p.err()
	}
	if c.Model.Similarity != "" {
		p.bad("model.similarity", "only seam chooses its similarity; %s scores with the pooling or the CLS cosine", c.Model.Name)
	}
	p.oneOf("text-model.name", c.TextModel.Name, textEncoders)
	p.oneOf("image-model.name", c.ImageModel.Name, []string{"bottomup"})
	p.oneOf("image-model.pos-encoding", c.ImageModel.PosEncoding, posEncodings)
	p.positive("model.heads", c.Model.Heads)
	p.positive("model.ff", c.Model.FF)
	p.positive("image-model.hidden", c.ImageModel.Hidden)
	p.positive("image-model.heads", c.ImageModel.Heads)
	p.positive("text-model.word-dim", c.TextModel.WordDim)
	if c.Model.Heads > 0 && c.Model.EmbedSize%c.Model.Heads != 0 {
		p.bad("model.heads", "%d does not divide embed-size %d", c.Model.Heads, c.Model.EmbedSize)
	}
	if c.ImageModel.Heads > 0 && c.ImageModel.Hidden%c.ImageModel.Heads != 0 {
		p.bad("image-model.heads", "%d does not divide hidden %d", c.ImageModel.Heads, c.ImageModel.Hidden)
	}
	if c.TextModel.Name == "bert" && c.TextModel.Pretrain == "" && c.TextModel.WordDim%max(c.TextModel.Heads, 1) != 0 {
		p.bad("text-model.heads", "%d does not divide word-dim %d", c.TextModel.Heads, c.TextModel.WordDim)
	}
	return p.err()
}

// problems collects what Validate finds wrong, one "key: what" each.
type problems []string

func (p *problems) bad(key, format string, args ...any) {
	*p = append(*p, key+": "+fmt.Sprintf(format, args...))
}

func (p *problems) oneOf(key, v string, valid []string) {
	if !slices.Contains(valid, v) {
		p.bad(key, "%q is not one of %s", v, strings.Join(valid, ", "))
	}
}

func (p *problems) positive(key string, v int) {
	if v <= 0 {
		p.bad(key, "must be positive, is %d", v)
	}
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("invalid config: %s", strings.Join(p, "; "))
}

// GlobalImages reports whether the image encoder reads one global feature
// vector per image (image-model.name global: SEAM). Given region features,
// such an encoder encodes the mean of each image's valid regions.
func (c Config) GlobalImages() bool { return c.ImageModel.Name == "global" }

// TokenizerKind returns "wordpiece" for BERT models and "words" otherwise.
func (c Config) TokenizerKind() string {
	if c.TextModel.Name == "bert" {
		return "wordpiece"
	}
	return "words"
}

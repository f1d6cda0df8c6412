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
	// WordVectors is a file of pretrained word vectors (GloVe's text
	// format or wink-embeddings' JSON, package wordvec) that a fresh
	// training run starts the word-embedding table from (InitWordVectors);
	// the trained table is the checkpoint's, so nothing reads the file
	// after training. Not with a pretrained BERT, which has its own.
	WordVectors string `yaml:"word-vectors,omitempty"`
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
	// MinWordCount, for a vocabulary built from the training captions
	// (no pretrained BERT, no vocab file), keeps only the words seen at
	// least this many times; the rarer ones read as [UNK] (<unk>), whose
	// one embedding learns from them all instead of one each that a
	// model memorises (0 or 1: every word).
	MinWordCount int `yaml:"min-word-count,omitempty"`
}

// Recurrent returns the gate count (3 for gru, 4 for lstm) and the number
// of directions (2 when bidirectional) of a recurrent text encoder.
func (t TextConfig) Recurrent() (gates, directions int) {
	gates, directions = 3, 1
	if t.Name == "lstm" {
		gates = 4
	}
	if t.Bidirectional {
		directions = 2
	}
	return gates, directions
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
	// Slot0 says what fills TERAN's image slot 0, which attends with the
	// regions in the reasoning layers but never aligns: "zero" (or empty,
	// xmr's default) puts a zero vector there after the box MLP;
	// "zero-region" puts a zero region with a zero box code there before
	// it, so that slot 0 holds the MLP's output for zeros, as in the
	// official TERAN code, whose batches reserve a zero feature row. xmr
	// import sets it for official checkpoints. TERN fills slot 0 with its
	// learned I-CLS and takes neither.
	Slot0 string `yaml:"slot0,omitempty"`
	// FeatureNorm is "standardize" to standardise every feature channel
	// with the training split's mean and deviation before the model reads
	// it (featnorm.go; xmr extract's features need it), or "none" (or
	// empty: the papers' models read bottom-up features as they are).
	FeatureNorm string `yaml:"feature-norm,omitempty"`
}

// slot0Values lists the valid ImageConfig.Slot0 values.
var slot0Values = []string{"", "zero", "zero-region"}

// posEncodings lists the valid ImageConfig.PosEncoding values.
var posEncodings = []string{"concat-and-process", "none"}

// JointConfig is the part of the model shared by the two modalities: which
// model it is and the common space.
type JointConfig struct {
	// Name is the model's name in the registry (see Names): "teran",
	// "tern", "seam", "vsepp" or "member".
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
	// MEMBER's own keys (member.go), empty for the other models. Pool
	// compacts self- and cross-features into embeddings: first, mean or
	// max (the paper's best). Fusion is how the cross encoder fuses the
	// memory responses: early (one pass over their weighted average) or
	// late (one pass per response, then the weighted average; the
	// paper's). Responses is n_m, the memory responses per query (5).
	// UsageRatio is the fraction of the training items the memory banks
	// hold (1: all; Table VIII). Space is the embedding retrieval compares
	// (self, cross or comb) and Combination how comb combines the self
	// and cross spaces: similarity (the mean of the two cosines; the
	// paper's) or embedding (their sum). GenerationWeight weighs the
	// caption generation losses (1 in eq. 13; 0 turns them off).
	Pool             string  `yaml:"pool,omitempty"`
	Fusion           string  `yaml:"fusion,omitempty"`
	Responses        int     `yaml:"responses,omitempty"`
	UsageRatio       float32 `yaml:"usage-ratio,omitempty"`
	Space            string  `yaml:"space,omitempty"`
	Combination      string  `yaml:"combination,omitempty"`
	GenerationWeight float32 `yaml:"generation-weight,omitempty"`
}

// Default returns TERAN MrSw at the published size (the layer sizes of the
// official TERAN code and configs).
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

// Limits on the sizes a config may ask for. They are far above any model
// of the papers (BERT-large is 1024 wide with 24 layers) and keep nonsense
// such as "embed-size: 2000000000" from reaching an allocation; the memory
// estimate (package train) decides what fits the machine.
const (
	// MaxWidth bounds every width, feed-forward size and feature dimension.
	MaxWidth = 1 << 16
	// MaxLayers bounds every layer count.
	MaxLayers = 256
	// MaxHeads bounds every attention head count.
	MaxHeads = 1024
	// MaxVocab bounds vocabulary and position-table sizes.
	MaxVocab = 1 << 22
)

// Validate checks every field: names against their valid values (listed in
// the error), sizes against their ranges, and the sizes that must agree
// (heads dividing widths, caption length within BERT's positions). The
// error says which key is wrong; several problems are joined with "; ".
func (c Config) Validate() error {
	var p problems
	p.oneOf("model.name", c.Model.Name, Names())
	if !c.Pooling.Alignment() {
		p.bad("pooling", "%q is not an alignment pooling (%s)", c.Pooling, joinScorings(alignmentPoolings))
	}
	if c.MaxCaptionTokens < 0 || c.MaxCaptionTokens == 1 || c.MaxCaptionTokens > MaxVocab {
		p.bad("max-caption-tokens", "must be 0 (no limit) or in [2, %d], is %d", MaxVocab, c.MaxCaptionTokens)
	}
	p.between("model.embed-size", c.Model.EmbedSize, 1, MaxWidth)
	p.between("image-model.feat-dim", c.ImageModel.FeatDim, 1, MaxWidth)
	p.between("text-model.vocab-size", c.TextModel.VocabSize, 0, MaxVocab)
	p.oneOf("image-model.feature-norm", c.ImageModel.FeatureNorm, FeatureNorms)
	p.between("text-model.min-word-count", c.TextModel.MinWordCount, 0, MaxVocab)
	if c.TextModel.WordVectors != "" && c.TextModel.Pretrain != "" {
		p.bad("text-model.word-vectors", "a pretrained BERT (text-model.pretrain %q) has its own word embeddings; give one of the two", c.TextModel.Pretrain)
	}
	switch c.Model.Name {
	case "seam":
		c.validateSEAM(&p)
	case "vsepp":
		c.validateVSEPP(&p)
	case "member":
		c.validateMember(&p)
	default:
		c.validateTERAN(&p)
	}
	return p.err()
}

// validateTERAN checks the parts of a config that TERAN and TERN read.
func (c Config) validateTERAN(p *problems) {
	im, jm := c.ImageModel, c.Model
	if jm.Similarity != "" {
		p.bad("model.similarity", "only seam chooses its similarity; %s scores with the pooling or the CLS cosine", jm.Name)
	}
	c.validateText(p)

	p.oneOf("image-model.name", im.Name, []string{"bottomup"})
	p.oneOf("image-model.pos-encoding", im.PosEncoding, posEncodings)
	p.oneOf("image-model.slot0", im.Slot0, slot0Values)
	if jm.Name == "tern" && im.Slot0 == "zero-region" {
		p.bad("image-model.slot0", "tern fills slot 0 with its learned I-CLS: leave slot0 out")
	}
	p.between("image-model.hidden", im.Hidden, 1, MaxWidth)
	p.between("image-model.transformer-layers", im.TransformerLayers, 0, MaxLayers)
	p.between("image-model.heads", im.Heads, 1, MaxHeads)
	p.between("image-model.ff", im.FF, 1, MaxWidth)
	p.dropout("image-model.dropout", im.Dropout)
	p.divides("image-model.heads", im.Heads, "hidden", im.Hidden)

	p.between("model.layers", jm.Layers, 0, MaxLayers)
	p.between("model.heads", jm.Heads, 1, MaxHeads)
	p.between("model.ff", jm.FF, 1, MaxWidth)
	p.dropout("model.dropout", jm.Dropout)
	p.divides("model.heads", jm.Heads, "embed-size", jm.EmbedSize)
}

// validateText checks the text encoder of TERAN, TERN and MEMBER
// (newTextEncoder).
func (c Config) validateText(p *problems) {
	tm := c.TextModel
	p.oneOf("text-model.name", tm.Name, textEncoders)
	if tm.Pretrain != "" && tm.Name != "bert" {
		p.bad("text-model.pretrain", "a pretrained BERT directory goes with name bert, not %q", tm.Name)
	}
	p.dropout("text-model.dropout", tm.Dropout)
	switch tm.Name {
	case "bert":
		p.between("text-model.word-dim", tm.WordDim, 1, MaxWidth)
		p.between("text-model.extraction-hidden-layer", tm.ExtractionHiddenLayer, 1, MaxLayers)
		if tm.Pretrain == "" { // a pretrained BERT brings its own sizes
			p.between("text-model.heads", tm.Heads, 1, MaxHeads)
			p.between("text-model.ff", tm.FF, 1, MaxWidth)
			p.between("text-model.max-positions", tm.MaxPositions, 2, MaxVocab)
			p.divides("text-model.heads", tm.Heads, "word-dim", tm.WordDim)
			switch {
			case c.MaxCaptionTokens == 0 && tm.MaxPositions > 0:
				p.bad("max-caption-tokens", "0 (no limit) lets captions run past BERT's %d positions (text-model.max-positions): give a length of at most %d", tm.MaxPositions, tm.MaxPositions)
			case c.MaxCaptionTokens > tm.MaxPositions:
				p.bad("max-caption-tokens", "%d: BERT has %d positions (text-model.max-positions), so captions must be cut at most there", c.MaxCaptionTokens, tm.MaxPositions)
			}
		}
	case "gru", "lstm":
		p.between("text-model.layers", tm.Layers, 0, MaxLayers)
		p.between("text-model.embed-dim", tm.EmbedDim, 1, MaxWidth)
		p.between("text-model.hidden", tm.Hidden, 1, MaxWidth)
	case "transformer":
		p.between("text-model.layers", tm.Layers, 0, MaxLayers)
		p.between("text-model.embed-dim", tm.EmbedDim, 1, MaxWidth)
		p.between("text-model.heads", tm.Heads, 0, MaxHeads)
		p.between("text-model.ff", tm.FF, 0, MaxWidth)
		p.divides("text-model.heads", tm.Heads, "embed-dim", tm.EmbedDim)
	}
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

func (p *problems) between(key string, v, lo, hi int) {
	if v < lo || v > hi {
		p.bad(key, "%d is out of range [%d, %d]", v, lo, hi)
	}
}

func (p *problems) dropout(key string, v float32) {
	if !(v >= 0 && v < 1) { // also catches NaN
		p.bad(key, "%v is not a probability in [0, 1)", v)
	}
}

func (p *problems) divides(key string, heads int, widthKey string, width int) {
	if heads > 0 && width%heads != 0 {
		p.bad(key, "%d does not divide %s %d", heads, widthKey, width)
	}
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("invalid config: %s", strings.Join(p, "; "))
}

// NumParams returns the number of scalar parameters the model of c has,
// computed from the sizes alone (nothing is allocated): what the memory
// estimate of a training run starts from. For a pretrained BERT it counts
// the sizes the config gives (a loaded model records the real ones). It is
// a float64 because nonsense sizes overflow an int; Validate bounds them.
func (c Config) NumParams() float64 {
	n := c.numParams()
	if c.ImageModel.FeatureNorm == "standardize" {
		n += 2 * float64(c.ImageModel.FeatDim) // the statistics
	}
	return n
}

// numParams is NumParams without the feature statistics.
func (c Config) numParams() float64 {
	f := func(v int) float64 { return float64(v) }
	linear := func(in, out float64) float64 { return in*out + out }
	// A post-norm transformer layer: attention (in-projection 3d x d and
	// out-projection), two feed-forward linears, two layer norms.
	layer := func(d, ff float64) float64 { return 4*d*d + 4*d + linear(d, ff) + linear(ff, d) + 4*d }
	im, jm := c.ImageModel, c.Model
	switch jm.Name {
	case "seam":
		return c.seamParams()
	case "vsepp":
		return c.vseppParams()
	case "member":
		return c.memberParams()
	}

	text, textOut := c.textParams()
	inDim := f(im.FeatDim)
	if im.PosEncoding == "concat-and-process" {
		inDim += 5
	}
	h, e := f(im.Hidden), f(jm.EmbedSize)
	n := linear(inDim, h) + linear(h, h) + f(im.TransformerLayers)*layer(h, f(im.FF))
	n += text + linear(h, e) + linear(textOut, e)
	finals := 2.0
	if jm.SharedTransformer {
		finals = 1
	}
	n += finals * f(jm.Layers) * layer(e, f(jm.FF))
	if jm.Name == "tern" {
		n += h // the learned I-CLS slot
	}
	return n
}

// textParams returns the parameter count of the text encoder of TERAN,
// TERN and MEMBER, and the width of its word vectors.
func (c Config) textParams() (text, textOut float64) {
	f := func(v int) float64 { return float64(v) }
	linear := func(in, out float64) float64 { return in*out + out }
	layer := func(d, ff float64) float64 { return 4*d*d + 4*d + linear(d, ff) + linear(ff, d) + 4*d }
	tm := c.TextModel
	switch tm.Name {
	case "bert":
		d := f(tm.WordDim)
		text = (f(tm.VocabSize)+f(tm.MaxPositions)+2)*d + 2*d + f(tm.ExtractionHiddenLayer)*layer(d, f(tm.FF))
		textOut = d
	case "gru", "lstm":
		g, dr := tm.Recurrent()
		gates, dirs := f(g), f(dr)
		h := f(tm.Hidden)
		text = f(tm.VocabSize) * f(tm.EmbedDim)
		for l := range max(tm.Layers, 1) {
			in := f(tm.EmbedDim)
			if l > 0 {
				in = h * dirs
			}
			text += dirs * (gates*h*in + gates*h*h + 2*gates*h)
		}
		textOut = h * dirs
	default: // transformer
		d := f(tm.EmbedDim)
		text = f(tm.VocabSize)*d + f(max(tm.Layers, 1))*layer(d, f(max(tm.FF, 1)))
		textOut = d
	}
	return text, textOut
}

// EmbeddingDim returns the width of the vectors the model of c encodes:
// model.embed-size, or twice that for MEMBER's comb space combined by
// similarity, whose vectors are the self- and cross-embeddings side by
// side.
func (c Config) EmbeddingDim() int {
	if c.Model.Name == "member" && c.Model.Space == "comb" && c.Model.Combination == "similarity" {
		return 2 * c.Model.EmbedSize
	}
	return c.Model.EmbedSize
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

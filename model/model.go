// Package model holds xmr's image-text matching models behind one small
// interface: TERAN (teran.go: fine-grained region-word alignment), TERN
// (tern.go: global I-CLS/T-CLS embeddings) and SEAM (seam.go:
// self-attentive caption embeddings against a global image feature, scored
// as order embeddings), MEMBER (member.go: self- and cross-embeddings,
// the latter enhanced by memory banks of the other modality's training
// items), the VSE++ baseline (vsepp.go: a GRU against a
// linear map of a global image feature), their encoders (BERT, recurrent
// and transformer text encoders), the scorings that compare encoded items
// (score.go: the autodiff pooling for training beside the fast kernel for
// inference), checkpoints that carry the model's config, and the import of
// official PyTorch checkpoints (official.go).
//
// Data flows through it in one direction:
//
//	region features --(EncodeImages)--> Embeddings --+
//	captions ---------(EncodeTexts)---> Embeddings --+--(ScoreMatrix, Scoring)--> similarities
//
// Training, evaluation, the demo and the index all call these functions.
// The package knows nothing of dataset files, training or metrics: it does
// not import data, train, optim or eval.
package model

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/tensor"
)

// Model is an image-text matching model: an image encoder and a text
// encoder into a common space, and the scoring it retrieves with.
//
// The Encode methods work on padded batches; with a tape they record for
// backpropagation (training), with a nil tape they run inference. Use the
// package functions EncodeImages and EncodeTexts to encode whole
// collections into Embeddings.
type Model interface {
	// Name is the model's name in the registry ("teran", "tern", "seam",
	// "vsepp", "member").
	Name() string
	// Config returns the config the model was built from (with the sizes
	// of a loaded BERT filled in).
	Config() Config
	// Tokenizer turns captions into token ids for EncodeTexts.
	Tokenizer() Tokenizer
	// Params lists every parameter once, with names following the official
	// state_dict.
	Params() []nn.Named
	// EncodeImages runs the image encoder on a batch.
	EncodeImages(tp *tensor.Tape, im Images) *Encoded
	// EncodeTexts runs the text encoder on a batch.
	EncodeTexts(tp *tensor.Tape, tx Texts) *Encoded
	// Scoring is how the model compares images and captions by default.
	Scoring() Scoring
}

// Images is a batch of images for an image encoder.
type Images struct {
	Feat  *tensor.Tensor // (B, R, FeatDim) region features
	Boxes *tensor.Tensor // (B, R, 5) box codes [x1, y1, x2, y2, area]; nil when unknown
	Valid *tensor.Tensor // (B, R) 1 = real region, 0 = padding; nil: all real
	// Items, when not nil, are the images' indices in the training split
	// (B): a training batch sets them for models with memory banks over
	// the training set (Memorizer: MEMBER writes the batch into its bank
	// when the step ends, and keeps an item's own matches out of its
	// responses). Inference and every other model leave them nil.
	Items []int
}

// Texts is a batch of tokenised captions for a text encoder.
type Texts struct {
	IDs     []int32        // (C, T) row-major token ids; position 0 is [CLS] / <start>
	Valid   *tensor.Tensor // (C, T) 1 = real token
	Align   *tensor.Tensor // (C, T) 1 = token that takes part in the alignment
	Words   []int32        // (C, T) caption word index of each token, -1 for specials and padding
	Lengths []int          // real tokens per caption
	// Items, when not nil, are the captions' indices in the training split
	// (C), as Images.Items.
	Items []int
}

// Encoded is the output of an encoder for a padded batch: vectors in the
// common space, L2-normalised.
type Encoded struct {
	// Vecs (N, L, E) are the region or word vectors; nil for a model that
	// encodes global vectors only (SEAM).
	Vecs *tensor.Tensor
	Mask *tensor.Tensor // (N, L) 1 = vector that takes part in the alignment; nil with Vecs
	// Pos (N*L) says where each vector came from: the data's region index
	// (slot - 1) or the caption word index; -1 where Mask is 0.
	Pos []int32
	// Global (N, E) is the item's global vector: TERN's I-CLS/T-CLS, TERAN's
	// normalised mean of its vectors, SEAM's non-negative embedding.
	Global *tensor.Tensor
	// Penalty, when not nil, is a scalar that the training objective adds
	// to its loss as it is: a regulariser of this encoding, weighted by the
	// model's config (SEAM's attention penalty, lambda times the sum over
	// the batch of ||A^T A - I||_F^2). An encoder computes it only when it
	// records on a tape; inference leaves it nil.
	Penalty *tensor.Tensor
	// Spaces, when not nil, are embeddings (N, E) that the matching loss
	// trains each with its own hinge loss on their cosine, in place of
	// Global: MEMBER's self- and cross-embeddings (its eq. 13), of which
	// Global is the combination it retrieves with. Only an encoder that
	// records on a tape sets them.
	Spaces []*tensor.Tensor
	// aux is what a model's PairLoss reads of this encoding (MEMBER: the
	// image self- and cross-features that its decoder generates from).
	aux any
}

// PairLosser is a model whose training loss has a term over the batch's
// matching pairs that needs both modalities: MEMBER generates each caption
// from its image's features. train adds PairLoss to the objective.
type PairLosser interface {
	// PairLoss returns a scalar for a batch of matching pairs (image i
	// goes with caption i): img is the image encoding recorded on tp, tx
	// the captions. It is weighted by the model's config.
	PairLoss(tp *tensor.Tape, img *Encoded, tx Texts) *tensor.Tensor
}

// Memorizer is a model with memory banks over its training set (MEMBER).
// train calls BuildMemory once before the first step of a new run; the
// training steps then refresh the banks through Images.Items and
// Texts.Items, and checkpoints carry them (Stateful).
type Memorizer interface {
	// BuildMemory encodes the training images and captions into the
	// banks; captionImage[c] is the image of caption c.
	BuildMemory(ctx context.Context, images ImageSource, captions []string, captionImage []int) error
	// EndStep ends a training step. The step's encodes (batches with
	// Items) only stage their writes into the banks, so that its image
	// and text encoders, which may run side by side, both read the banks
	// as they were before it; when ok, EndStep applies the writes, else
	// it drops them.
	EndStep(ok bool)
}

// Stateful is a model with state beside its parameters that checkpoints
// carry: tensors that are not trained and whose shapes come from the data
// (MEMBER's memory banks). Save stores State; Load calls LoadState with the
// checkpoint's tensors.
type Stateful interface {
	// State lists the state tensors with their checkpoint names.
	State() []nn.Named
	// LoadState restores the state from the tensors of a checkpoint:
	// tensor returns the data and shape of a name, ok false when absent.
	LoadState(tensor func(name string) (data []float32, shape []int, ok bool, err error)) error
}

// builder makes a model of one kind with fresh weights.
type builder func(cfg Config, tok Tokenizer, seed uint64) (Model, error)

// registry holds every model by name; one file per model adds its entry.
var registry = map[string]builder{
	"teran":  newTERAN,
	"tern":   newTERN,
	"seam":   newSEAM,
	"vsepp":  newVSEPP,
	"member": newMEMBER,
}

// Names lists the registered models, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New builds the model that cfg.Model.Name names, with fresh weights drawn
// from seed (a pretrained BERT is read when cfg.TextModel.Pretrain is set),
// over the tokenizer tok, whose vocabulary sizes the text embeddings.
func New(cfg Config, tok Tokenizer, seed uint64) (Model, error) {
	build, ok := registry[cfg.Model.Name]
	if !ok {
		return nil, fmt.Errorf("unknown model %q (want %s)", cfg.Model.Name, strings.Join(Names(), ", "))
	}
	if tok == nil {
		return nil, fmt.Errorf("model %s: no tokenizer", cfg.Model.Name)
	}
	if cfg.TextModel.Pretrain == "" {
		cfg.TextModel.VocabSize = tok.Vocab().Len()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := build(cfg, tok, seed)
	if err != nil || cfg.TextModel.Pretrain == "" {
		return m, err
	}
	// The sizes of the loaded BERT must agree with the rest (the caption
	// length with its positions), as they must when the checkpoint is read.
	loaded := m.Config()
	loaded.TextModel.Pretrain = ""
	if err := loaded.Validate(); err != nil {
		return nil, fmt.Errorf("with the pretrained BERT of %s: %w", cfg.TextModel.Pretrain, err)
	}
	return m, nil
}

// IsBERTParam reports whether a parameter name belongs to a BERT text
// encoder (for its separate learning rate).
func IsBERTParam(name string) bool {
	return strings.HasPrefix(name, bertPrefix+".")
}

// Trainable returns the parameters of m that receive gradients.
func Trainable(m Model) []*tensor.Tensor {
	var out []*tensor.Tensor
	for _, p := range m.Params() {
		if p.T.RequiresGrad() {
			out = append(out, p.T)
		}
	}
	return out
}

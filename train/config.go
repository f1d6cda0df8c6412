package train

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/xmr-project/xmr/configs"
	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/internal/infile"
	"github.com/xmr-project/xmr/model"
)

// Config is a whole training configuration, as in the official TERAN/TERN
// YAML files: the model's sections (text-model, image-model, model), the
// data, and the optimisation.
type Config struct {
	Dataset    DatasetConfig     `yaml:"dataset"`
	TextModel  model.TextConfig  `yaml:"text-model"`
	ImageModel model.ImageConfig `yaml:"image-model"`
	Model      model.JointConfig `yaml:"model"`
	Training   TrainingConfig    `yaml:"training"`
}

// DatasetConfig names the data; --data on the command line overrides Data.
type DatasetConfig struct {
	Name string `yaml:"name"`
	Data string `yaml:"data"`
	// MaxCaptionTokens truncates captions (WordPiece tokens incl.
	// [CLS]/[SEP]); it becomes the model's max-caption-tokens.
	MaxCaptionTokens int `yaml:"max-caption-tokens"`
}

// LossType selects the training objective.
type LossType string

// The objectives of the papers.
const (
	// LossAlignment is TERAN's: the hinge loss on the alignment score.
	LossAlignment LossType = "alignment"
	// LossMatching is TERN's and SEAM's: the hinge loss on the model's
	// score of global vectors (TERN's CLS cosine; SEAM's order similarity
	// or cosine, model.similarity).
	LossMatching LossType = "matching"
	// LossMatchingAlignment is TERN w. Align's: the matching and alignment
	// hinge losses, weighted by learned uncertainties (Kendall et al.).
	LossMatchingAlignment LossType = "matching+alignment"
)

var lossTypes = []LossType{LossAlignment, LossMatching, LossMatchingAlignment}

// UnmarshalText accepts one of the loss types; anything else is an error
// listing them.
func (l *LossType) UnmarshalText(b []byte) error {
	for _, v := range lossTypes {
		if string(b) == string(v) {
			*l = v
			return nil
		}
	}
	names := make([]string, len(lossTypes))
	for i, v := range lossTypes {
		names[i] = string(v)
	}
	return fmt.Errorf("unknown loss type %q (want %s)", b, strings.Join(names, ", "))
}

// TrainingConfig holds the optimisation settings.
type TrainingConfig struct {
	LR float64 `yaml:"lr"`
	// Beta1 is Adam's first-moment decay (0: PyTorch's 0.9; MEMBER's paper
	// uses 0.5).
	Beta1 float64 `yaml:"beta1,omitempty"`
	// BERTLR is the learning rate of the BERT parameters (0: same as LR).
	BERTLR float64 `yaml:"bert-lr"`
	// VisionLR is the learning rate of an image network trained with the
	// model, the parameters named with VisionPrefix (0: same as LR).
	VisionLR float64 `yaml:"vision-lr,omitempty"`
	// VisionCut fine-tunes the detector with the model from this cut
	// (detect.Cuts: "s32" or "s16"; empty: the features as extracted):
	// the data set must be xmr extract's with --taps of that cut, and the
	// checkpoints carry the part's weights (package finetune).
	VisionCut    string  `yaml:"vision-cut,omitempty"`
	GradClip     float64 `yaml:"grad-clip"`
	MaxViolation bool    `yaml:"max-violation"`
	// MaxViolationAfter trains with the sum over negatives for this many
	// iterations before switching to the hardest negative (as VSE-infinity's
	// warm-up): from random weights the hardest-negative loss tends to
	// collapse every embedding onto one point. 0 uses MaxViolation from the
	// start, as the papers do from pretrained encoders.
	MaxViolationAfter int      `yaml:"max-violation-after"`
	LossType          LossType `yaml:"loss-type"`
	// AlignmentMode is the alignment pooling of the alignment loss, and
	// TERAN's score: MrSw, MwSr, Symm or MrAvgw.
	AlignmentMode model.Scoring `yaml:"alignment-mode"`
	Margin        float32       `yaml:"margin"`
	// Contrastive is the loss over a batch's similarities: "hinge" (or
	// empty: VSE++'s triplet hinge with Margin and MaxViolation, the
	// papers') or "infonce" (the symmetric softmax cross-entropy of
	// contrastive learning at Temperature, which learns from random
	// weights where the hinge's hardest negative collapses; see
	// InfoNCELoss).
	Contrastive string `yaml:"contrastive,omitempty"`
	// Temperature divides the similarities before InfoNCE's softmaxes.
	Temperature float64 `yaml:"temperature,omitempty"`
	BatchSize   int     `yaml:"bs"`
	Epochs      int     `yaml:"epochs"`
	// Scheduler "steplr" multiplies the lr by Gamma every StepSize epochs
	// (or iterations, see StepUnit); "none" (or empty) keeps it constant.
	Scheduler string  `yaml:"scheduler"`
	Gamma     float64 `yaml:"gamma"`
	StepSize  int     `yaml:"step-size"`
	// StepUnit is what StepSize counts: "epochs" (empty: the official
	// configs' unit) or "iterations". An epoch of a small data set is a
	// handful of iterations, so a decay every few epochs takes the lr to
	// nothing within the first minute there; iterations decay at the same
	// point of the optimisation whatever the size of the data.
	StepUnit string `yaml:"step-unit,omitempty"`
	// Patience stops the run early after this many validations in a row
	// without a better validation rsum (0: never); the best checkpoint
	// (best-rsum.safetensors) is kept.
	Patience int `yaml:"patience,omitempty"`
	// WarmupPeriod is the number of linear warm-up iterations (0: none).
	WarmupPeriod int `yaml:"warmup-period"`
	// ValStep validates every ValStep iterations (and after every epoch).
	ValStep int    `yaml:"val-step"`
	Seed    uint64 `yaml:"seed"`
	// EMADecay, above 0, keeps an exponential moving average of the
	// trained weights (Polyak averaging) with this decay per iteration,
	// ramped up over the first iterations as min(EMADecay, (1+t)/(10+t));
	// validation, early stopping and the best checkpoints use the averaged
	// weights, and last.safetensors keeps both. Model state that is not a
	// trained weight (MEMBER's memory banks) is not averaged. 0: no
	// average.
	EMADecay float64 `yaml:"ema-decay,omitempty"`
	// RegionDrop, above 0, masks each region of a training image with
	// this probability at every step, at least one region kept: the
	// regions a caption's words can align with change from step to step.
	// Validation and inference see every region. 0: none.
	RegionDrop float64 `yaml:"region-drop,omitempty"`
	// WordDrop, above 0, drops each word of a training caption with this
	// probability at every step, before tokenising, at least one word
	// kept. 0: none.
	WordDrop float64 `yaml:"word-drop,omitempty"`
	// AugmentDraw, above 0, trains from a split extracted with xmr
	// extract --augment N as from views of its photos: an epoch goes over
	// the photos' captions, and at every step each caption's image is, with
	// this probability, one of its photo's N augmented copies drawn at
	// random, else the photo. 0: each copy is a training image of its own.
	AugmentDraw float64 `yaml:"augment-draw,omitempty"`
}

// Default returns TERAN MrSw at the published size, with the paper's
// optimisation settings (those of the official TERAN configs).
func Default() Config {
	mc := model.Default()
	return Config{
		Dataset:    DatasetConfig{Name: "coco", MaxCaptionTokens: mc.MaxCaptionTokens},
		TextModel:  mc.TextModel,
		ImageModel: mc.ImageModel,
		Model:      mc.Model,
		Training: TrainingConfig{LR: 1e-5, GradClip: 2.0, MaxViolation: true, LossType: LossAlignment, AlignmentMode: model.MrSw,
			Margin: 0.2, BatchSize: 40, Epochs: 30, Scheduler: "steplr", Gamma: 0.1, StepSize: 20, ValStep: 500, Seed: 1},
	}
}

// ModelConfig returns the model part of the config: what a checkpoint
// stores to rebuild the model.
func (c Config) ModelConfig() model.Config {
	return model.Config{
		TextModel:        c.TextModel,
		ImageModel:       c.ImageModel,
		Model:            c.Model,
		Pooling:          c.Training.AlignmentMode,
		MaxCaptionTokens: c.Dataset.MaxCaptionTokens,
	}
}

// LoadConfig reads a YAML config file, or when no such file exists, the
// built-in config of that name (see package configs: "teran-mrsw-small");
// keys it does not set keep Default's values. Unknown keys are an error
// naming the file and line.
func LoadConfig(path string) (Config, error) {
	b, err := infile.ReadFile(path)
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

// ParseConfig parses YAML text over Default and validates the result. Text
// without a single key (empty, blank or only comments) is an error: a config
// file that says nothing is a mistake, not a request for every default.
func ParseConfig(b []byte) (Config, error) {
	empty, err := configs.Empty(b)
	if err != nil {
		return Config{}, err
	}
	if empty {
		return Config{}, errors.New("the config is empty: give at least model.name (start from configs/teran-mrsw-small.yaml, or name a built-in config: " + strings.Join(configs.Names(), ", ") + ")")
	}
	return configs.Parse(b, Default())
}

// Marshal returns the config as YAML (stored in run directories and
// checkpoints).
func (c Config) Marshal() string { return configs.Marshal(c) }

// Validate checks every field: the model part (model.Config.Validate),
// then the dataset and training settings, names against the valid values
// (listed in the error) and numbers against their ranges. The error says
// which key is wrong; several problems are joined with "; ".
func (c Config) Validate() error {
	var errs []string
	if err := c.ModelConfig().Validate(); err != nil {
		// The model calls the pooling "pooling"; this file calls it
		// training.alignment-mode.
		msg := strings.TrimPrefix(err.Error(), "invalid config: ")
		msg = strings.ReplaceAll(msg, "pooling:", "training.alignment-mode:")
		msg = strings.ReplaceAll(msg, "max-caption-tokens:", "dataset.max-caption-tokens:")
		errs = append(errs, msg)
	}
	bad := func(key, format string, args ...any) {
		errs = append(errs, key+": "+fmt.Sprintf(format, args...))
	}
	between := func(key string, v, lo, hi int) {
		if v < lo || v > hi {
			bad(key, "%d is out of range [%d, %d]", v, lo, hi)
		}
	}
	// interval checks that v is a number in the interval from lo to hi,
	// each end excluded when its open flag is set.
	interval := func(key string, v, lo, hi float64, loOpen, hiOpen bool) {
		if math.IsNaN(v) || v < lo || v > hi || (loOpen && v == lo) || (hiOpen && v == hi) {
			lb, rb := "[", "]"
			if loOpen {
				lb = "("
			}
			if hiOpen {
				rb = ")"
			}
			bad(key, "%v is out of range %s%g, %g%s", v, lb, lo, hi, rb)
		}
	}
	if c.Dataset.Name != "" && !validName(c.Dataset.Name) {
		bad("dataset.name", "%q: want a short label of letters, digits, '.', '_' or '-' (coco, f30k, synth)", c.Dataset.Name)
	}
	if c.Dataset.MaxCaptionTokens == 0 {
		bad("dataset.max-caption-tokens", "0: training needs a caption length (40 in the papers)")
	}
	t := c.Training
	if !slices.Contains(lossTypes, t.LossType) {
		bad("training.loss-type", "%q is not one of alignment, matching, matching+alignment", t.LossType)
	} else if c.Model.Name == "teran" && t.LossType != LossAlignment {
		bad("training.loss-type", "teran trains with the alignment loss, not %q", t.LossType)
	}
	if (c.Model.Name == "seam" || c.Model.Name == "vsepp" || c.Model.Name == "member") && t.LossType != LossMatching {
		bad("training.loss-type", "%s trains with the matching loss on its similarity, not %q", c.Model.Name, t.LossType)
	}
	if !slices.Contains(schedulers, t.Scheduler) {
		bad("training.scheduler", "%q is not one of %s", t.Scheduler, strings.Join(schedulers[1:], ", "))
	}
	interval("training.lr", t.LR, 0, 10, true, false)
	interval("training.bert-lr", t.BERTLR, 0, 10, false, false)
	interval("training.vision-lr", t.VisionLR, 0, 10, false, false)
	if t.VisionCut != "" {
		if _, err := detect.CutNamed(t.VisionCut); err != nil {
			bad("training.vision-cut", "%v", err)
		}
	}
	if t.Beta1 != 0 {
		interval("training.beta1", t.Beta1, 0, 1, true, true)
	}
	interval("training.grad-clip", t.GradClip, 0, 1e6, false, false)
	interval("training.margin", float64(t.Margin), 0, 100, false, false)
	between("training.bs", t.BatchSize, 2, MaxBatchSize)
	between("training.epochs", t.Epochs, 1, 1_000_000)
	between("training.val-step", t.ValStep, 0, math.MaxInt32)
	between("training.warmup-period", t.WarmupPeriod, 0, math.MaxInt32)
	between("training.max-violation-after", t.MaxViolationAfter, 0, math.MaxInt32)
	if t.Scheduler == "steplr" {
		between("training.step-size", t.StepSize, 0, math.MaxInt32)
		interval("training.gamma", t.Gamma, 0, 1, true, false)
	}
	if !slices.Contains(stepUnits, t.StepUnit) {
		bad("training.step-unit", "%q is not one of %s", t.StepUnit, strings.Join(stepUnits[1:], ", "))
	}
	between("training.patience", t.Patience, 0, math.MaxInt32)
	switch {
	case !slices.Contains(contrastives, t.Contrastive):
		bad("training.contrastive", "%q is not one of %s", t.Contrastive, strings.Join(contrastives[1:], ", "))
	case t.Contrastive == ContrastiveInfoNCE:
		interval("training.temperature", t.Temperature, 0, 100, true, false)
		if t.MaxViolation {
			bad("training.max-violation", "infonce weighs every negative by its softmax; the hardest-negative hinge does not apply (set it false)")
		}
	case t.Temperature != 0:
		bad("training.temperature", "%v: only training.contrastive infonce has a temperature", t.Temperature)
	}
	if t.EMADecay != 0 {
		interval("training.ema-decay", t.EMADecay, 0, 1, true, true)
	}
	interval("training.region-drop", t.RegionDrop, 0, 1, false, true)
	interval("training.word-drop", t.WordDrop, 0, 1, false, true)
	interval("training.augment-draw", t.AugmentDraw, 0, 1, false, false)
	if len(errs) > 0 {
		return fmt.Errorf("invalid config: %s", strings.Join(errs, "; "))
	}
	return nil
}

// The values of training.contrastive.
const (
	ContrastiveHinge   = "hinge"
	ContrastiveInfoNCE = "infonce"
)

// contrastives lists the valid training.contrastive values; "" means hinge.
var contrastives = []string{"", ContrastiveHinge, ContrastiveInfoNCE}

// MaxBatchSize bounds training.bs.
const MaxBatchSize = 1 << 16

// schedulers lists the valid training.scheduler values; "" means none.
var schedulers = []string{"", "none", "steplr"}

// stepUnits lists the valid training.step-unit values; "" means epochs.
var stepUnits = []string{"", "epochs", "iterations"}

// validName reports whether s is a short label: letters, digits, '.', '_'
// and '-'.
func validName(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

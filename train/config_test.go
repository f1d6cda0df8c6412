package train

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/data"

	"github.com/xmr-project/xmr/configs"
	"github.com/xmr-project/xmr/model"
)

// TestBuiltinConfigs parses every shipped config and builds the small ones.
func TestBuiltinConfigs(t *testing.T) {
	names := configs.Names()
	if len(names) < 20 {
		t.Fatalf("only %d built-in configs", len(names))
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			cfg, err := LoadConfig(name)
			if err != nil {
				t.Fatal(err)
			}
			mc := cfg.ModelConfig()
			if mc.Pooling != cfg.Training.AlignmentMode || mc.MaxCaptionTokens != cfg.Dataset.MaxCaptionTokens {
				t.Fatalf("model config pooling %v, max tokens %d; training says %v, dataset %d", mc.Pooling, mc.MaxCaptionTokens, cfg.Training.AlignmentMode, cfg.Dataset.MaxCaptionTokens)
			}
			if strings.HasSuffix(name, "-small") || strings.HasSuffix(name, "-photos") {
				mc.TextModel.Pretrain = ""
				tok, err := model.BuildTokenizer(mc, []string{"a red circle"})
				if err != nil {
					t.Fatal(err)
				}
				m, err := model.New(mc, tok, 1)
				if err != nil {
					t.Fatal(err)
				}
				if m.Name() != cfg.Model.Name {
					t.Fatalf("built %s for %s", m.Name(), cfg.Model.Name)
				}
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"model:\n  name: bert\n", "model.name: \"bert\" is not one of member, seam, teran, tern, vsepp"},
		{"model:\n  name: member\n  pool: max\n  fusion: late\n  responses: 5\n  usage-ratio: 1\n  space: comb\n  combination: similarity\n", "training.loss-type: member trains with the matching loss"},
		{"training:\n  step-unit: weeks\n", "training.step-unit: \"weeks\" is not one of epochs, iterations"},
		{"training:\n  beta1: 1\n", "training.beta1: 1 is out of range (0, 1)"},
		{"training:\n  beta1: -0.5\n", "training.beta1: -0.5 is out of range (0, 1)"},
		{"training:\n  patience: -1\n", "training.patience: -1 is out of range [0,"},
		{"training:\n  ema-decay: 1\n", "training.ema-decay: 1 is out of range (0, 1)"},
		{"training:\n  ema-decay: -0.9\n", "training.ema-decay: -0.9 is out of range (0, 1)"},
		{"training:\n  region-drop: 1\n", "training.region-drop: 1 is out of range [0, 1)"},
		{"training:\n  word-drop: -0.1\n", "training.word-drop: -0.1 is out of range [0, 1)"},
		{"training:\n  augment-draw: 1.5\n", "training.augment-draw: 1.5 is out of range [0, 1]"},
		{"model:\n  name: vsepp\n  embed-size: 64\ntext-model:\n  name: gru\n  hidden: 32\nimage-model:\n  name: global\ntraining:\n  loss-type: matching\n", "text-model.hidden: vsepp's GRU state is the caption embedding: 32 must equal model.embed-size 64"},
		{"model:\n  name: vsepp\ntext-model:\n  name: bert\nimage-model:\n  name: global\ntraining:\n  loss-type: matching\n", "text-model.name: \"bert\" is not one of gru"},
		{"model:\n  name: seam\n  similarity: order\ntext-model:\n  name: seam-e\n  hops: 2\n  attention-units: 8\nimage-model:\n  name: global\n", "seam trains with the matching loss"},
		{"training:\n  alignment-mode: MaxMax\n", "unknown scoring \"MaxMax\" (want global, order, MrSw, MwSr, Symm, MrAvgw)"},
		{"training:\n  alignment-mode: global\n", "training.alignment-mode: \"global\" is not an alignment pooling"},
		{"training:\n  loss-type: triplet\n", "unknown loss type \"triplet\" (want alignment, matching, matching+alignment)"},
		{"training:\n  loss-type: matching\n", "teran trains with the alignment loss"},
		{"training:\n  scheduler: cosine\n", "training.scheduler: \"cosine\" is not one of none, steplr"},
		{"training:\n  scheduler: cosinex\n", "training.scheduler: \"cosinex\" is not one of none, steplr"},
		{"training:\n  bs: 0\n", "training.bs: 0 is out of range [2, 65536]"},
		{"training:\n  bs: 1\n", "training.bs: 1 is out of range [2,"},
		{"training:\n  lr: .nan\n", "training.lr: NaN is out of range (0, 10]"},
		{"training:\n  lr: 0\n", "training.lr: 0 is out of range (0, 10]"},
		{"training:\n  margin: -1\n", "training.margin: -1 is out of range [0, 100]"},
		{"training:\n  gamma: 0\n", "training.gamma: 0 is out of range (0, 1]"},
		{"training:\n  epochs: 0\n", "training.epochs: 0 is out of range"},
		{"training:\n  val-step: -5\n", "training.val-step: -5 is out of range"},
		{"training:\n  grad-clip: .inf\n", "training.grad-clip: +Inf is out of range"},
		{"model:\n  dropout: 1.5\n", "model.dropout: 1.5 is not a probability in [0, 1)"},
		{"image-model:\n  transformer-layers: -1\n", "image-model.transformer-layers: -1 is out of range [0, 256]"},
		{"model:\n  layers: 100000\n", "model.layers: 100000 is out of range [0, 256]"},
		{"model:\n  embed-size: 2000000000\n", "model.embed-size: 2000000000 is out of range [1, 65536]"},
		{"dataset:\n  max-caption-tokens: 0\n", "dataset.max-caption-tokens: 0: training needs a caption length"},
		{"dataset:\n  name: \"../x y\"\n", "dataset.name"},
		{"image-model:\n  name: resnet\n", "image-model.name: \"resnet\" is not one of bottomup"},
		{"", "the config is empty"},
		{"\n# only a comment\n", "the config is empty"},
		{"~\n", "the config is empty"},
		{"{}\n", "the config is empty"},
		{"model: [1\n", "yaml"},
		{"dataset:\n  max-caption-tokens: 1\n", "dataset.max-caption-tokens"},
		{"model:\n  embed-size: 30\n  heads: 4\n", "does not divide"},
		{"model:\n  nme: teran\n", "field nme not found"}, // unknown key, with its line
	}
	for _, c := range cases {
		_, err := ParseConfig([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one mentioning %q", c.yaml, err, c.want)
		}
	}
}

// TestOpenIntervalOneMessage: a value above an open interval's upper end
// is reported once, as out of the interval.
func TestOpenIntervalOneMessage(t *testing.T) {
	for _, key := range []string{"beta1", "ema-decay"} {
		_, err := ParseConfig([]byte("training:\n  " + key + ": 1.5\n"))
		want := "invalid config: training." + key + ": 1.5 is out of range (0, 1)"
		if err == nil || err.Error() != want {
			t.Errorf("%s 1.5: error %v, want exactly %q", key, err, want)
		}
	}
}

// TestEmptyConfigFile refuses a config file without a key, naming it.
func TestEmptyConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(path, []byte("# nothing yet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "the config is empty") {
		t.Fatalf("LoadConfig of an empty file: %v", err)
	}
}

// TestMemoryEstimate checks the estimate's scale on the paper's config and
// that nonsense sizes give huge numbers, never an overflow or a panic.
func TestMemoryEstimate(t *testing.T) {
	paper := EstimateMemory(Default(), 36)
	if gib := paper.Total() / (1 << 30); gib < 2 || gib > 40 {
		t.Errorf("TERAN at paper size, bs 40: %s; want between 2 and 40 GiB", paper)
	}
	if paper.Optimizer != 3*paper.Weights {
		t.Errorf("gradients and Adam moments %v, want 3 x the weights %v", paper.Optimizer, paper.Weights)
	}
	avg := Default()
	avg.Training.EMADecay = 0.95
	if e := EstimateMemory(avg, 36); e.Average != e.Weights || math.Abs(e.Total()-paper.Total()-e.Weights) > 1e-9*paper.Total() || !strings.Contains(e.String(), "moving average of the weights") {
		t.Errorf("with ema-decay: %s; want the average, as large as the weights, counted and named", e)
	}
	small, err := LoadConfig("teran-mrsw-small")
	if err != nil {
		t.Fatal(err)
	}
	if s := EstimateMemory(small, 36); s.Total() > paper.Total()/4 || s.Total() < 1<<20 {
		t.Errorf("small config: %s", s)
	}
	huge := Default()
	huge.Model.EmbedSize, huge.Model.Layers = 2_000_000_000, 100000
	if h := EstimateMemory(huge, 36).Total(); !(h > 1e20) || math.IsInf(h, 0) {
		t.Errorf("huge config: %g bytes", h)
	}
	bigBatch := Default()
	bigBatch.Training.BatchSize = 4000
	if EstimateMemory(bigBatch, 36).Activations < 100*paper.Activations {
		t.Error("activations do not grow with the square of the batch size (the alignment of every pair)")
	}
}

// TestRunRefusesWhatCannotFit runs a config that needs more memory than a
// (pretended) machine has: it is refused before the model is allocated,
// with the estimate and the machine's memory.
func TestRunRefusesWhatCannotFit(t *testing.T) {
	dir := testWorld(t)
	defer func(f func() (Memory, bool)) { systemMemory = f }(systemMemory)
	systemMemory = func() (Memory, bool) { return Memory{Available: 1 << 30, Total: 2 << 30}, true }
	cfg := tinyConfig(t, "teran-mrsw-small.yaml")
	cfg.Model.EmbedSize, cfg.Model.FF, cfg.Model.Layers = 8192, 32768, 64
	_, err := Run(context.Background(), Options{Config: cfg, Data: data.Source{Path: dir}, Out: t.TempDir(), MaxIters: 1})
	for _, w := range []string{"the config needs about", "GiB", "parameters", "activations of a batch of 32 with 12 regions", "this machine has 1.0 GiB available (2.0 GiB in all)"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
}

package train

import (
	"strings"
	"testing"

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
			if strings.HasSuffix(name, "-small") {
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
		{"model:\n  name: bert\n", "model.name: \"bert\" is not one of seam, teran, tern"},
		{"model:\n  name: seam\n  similarity: order\ntext-model:\n  name: seam-e\n  hops: 2\n  attention-units: 8\nimage-model:\n  name: global\n", "seam trains with the matching loss"},
		{"training:\n  alignment-mode: MaxMax\n", "unknown scoring \"MaxMax\" (want global, order, MrSw, MwSr, Symm, MrAvgw)"},
		{"training:\n  alignment-mode: global\n", "training.alignment-mode: \"global\" is not an alignment pooling"},
		{"training:\n  loss-type: triplet\n", "unknown loss type \"triplet\" (want alignment, matching, matching+alignment)"},
		{"training:\n  loss-type: matching\n", "teran trains with the alignment loss"},
		{"training:\n  scheduler: cosine\n", "training.scheduler: \"cosine\" is not one of steplr, none"},
		{"training:\n  bs: 0\n", "training.bs: must be positive"},
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

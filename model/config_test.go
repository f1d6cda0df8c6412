package model

import (
	"strings"
	"testing"

	"github.com/xmr-project/xmr/configs"
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
			if strings.HasSuffix(name, "-small") {
				cfg.TextModel.Pretrain = ""
				if _, err := NewWithTokenizer(cfg, testTokenizer(t, cfg)); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"model:\n  name: bert\n", "model.name"},
		{"training:\n  alignment-mode: MaxMax\n", "alignment-mode"},
		{"model:\n  embed-size: 30\n  heads: 4\n", "does not divide"},
		{"model:\n  nme: teran\n", "nme"}, // unknown key, with its line
	}
	for _, c := range cases {
		_, err := ParseConfig([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one mentioning %q", c.yaml, err, c.want)
		}
	}
}

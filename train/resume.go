package train

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/configs"
)

// storedRun reads the training config and the loop state that f, a run's
// last.safetensors, carries.
func storedRun(f *checkpoint.File) (Config, state, error) {
	md := f.Metadata()
	var st state
	if err := json.Unmarshal([]byte(md[metaState]), &st); err != nil {
		return Config{}, st, fmt.Errorf("%s: %s: %w", f.Path(), metaState, err)
	}
	stored := md[metaConfig]
	if stored == "" {
		stored = md["config"] // checkpoints of the first format
	}
	cfg, err := ParseConfig([]byte(stored))
	if err != nil {
		return Config{}, st, fmt.Errorf("%s: stored training config: %w", f.Path(), err)
	}
	return cfg, st, nil
}

// storedConfig reads the training config of the run in out from its
// last.safetensors, without loading the weights.
func storedConfig(out string) (Config, error) {
	f, err := checkpoint.Open(filepath.Join(out, "last.safetensors"))
	if err != nil {
		return Config{}, err
	}
	defer f.Close()
	cfg, _, err := storedRun(f)
	return cfg, err
}

// checkSameConfig refuses to resume the run in out, trained with stored,
// when the caller explicitly gave another config (name, parsed as given):
// a resumed run keeps the config that built its weights, so a different
// one would be silently ignored.
func checkSameConfig(name string, given, stored Config, out string) error {
	diff := configDiff(given, stored)
	if len(diff) == 0 {
		return nil
	}
	was, same := "another config", "; see "+filepath.Join(out, "config.yaml")
	if names := builtinNames(stored); len(names) > 0 {
		was, same = names[0], ""
		if len(names) > 1 {
			same = "; the same as " + strings.Join(names[1:], ", ")
		}
	}
	const most = 4
	keys := strings.Join(diff[:min(len(diff), most)], ", ")
	if len(diff) > most {
		keys += fmt.Sprintf(" and %d more", len(diff)-most)
	}
	return fmt.Errorf("--config %s: the run in %s was trained with %s (model %s%s; they differ in %s); --resume continues a run as it is: drop --config, or train into a new --out",
		name, out, was, stored.Model.Name, same, keys)
}

// configDiff returns the keys ("model.name") in which given differs from
// stored, the config of a run, leaving out what a run sets itself: the data
// path (--data), image-model.feat-dim (the data's feature width), the
// vocabulary size (from the captions) and, with a pretrained BERT, the
// text model's sizes (from its config.json).
func configDiff(given, stored Config) []string {
	given.Dataset.Data = stored.Dataset.Data
	given.ImageModel.FeatDim = stored.ImageModel.FeatDim
	given.TextModel.VocabSize = stored.TextModel.VocabSize
	if given.TextModel.Pretrain != "" {
		given.TextModel = stored.TextModel
	}
	a, b := flatYAML(given.Marshal()), flatYAML(stored.Marshal())
	var diff []string
	for _, kv := range a {
		if v, ok := lookup(b, kv[0]); !ok || v != kv[1] {
			diff = append(diff, kv[0])
		}
	}
	for _, kv := range b {
		if _, ok := lookup(a, kv[0]); !ok {
			diff = append(diff, kv[0])
		}
	}
	return diff
}

// flatYAML turns the two-level YAML of Config.Marshal into (section.key,
// value) pairs in their order.
func flatYAML(y string) [][2]string {
	var out [][2]string
	section := ""
	for _, line := range strings.Split(y, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			continue
		}
		key, val, _ := strings.Cut(trimmed, ":")
		if line == trimmed { // a section
			section = key
			continue
		}
		out = append(out, [2]string{section + "." + key, strings.TrimSpace(val)})
	}
	return out
}

func lookup(kvs [][2]string, key string) (string, bool) {
	for _, kv := range kvs {
		if kv[0] == key {
			return kv[1], true
		}
	}
	return "", false
}

// builtinNames returns the names of the built-in configs that cfg is (up
// to what a run sets itself), the shortest first: several built-in configs
// differ only in their comments.
func builtinNames(cfg Config) []string {
	var names []string
	for _, name := range configs.Names() {
		b, ok := configs.Lookup(name)
		if !ok {
			continue
		}
		c, err := ParseConfig(b)
		if err == nil && len(configDiff(c, cfg)) == 0 {
			names = append(names, name)
		}
	}
	slices.SortStableFunc(names, func(a, b string) int { return len(a) - len(b) })
	return names
}

// checkFeatDim refuses to resume a run whose model reads want-wide region
// features on data (at path) of another width: the weights of its first
// layer cannot read them.
func checkFeatDim(want int, path string, have int) error {
	if want == have {
		return nil
	}
	return fmt.Errorf("resume: the run reads %d-d region features; %s has %d-d features: resume it on data of the same width, or train a new run (another --out) on %s", want, path, have, path)
}

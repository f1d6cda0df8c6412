package train

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/configs"
	"gopkg.in/yaml.v3"
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
// vocabulary size (from the captions), with a pretrained BERT, the
// text model's sizes (from its config.json), and, when given names none,
// the word vectors the run started from (xmr train --word-vectors: the
// run's table is in its checkpoint).
func configDiff(given, stored Config) []string {
	given.Dataset.Data = stored.Dataset.Data
	given.ImageModel.FeatDim = stored.ImageModel.FeatDim
	given.TextModel.VocabSize = stored.TextModel.VocabSize
	if given.TextModel.WordVectors == "" {
		given.TextModel.WordVectors = stored.TextModel.WordVectors
	}
	if given.TextModel.Pretrain != "" {
		given.TextModel = stored.TextModel
	}
	a, b := flatConfig(given), flatConfig(stored)
	var diff []string
	for _, kv := range a.pairs {
		if v, ok := b.values[kv[0]]; !ok || v != kv[1] {
			diff = append(diff, kv[0])
		}
	}
	for _, kv := range b.pairs {
		if _, ok := a.values[kv[0]]; !ok {
			diff = append(diff, kv[0])
		}
	}
	return diff
}

// flatKeys is a config as (dotted key, value) pairs in the order of its
// YAML, and the same as a map.
type flatKeys struct {
	pairs  [][2]string
	values map[string]string
}

// flatConfig flattens the YAML of c.Marshal into dotted keys
// ("model.name"); a value that is not a mapping (a scalar, a list) is
// compared as its YAML text.
func flatConfig(c Config) flatKeys {
	f := flatKeys{values: map[string]string{}}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(c.Marshal()), &doc); err != nil || len(doc.Content) == 0 {
		// Marshal's own output always parses; keep the whole text as one
		// value so that configs still compare.
		f.add("config", c.Marshal())
		return f
	}
	f.walk(doc.Content[0], "")
	return f
}

func (f *flatKeys) walk(n *yaml.Node, prefix string) {
	if n.Kind != yaml.MappingNode {
		b, _ := yaml.Marshal(n)
		f.add(prefix, strings.TrimSpace(string(b)))
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i].Value
		if prefix != "" {
			key = prefix + "." + key
		}
		f.walk(n.Content[i+1], key)
	}
}

func (f *flatKeys) add(key, value string) {
	f.pairs = append(f.pairs, [2]string{key, value})
	f.values[key] = value
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

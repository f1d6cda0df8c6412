// Package configs ships the ready-made model configurations: every variant
// of the TERAN, TERN and SEAM papers' tables, and MEMBER's published
// setting (member.yaml; its ablations are keys of model), at paper size (e.g.
// teran-mrsw.yaml, seam-c.yaml) and at a small size for the synthetic
// world, tests and the demo (teran-mrsw-small.yaml), and the VSE++
// baseline (vsepp.yaml, vsepp-small.yaml). It also holds the strict YAML
// decoding that every config type uses.
package configs

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

//go:embed *.yaml
var files embed.FS

// Lookup returns the built-in config called name ("teran-mrsw-small" or
// "teran-mrsw-small.yaml").
func Lookup(name string) ([]byte, bool) {
	if !strings.HasSuffix(name, ".yaml") {
		name += ".yaml"
	}
	b, err := files.ReadFile(name)
	return b, err == nil
}

// Names lists the built-in configs, without the .yaml suffix.
func Names() []string {
	ents, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// Decode parses YAML text into v, whose fields keep their values where the
// text is silent (decode over defaults). A key v has no field for is an
// error naming its line; empty text is no error.
func Decode(b []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// Empty reports whether YAML text holds no value at all: nothing, blanks,
// comments or an explicit null document. Text that is not YAML is an error.
func Empty(b []byte) (bool, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return false, err
	}
	if n.Kind == 0 {
		return true, nil
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		c := n.Content[0]
		return c.Kind == yaml.ScalarNode && c.Tag == "!!null" || c.Kind == yaml.MappingNode && len(c.Content) == 0, nil
	}
	return false, nil
}

// Marshal returns v as YAML. v must be a struct of plain fields, which
// cannot fail to encode.
func Marshal(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("configs: marshal %T: %v", v, err))
	}
	return string(b)
}

// Parse decodes YAML text over def (see Decode) and validates the result.
func Parse[T interface{ Validate() error }](b []byte, def T) (T, error) {
	var zero T
	if err := Decode(b, &def); err != nil {
		return zero, err
	}
	if err := def.Validate(); err != nil {
		return zero, err
	}
	return def, nil
}

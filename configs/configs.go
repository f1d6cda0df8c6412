// Package configs ships the ready-made model configurations: every variant
// of the TERAN and TERN papers' tables at paper size (e.g. teran-mrsw.yaml)
// and at a small size for the synthetic world, tests and the demo
// (teran-mrsw-small.yaml).
package configs

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
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

// Package synthtest shares one generated synthetic world among the tests
// of a test binary: the world is made on first use and removed by Remove
// (from TestMain).
package synthtest

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/xmr-project/xmr/synth"
)

// World is a synthetic world generated once, on the first call of Dir.
type World struct {
	// Prefix names the temporary directory ("xmr-index-world-").
	Prefix string
	// Config is what synth.Generate makes.
	Config synth.Config

	once sync.Once
	dir  string
	err  error
}

// Dir returns the world's directory, generating it on the first call; a
// failure fails t.
func (w *World) Dir(t testing.TB) string {
	w.once.Do(func() {
		w.dir, w.err = os.MkdirTemp("", w.Prefix)
		if w.err == nil {
			_, w.err = synth.Generate(context.Background(), w.dir, w.Config)
		}
	})
	if w.err != nil {
		t.Fatal(w.err)
	}
	return w.dir
}

// Remove deletes the world's directory, if it was made.
func (w *World) Remove() {
	if w.dir != "" {
		os.RemoveAll(w.dir)
	}
}

package train

import (
	"runtime/debug"
	"testing"
)

// TestLeanGC checks that LeanGC sets gcPercent and restores the former
// target, and leaves a target chosen with GOGC alone.
func TestLeanGC(t *testing.T) {
	percent := func() int { p := debug.SetGCPercent(100); debug.SetGCPercent(p); return p }
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, c := range []struct {
		env       string
		want      int
		restoreTo int
	}{{"", gcPercent, 100}, {"50", 100, 100}} {
		t.Setenv("GOGC", c.env)
		debug.SetGCPercent(100)
		restore := LeanGC()
		if got := percent(); got != c.want {
			t.Errorf("GOGC=%q: target %d%% while training, want %d%%", c.env, got, c.want)
		}
		restore()
		if got := percent(); got != c.restoreTo {
			t.Errorf("GOGC=%q: target %d%% after, want %d%%", c.env, got, c.restoreTo)
		}
	}
}

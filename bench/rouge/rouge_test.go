package rouge

import (
	"context"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/tools"
)

// TestQuick runs the benchmark at its quick size without a peer, with a
// missing interpreter, and with the Python peer when one is installed
// (which then checks 1,000 of our scores against Python's).
func TestQuick(t *testing.T) {
	_, noPython := tools.FindPython(context.Background(), "") // the peer needs no module
	cases := []struct {
		name     string
		opts     bench.Options
		wantPeer bool
		wantNote string
	}{
		{name: "no peer", opts: bench.Options{NoPeer: true}},
		{name: "missing python", opts: bench.Options{Python: "/nonexistent/python3"}, wantNote: "Python peer skipped: no suitable Python interpreter"},
		{name: "python peer", wantPeer: noPython == nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "python peer" && testing.Short() {
				t.Skip("-short: the Python peer takes a few seconds")
			}
			var rs []bench.Result
			c.opts.Quick = true
			c.opts.Emit = func(r bench.Result) { rs = append(rs, r) }
			if err := Benchmark.Run(context.Background(), c.opts); err != nil {
				t.Fatal(err)
			}
			if len(rs) != 2 {
				t.Fatalf("%d results, want 2: %+v", len(rs), rs)
			}
			for _, r := range rs {
				if r.Name != "rouge" || !(r.Value > 0) {
					t.Errorf("result %+v", r)
				}
				if hasPeer := r.Ratio > 0; hasPeer != c.wantPeer {
					t.Errorf("peer ratio %v, want a peer: %v (note %q)", r.Ratio, c.wantPeer, r.Note)
				}
				if !strings.Contains(r.Note, c.wantNote) {
					t.Errorf("note %q lacks %q", r.Note, c.wantNote)
				}
			}
		})
	}
}

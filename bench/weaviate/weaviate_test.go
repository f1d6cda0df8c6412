package weaviate

import (
	"strings"
	"testing"

	"github.com/xmr-project/xmr/bench"
)

func TestParse(t *testing.T) {
	cases := []struct {
		args  []string
		want  string // error substring; "" for none
		check func(p params) bool
	}{
		{nil, "", func(p params) bool {
			return p.images == 100000 && p.regions == 36 && p.dim == 128 && len(p.variants) == 2 && len(p.candidates) == 3
		}},
		{[]string{"images=5000", "variants=muvera", "candidates=50,200", "async=true"}, "", func(p params) bool {
			return p.images == 5000 && len(p.variants) == 1 && p.variants[0] == "muvera" && p.candidates[1] == 200 && p.async
		}},
		{[]string{"images"}, "want key=value", nil},
		{[]string{"images=-3"}, "want a whole number", nil},
		{[]string{"variants=plain,fast"}, "want plain, muvera or both", nil},
		{[]string{"candidates=10,x"}, "want positive whole numbers", nil},
		{[]string{"dim=100"}, "multiple of 16", nil},
		{[]string{"nosuch=1"}, "unknown argument", nil},
	}
	for _, c := range cases {
		p, err := parse(bench.Options{Args: c.args})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: error %v, want one with %q", c.args, err, c.want)
		case c.check != nil && !c.check(p):
			t.Errorf("%q: %+v", c.args, p)
		}
	}
}

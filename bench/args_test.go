package bench

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	type vals struct {
		n     int
		seed  uint64
		list  []int
		s     string
		names []string
		d     time.Duration
		b     bool
		odd   string
		color int
	}
	parse := func(args ...string) (vals, error) {
		var v vals
		err := ParseArgs("demo", args, map[string]any{
			"color": Choice(&v.color, map[string]int{"red": 1, "blue": 2}),
			"n":     &v.n, "seed": &v.seed, "list": &v.list, "s": &v.s, "names": &v.names, "d": &v.d, "b": &v.b,
			"odd": func(x string) error {
				if len(x)%2 == 0 {
					return errors.New("want an odd length")
				}
				v.odd = x
				return nil
			},
		})
		return v, err
	}
	v, err := parse("color=blue", "n=3", "seed=18446744073709551615", "list=4,5", "s=a=b", "names=x,y", "d=1m30s", "b=true", "odd=abc")
	if err != nil {
		t.Fatal(err)
	}
	if v.n != 3 || v.seed != 1<<64-1 || !slices.Equal(v.list, []int{4, 5}) || v.s != "a=b" || !slices.Equal(v.names, []string{"x", "y"}) ||
		v.d != 90*time.Second || !v.b || v.odd != "abc" || v.color != 2 {
		t.Errorf("parsed %+v", v)
	}
	for _, c := range []struct{ arg, want string }{
		{"n", `demo: argument "n": want key=value`},
		{"n=-1", `demo: n="-1": want a whole number`},
		{"n=x", `want a whole number`},
		{"seed=-1", `seed="-1": want a whole number`},
		{"list=4,0", `list="4,0": want positive whole numbers`},
		{"list=", `want positive whole numbers`},
		{"names=", `names="": want texts separated by commas, none empty`},
		{"names=a,,b", `none empty`},
		{"d=soon", `d="soon": want a duration such as 30s`},
		{"d=-1s", `not negative`},
		{"b=yes", `b="yes": want 1, true, 0 or false`},
		{"odd=ab", `odd="ab": want an odd length`},
		{"color=green", `demo: color="green": want one of blue, red`},
		{"nosuch=1", `demo: unknown argument "nosuch" (b, color, d, list, n, names, odd, s, seed)`},
	} {
		if _, err := parse(c.arg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.arg, err, c.want)
		}
	}
}

package configs

import (
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	type conf struct {
		A int    `yaml:"a"`
		B string `yaml:"b"`
	}
	cases := []struct {
		text    string
		want    conf
		wantErr string
	}{
		{"", conf{A: 1, B: "x"}, ""},
		{"a: 3\n", conf{A: 3, B: "x"}, ""},
		{"a: 3\nc: 4\n", conf{}, "line 2: field c not found"},
		{"a: [\n", conf{}, "line"},
	}
	for _, c := range cases {
		got := conf{A: 1, B: "x"}
		err := Decode([]byte(c.text), &got)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: error %v, want one mentioning %q", c.text, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %+v, %v; want %+v", c.text, got, err, c.want)
		}
	}
	if s := Marshal(conf{A: 2, B: "z"}); s != "a: 2\nb: z\n" {
		t.Errorf("Marshal = %q", s)
	}
}

func TestBuiltins(t *testing.T) {
	for _, name := range []string{"teran-mrsw-small", "tern-small.yaml"} {
		if _, ok := Lookup(name); !ok {
			t.Errorf("built-in config %s missing", name)
		}
	}
	if _, ok := Lookup("nosuch"); ok {
		t.Error("Lookup found a config that does not exist")
	}
	if len(Names()) < 20 || strings.HasSuffix(Names()[0], ".yaml") {
		t.Errorf("Names() = %v", Names())
	}
}

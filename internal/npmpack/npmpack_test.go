package npmpack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/internal/npmpack/npmpacktest"
)

// fakeNPM puts an npm on PATH whose `npm pack` writes entries, or fails.
func fakeNPM(t *testing.T, entries map[string][]byte, fail bool) {
	npmpacktest.FakeNPM(t, "pkg-1.0.0.tgz", entries, fail)
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

var (
	weights = []byte("weights of a model")
	graph   = []byte(`{"graph": 1}`)
)

// testPackage is a package of two files, package/models/{g.json,w.bin}.
func testPackage() Package {
	return Package{
		Spec:       "pkg@1.0.0",
		TarballURL: "https://registry.npmjs.org/pkg/-/pkg-1.0.0.tgz",
		Subdir:     "pkg-1.0.0",
		Files: []File{
			{Path: "package/models/g.json", SHA256: sum(graph), MaxBytes: 100},
			{Path: "package/models/w.bin", SHA256: sum(weights), MaxBytes: 100},
		},
		What: "the test's files",
	}
}

func TestFetch(t *testing.T) {
	ctx := context.Background()
	p := testPackage()
	cache := t.TempDir()
	fakeNPM(t, map[string][]byte{"package/README.md": []byte("hi"), "package/models/g.json": graph, "package/models/w.bin": weights}, false)
	dir, err := Fetch(ctx, p, cache)
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(cache, p.Subdir) {
		t.Fatalf("Fetch returned %s, want %s", dir, filepath.Join(cache, p.Subdir))
	}
	if b, err := os.ReadFile(filepath.Join(dir, "w.bin")); err != nil || string(b) != string(weights) {
		t.Fatalf("w.bin: %q, %v", b, err)
	}
	// Only the wanted files are copied.
	if _, err := os.Stat(filepath.Join(dir, "README.md")); !os.IsNotExist(err) {
		t.Errorf("README.md was copied: %v", err)
	}
	// A damaged cache is fetched again.
	if err := os.WriteFile(filepath.Join(dir, "w.bin"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.Verify(dir); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("Verify of a damaged w.bin: %v", err)
	}
	if dir2, err := Fetch(ctx, p, cache); err != nil || dir2 != dir || p.Verify(dir) != nil {
		t.Fatalf("refetch: %v", err)
	}
	// Nothing but the published folder is left in the cache.
	entries, _ := os.ReadDir(cache)
	if len(entries) != 1 {
		t.Fatalf("cache holds %d entries, want 1", len(entries))
	}
	// A cached folder is used without npm.
	t.Setenv("PATH", t.TempDir())
	if dir3, err := Fetch(ctx, p, cache); err != nil || dir3 != dir {
		t.Fatalf("Fetch of a cached package without npm: %s, %v", dir3, err)
	}
}

func TestFetchErrors(t *testing.T) {
	ctx := context.Background()
	p := testPackage()
	for _, tc := range []struct {
		name    string
		entries map[string][]byte // nil: no npm on PATH
		fail    bool
		want    []string
	}{
		{"no npm", nil, false, []string{"npm is not installed", "curl -sL " + p.TarballURL, "--strip-components=2 package/models/g.json package/models/w.bin"}},
		{"npm fails", map[string][]byte{}, true, []string{"npm pack pkg@1.0.0", "404", "curl -sL"}},
		{"wrong sums", map[string][]byte{"package/models/g.json": graph, "package/models/w.bin": []byte("other weights")}, false, []string{"w.bin has SHA-256"}},
		{"a file missing", map[string][]byte{"package/models/g.json": graph}, false, []string{"the package lacks package/models/w.bin"}},
		{"too large", map[string][]byte{"package/models/g.json": graph, "package/models/w.bin": make([]byte, 101)}, false, []string{"101 bytes, more than 100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.entries == nil {
				t.Setenv("PATH", t.TempDir())
			} else {
				fakeNPM(t, tc.entries, tc.fail)
			}
			cache := t.TempDir()
			_, err := Fetch(ctx, p, cache)
			if err == nil {
				t.Fatal("Fetch succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			// Nothing unchecked is published, and no temporary folder stays.
			if entries, _ := os.ReadDir(cache); len(entries) != 0 {
				t.Errorf("the cache holds %d entries after a failed fetch", len(entries))
			}
		})
	}
}

func TestCacheDir(t *testing.T) {
	t.Setenv("XMR_MODELS", "/m")
	if got := CacheDir(); got != "/m" {
		t.Errorf("with XMR_MODELS: %s", got)
	}
	t.Setenv("XMR_MODELS", "")
	t.Setenv("XDG_CACHE_HOME", "/c")
	if got := CacheDir(); got != "/c/xmr" {
		t.Errorf("with XDG_CACHE_HOME: %s", got)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/h")
	if got := CacheDir(); got != "/h/.cache/xmr" {
		t.Errorf("with HOME: %s", got)
	}
}

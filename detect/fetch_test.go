package detect

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/internal/npmpack/npmpacktest"
)

// TestFetchDefaultCache makes sure the default cache holds the weights,
// fetching them with npm if needed; scripts/test runs it before the suite.
func TestFetchDefaultCache(t *testing.T) {
	dir := testWeights(t)
	if err := Verify(dir); err != nil {
		t.Fatal(err)
	}
}

// fakeNPM puts an "npm" on PATH that answers `npm pack` with a tarball
// holding the given files as package/models/NAME, or fails.
func fakeNPM(t *testing.T, files map[string][]byte, fail bool) {
	entries := map[string][]byte{"package/README.md": nil}
	for name, data := range files {
		entries["package/models/"+name] = data
	}
	npmpacktest.FakeNPM(t, "vladmandic-human-3.3.6.tgz", entries, fail)
}

func realFiles(t *testing.T) map[string][]byte {
	t.Helper()
	dir := testWeights(t)
	files := make(map[string][]byte)
	for _, n := range []string{ModelFile, WeightsFile} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		files[n] = b
	}
	return files
}

func TestFetch(t *testing.T) {
	files := realFiles(t)
	ctx := context.Background()
	cache := t.TempDir()
	fakeNPM(t, files, false)
	dir, err := Fetch(ctx, cache)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(dir); err != nil {
		t.Fatal(err)
	}
	// A damaged cache is fetched again.
	if err := os.WriteFile(filepath.Join(dir, WeightsFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("Load of a damaged centernet.bin: %v", err)
	}
	if dir2, err := Fetch(ctx, cache); err != nil || dir2 != dir || Verify(dir) != nil {
		t.Fatalf("refetch: %v", err)
	}
	// Nothing but the published folder is left in the cache.
	entries, _ := os.ReadDir(cache)
	if len(entries) != 1 {
		t.Fatalf("cache holds %d entries, want 1", len(entries))
	}
}

func TestFetchErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("no npm", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, err := Fetch(ctx, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "npm is not installed") || !strings.Contains(err.Error(), "curl -sL "+TarballURL) {
			t.Fatalf("error %v, want one giving the command", err)
		}
	})
	t.Run("npm fails", func(t *testing.T) {
		fakeNPM(t, nil, true)
		_, err := Fetch(ctx, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "404") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("wrong files", func(t *testing.T) {
		cache := t.TempDir()
		fakeNPM(t, map[string][]byte{ModelFile: []byte("{}"), WeightsFile: []byte("x")}, false)
		_, err := Fetch(ctx, cache)
		if err == nil || !strings.Contains(err.Error(), "SHA-256") {
			t.Fatalf("error %v", err)
		}
		if _, err := os.Stat(filepath.Join(cache, cacheSubdir)); !os.IsNotExist(err) {
			t.Fatalf("unverified files were published: %v", err)
		}
	})
	t.Run("files missing", func(t *testing.T) {
		fakeNPM(t, map[string][]byte{ModelFile: []byte("{}")}, false)
		_, err := Fetch(ctx, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "lacks") {
			t.Fatalf("error %v", err)
		}
	})
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "centernet.json is missing") || !strings.Contains(err.Error(), "curl") {
		t.Fatalf("empty dir: %v", err)
	}
	files := realFiles(t)
	for name, b := range files {
		if name == WeightsFile {
			b = append([]byte(nil), b...)
			b[1000] ^= 0xff
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "centernet.bin has SHA-256") {
		t.Fatalf("corrupted weights: %v", err)
	}
	os.Remove(filepath.Join(dir, WeightsFile))
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "centernet.bin is missing") {
		t.Fatalf("missing weights: %v", err)
	}
}

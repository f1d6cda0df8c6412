package index

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpenManifest opens a small index whose manifest.json is the fuzzed
// input: Open must refuse it with an error or give an index whose
// searches answer (with results or an error), never panic. The seeds are
// the index's own manifest and edits of it that Open must refuse.
func FuzzOpenManifest(f *testing.F) {
	s := loadTest(f)
	m := testModel(f, "teran", 3, s.Captions)
	dir := f.TempDir()
	if _, err := Build(context.Background(), dir, m, collectionOf(s, 0, 20), &BuildOptions{SegmentItems: 8}); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"format": "xmr-index", "version": 1, "catalogue": "catalogue.db", "model": {"file": "model.safetensors"}}`))
	f.Add([]byte(`{"format": "xmr-index", "version": 1, "images": [{"file": "../x.seg", "items": -1}]}`))
	f.Add([]byte(`{"format": "xmr-index", "version": 1, "model": {"dim": -3, "scoring": "MrSw"}}`))
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, manifestFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		ix, err := Open(ctx, dir, &OpenOptions{SkipChecksums: true})
		if err != nil {
			return
		}
		defer ix.Close()
		if ni, nc := ix.Len(); ni < 0 || nc < 0 {
			t.Fatalf("Len = %d, %d", ni, nc)
		}
		ix.SearchText(ctx, s.Captions[0], &SearchOptions{K: 3, Explain: true})
		ix.SearchImage(ctx, s.ID(0), &SearchOptions{K: 3, Exact: true})
	})
}

package index

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestManifestFeatures checks that what made an index's features is
// published with its manifest (BuildOptions.Features, Writer.SetFeatures),
// kept by an append that sets nothing, read back by ReadFeatures, and
// that the record an older xmr wrote beside the manifest is read while
// the manifest has none and removed by the next commit.
func TestManifestFeatures(t *testing.T) {
	s := loadTest(t)
	m := testModel(t, "teran", 4, s.Captions)
	c := collectionOf(s, 0, 10)
	dir := filepath.Join(t.TempDir(), "ix")
	rec := json.RawMessage(`{"format":"xmr-features/1","extractor":{"name":"x","width":16}}`)
	if _, err := Build(context.Background(), dir, m, c, &BuildOptions{Features: rec}); err != nil {
		t.Fatal(err)
	}
	ix, err := Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := ix.Manifest().Features; !jsonEqual(got, rec) {
		t.Errorf("manifest features %s, want %s", got, rec)
	}
	ix.Close()
	if got, err := ReadFeatures(dir); err != nil || !jsonEqual(got, rec) {
		t.Errorf("ReadFeatures: %s, %v", got, err)
	}

	// An append through a Writer that sets nothing keeps the record.
	w, err := NewWriter(dir, m, Append)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFeatures(dir); err != nil || !jsonEqual(got, rec) {
		t.Errorf("ReadFeatures after an append that set nothing: %s, %v", got, err)
	}

	// An index written before manifests carried the record: none in the
	// manifest, the file beside it.
	old := filepath.Join(t.TempDir(), "old")
	if _, err := Build(context.Background(), old, m, c, &BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	legacy := []byte(`{"format":"xmr-features/1","extractor":{"name":"legacy","width":8}}`)
	if err := os.WriteFile(filepath.Join(old, legacyFeaturesFile), legacy, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFeatures(old); err != nil || string(got) != string(legacy) {
		t.Errorf("ReadFeatures of an older index: %s, %v; want the file beside its manifest", got, err)
	}
	if _, err := Build(context.Background(), old, m, c, &BuildOptions{Mode: Overwrite, Features: rec}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(old, legacyFeaturesFile)); !os.IsNotExist(err) {
		t.Errorf("the older record is still beside the manifest after a commit: %v", err)
	}
	if got, err := ReadFeatures(old); err != nil || !jsonEqual(got, rec) {
		t.Errorf("ReadFeatures after the commit: %s, %v", got, err)
	}
	if got, err := ReadFeatures(filepath.Join(t.TempDir(), "none")); got != nil || err == nil {
		t.Errorf("ReadFeatures of no index: %s, %v; want an error", got, err)
	}
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

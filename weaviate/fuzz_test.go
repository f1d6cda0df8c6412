package weaviate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
)

// FuzzReadManifest feeds weaviate.json files to readManifest: it must
// return an error or a manifest whose counts a resumed upload and a
// search can use (never a panic).
func FuzzReadManifest(f *testing.F) {
	good := Manifest{Format: Format, Version: Version, Config: Config{URL: "http://127.0.0.1:8080", Collection: "World", Shards: 2, Replication: 2},
		Model:  index.ModelInfo{Name: "teran", File: modelFile, Fingerprint: "sha256:00", Dim: 16, Scoring: model.MrSw},
		Images: 10, Captions: 50, ImagesDone: 10, CaptionsDone: 20}
	b, err := json.Marshal(good)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"format": "xmr-weaviate", "version": 1, "images": -1}`))
	f.Add([]byte(`{"format": "xmr-weaviate", "version": 1, "weaviate": {"url": "ftp://x", "collection": "W"}}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, ManifestFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := readManifest(dir)
		if err != nil {
			return
		}
		if m.Model.Dim <= 0 || m.Model.Scoring == "" || m.Images < 0 || m.Captions < 0 ||
			m.ImagesDone < 0 || m.ImagesDone > m.Images || m.CaptionsDone < 0 || m.CaptionsDone > m.Captions {
			t.Fatalf("accepted %+v", m)
		}
		if _, err := model.ParseScoring(string(m.Model.Scoring)); err != nil {
			t.Fatalf("accepted scoring %q: %v", m.Model.Scoring, err)
		}
		if m.Config.Shards <= 0 || m.Config.Replication <= 0 || m.Config.BatchSize <= 0 {
			t.Fatalf("accepted config %+v", m.Config)
		}
	})
}

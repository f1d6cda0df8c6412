package train

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/xmr-project/xmr/extract"
)

// TestFeatureMeta checks what a run records of its data's features: the
// extractor and kind that an extracted data set records (tuned from the
// run's cut when it fine-tunes the detector), and nothing for data that
// records none.
func TestFeatureMeta(t *testing.T) {
	dir := t.TempDir()
	feats := filepath.Join(dir, "feats")
	if err := os.Mkdir(feats, 0o755); err != nil {
		t.Fatal(err)
	}
	id := extract.Identity{Name: "det", Version: "1", Width: 16, Maps: []string{"a"}, Pooling: "p"}
	if err := extract.WriteRecord(feats, &extract.Record{Extractor: id, Kind: extract.KindRegions}); err != nil {
		t.Fatal(err)
	}
	tuned := id
	tuned.Tuned = "s32"
	plain := filepath.Join(dir, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "data.tsv")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, cut string
		want            *extract.Identity
	}{
		{"extracted", feats, "", &id},
		{"extracted, fine-tuned from s32", feats, "s32", &tuned},
		{"no record", plain, "", nil},
		{"a file", file, "", nil},
		{"missing", filepath.Join(dir, "none"), "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			md, err := featureMeta(c.path, c.cut)
			if err != nil {
				t.Fatal(err)
			}
			got, err := extract.FromMeta(md)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case c.want == nil && (got != nil || md != nil):
				t.Errorf("metadata %v, want none", md)
			case c.want != nil && (got == nil || !got.Equal(*c.want) || md[extract.KindMetaKey] != extract.KindRegions):
				t.Errorf("metadata %v, want the extractor %v and kind %s", md, c.want, extract.KindRegions)
			}
		})
	}
}

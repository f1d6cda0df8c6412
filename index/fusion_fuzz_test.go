package index

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpenFusion opens a fusion of two small indexes whose fusion.json
// is the fuzzed input, its query bank's file in place: OpenFusion must
// refuse it with an error or give a fusion whose text searches answer
// (with results or an error), never panic. The seeds are the fusion's
// own manifest, with and without its bank, and edits of it.
func FuzzOpenFusion(f *testing.F) {
	s := loadTest(f)
	ctx := context.Background()
	root := f.TempDir()
	testFusion(f, s, root, 20, 8, []float32{1, 0.5})
	plain, err := os.ReadFile(filepath.Join(root, FusionFile))
	if err != nil {
		f.Fatal(err)
	}
	fu, err := OpenFusion(ctx, root, nil)
	if err != nil {
		f.Fatal(err)
	}
	enc, err := fu.EncodeBank(ctx, s.Captions[100:110])
	if err == nil {
		err = fu.SetQueryBank(ctx, enc, 2, nil)
	}
	fu.Close()
	if err != nil {
		f.Fatal(err)
	}
	banked, err := os.ReadFile(filepath.Join(root, FusionFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(plain)
	f.Add(banked)
	f.Add([]byte(`{"format":"xmr-fusion/1","members":[{"dir":"regions","weight":1},{"dir":"global","weight":1}],"querybank":{"captions":-1,"beta":2,"file":"querybank-images.npy"}}`))
	f.Add([]byte(`{"format":"xmr-fusion/1","members":[{"dir":"regions","weight":1},{"dir":"global","weight":1}],"querybank":{"captions":3,"beta":1e308,"file":"../regions/manifest.json"}}`))
	f.Add([]byte(`{"format":"xmr-fusion/1","members":[{"dir":"regions","weight":1},{"dir":"regions","weight":1e-30}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(filepath.Join(root, FusionFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		fu, err := OpenFusion(ctx, root, &OpenOptions{SkipChecksums: true})
		if err != nil {
			return
		}
		defer fu.Close()
		if _, err := fu.SearchText(ctx, s.Captions[0], &SearchOptions{K: 3}); err != nil {
			return
		}
	})
}

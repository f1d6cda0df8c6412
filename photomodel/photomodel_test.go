package photomodel

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/data"
)

// TestFiles checks that every model the package names is in it, that the
// partners' names (their directories in a fused index) are distinct, and
// that Path writes a file once, with the embedded bytes, under a name
// that carries their hash.
func TestFiles(t *testing.T) {
	ps := Partners()
	if len(ps) < 2 {
		t.Fatalf("%d partners", len(ps))
	}
	seen := map[string]bool{"regions": true} // the region model's index
	total := 0
	for _, p := range ps {
		if seen[p.Name] || p.Name == "" {
			t.Errorf("partner %q: its index's name is empty or taken", p.Name)
		}
		seen[p.Name] = true
		if !(p.Weight > 0) {
			t.Errorf("partner %s: weight %g", p.Name, p.Weight)
		}
		b, err := files.ReadFile(p.File)
		if err != nil || len(b) == 0 {
			t.Fatalf("partner %s: %s is not embedded: %v", p.Name, p.File, err)
		}
		total += len(b)
	}
	region, err := files.ReadFile(FileName)
	if err != nil {
		t.Fatal(err)
	}
	if got := Size(); got != total+len(region) {
		t.Errorf("Size %d, want %d", got, total+len(region))
	}

	cache := t.TempDir()
	path, err := ps[0].Path(cache)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	want, _ := files.ReadFile(ps[0].File)
	if err != nil || !bytes.Equal(b, want) {
		t.Fatalf("%s: not the embedded file (%v)", path, err)
	}
	if filepath.Dir(path) != filepath.Join(cache, "photomodel") || filepath.Base(path) == ps[0].File {
		t.Errorf("%s: want it under cache/photomodel, named with its hash", path)
	}
	st, _ := os.Stat(path)
	again, err := ps[0].Path(cache)
	st2, _ := os.Stat(again)
	if err != nil || again != path || !st2.ModTime().Equal(st.ModTime()) {
		t.Errorf("a second Path: %s, %v; want the same file, not written again", again, err)
	}
	other, err := Path(cache)
	if err != nil || other == path {
		t.Errorf("the region model's Path %s, %v: want a file of its own", other, err)
	}
}

// TestQueryBank checks the query bank's captions: 2,000, none empty, and
// each the first caption of every third training photo of Flickr8k, in
// the shared set's order (dataset_flickr8k.json, when ../shared is
// there).
func TestQueryBank(t *testing.T) {
	bank := QueryBank()
	if len(bank) != 2000 {
		t.Fatalf("%d captions, want 2000", len(bank))
	}
	for i, c := range bank {
		if strings.TrimSpace(c) == "" {
			t.Fatalf("caption %d is empty", i+1)
		}
	}
	path := filepath.Join("..", "..", "shared", "data", "flickr8k-photos", "dataset_flickr8k.json")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no shared Flickr8k set to check the captions against: %v", err)
	}
	k, err := data.LoadKarpathy(path)
	if err != nil {
		t.Fatal(err)
	}
	var train []string
	for _, im := range k.Images {
		if im.Split == "train" && len(im.Sentences) > 0 {
			train = append(train, im.Sentences[0].Raw)
		}
	}
	if len(train) != 6000 {
		t.Fatalf("%s: %d training photos, want 6000", path, len(train))
	}
	for i, c := range bank {
		if want := train[3*i]; c != want {
			t.Fatalf("caption %d is %q, want training photo %d's first, %q", i+1, c, 3*i+1, want)
		}
	}
}

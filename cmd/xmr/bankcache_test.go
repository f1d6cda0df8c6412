package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/model"
)

// TestBankEncodingsCache: the members' encodings of a query bank read
// back as written, bit for bit (a word-vector member and a global-only
// one); a cache of other widths or counts, or a damaged file, is refused
// with the file named, so that bankEncodings encodes again.
func TestBankEncodingsCache(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = r.Float32()
		}
		return v
	}
	words := &model.Embeddings{Dim: 4, Offsets: []int{0, 2, 2, 5}, Vecs: fill(5 * 4), Pos: []int32{0, 1, 0, 2, 3}, Global: fill(3 * 4)}
	global := &model.Embeddings{Dim: 6, Offsets: []int{0, 0, 0, 0}, Global: fill(3 * 6)}
	dir := filepath.Join(t.TempDir(), "querybank", "key")
	if err := writeBankEncodings(dir, []*model.Embeddings{words, global}); err != nil {
		t.Fatal(err)
	}
	got, err := readBankEncodings(dir, []int{4, 6}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !sameEmbeddings(got[0], words) || !sameEmbeddings(got[1], global) {
		t.Fatalf("read back %+v, %+v; want %+v, %+v", got[0], got[1], words, global)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".tmp-*")); len(left) > 0 {
		t.Errorf("left behind %v", left)
	}
	if _, err := readBankEncodings(dir, []int{4, 5}, 3); err == nil || !strings.Contains(err.Error(), "member 2") {
		t.Errorf("another width: %v", err)
	}
	if _, err := readBankEncodings(dir, []int{4, 6}, 4); err == nil || !strings.Contains(err.Error(), "want 5 offsets") {
		t.Errorf("another count: %v", err)
	}
	if err := os.WriteFile(bankFile(dir, 0, "vecs"), []byte("\x93NUMPY junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readBankEncodings(dir, []int{4, 6}, 3); err == nil || !strings.Contains(err.Error(), "member-1-vecs.npy") {
		t.Errorf("a damaged file: %v", err)
	}
	if _, err := readBankEncodings(filepath.Join(t.TempDir(), "none"), []int{4}, 3); !os.IsNotExist(err) {
		t.Errorf("no cache: %v, want a not-exist error", err)
	}
}

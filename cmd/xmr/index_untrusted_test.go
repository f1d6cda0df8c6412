package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestIndexAppendLayoutCLI: xmr index --append stores its segments in the
// index's own layout. --append --compress onto a float32 index (or
// --append --keep-float32 onto a compressed one) wrote segments of both
// kinds, after which --exact and --int8 were refused saying the index
// "was built compressed"; now it is refused before anything is encoded,
// naming the index's layout and the flag to drop, and the index is left
// as it was. --append without a flag follows the index.
func TestIndexAppendLayoutCLI(t *testing.T) {
	world, ckpt := evalWorld(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name, build, refused, want string
	}{
		{"float32", "--keep-float32", "--compress", "stores its images as float32 vectors (with int8 and 4-bit codes), and an append adds segments in the index's own layout: append without --compress"},
		{"compressed", "--compress", "--keep-float32", "stores its images compressed (codes only, no float32 vectors), and an append adds segments in the index's own layout: append without --keep-float32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idx := filepath.Join(dir, tc.name+".idx")
			if _, stderr, code := run(t, "index", "--checkpoint", ckpt, "--data", world, "--split", "test", "--out", idx, tc.build); code != 0 {
				t.Fatalf("index %s: exit %d: %s", tc.build, code, stderr)
			}
			manifest, err := os.ReadFile(filepath.Join(idx, "manifest.json"))
			if err != nil {
				t.Fatal(err)
			}
			_, stderr, code := run(t, "index", "--checkpoint", ckpt, "--data", world, "--split", "dev", "--out", idx, "--append", tc.refused)
			if code != 1 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "encode") {
				t.Fatalf("--append %s: exit %d, want 1 and %q before any encoding:\n%s", tc.refused, code, tc.want, stderr)
			}
			if after, _ := os.ReadFile(filepath.Join(idx, "manifest.json")); !bytes.Equal(after, manifest) {
				t.Fatal("the refused append published a new manifest")
			}
			stdout, stderr, code := run(t, "index", "--checkpoint", ckpt, "--data", world, "--split", "dev", "--out", idx, "--append")
			if code != 0 || !strings.Contains(stdout, "now holds 60 images") {
				t.Fatalf("--append: exit %d: %s%s", code, stdout, stderr)
			}
			_, stderr, code = run(t, "search", "--index", idx, "--text", "a red circle", "--exact")
			if tc.name == "float32" && code != 0 {
				t.Fatalf("search --exact after the append: exit %d: %s", code, stderr)
			}
			if tc.name == "compressed" && (code != 1 || !strings.Contains(stderr, "it was built compressed")) {
				t.Fatalf("search --exact on the compressed index: exit %d: %s", code, stderr)
			}
		})
	}
}

// TestForgedIndexCLI: an index whose images segment says 2^62 + n items
// (the header's checksum recomputed) panicked with an index out of range
// in xmr search, in xmr serve at start and in xmr index --append; an
// index whose catalogue is a FIFO blocked xmr search in open(2) for good.
// Each is now a clear error, exit status 1, naming the file.
func TestForgedIndexCLI(t *testing.T) {
	world, ckpt := evalWorld(t)
	src := filepath.Join(t.TempDir(), "src.idx")
	if _, stderr, code := run(t, "index", "--checkpoint", ckpt, "--data", world, "--split", "test", "--out", src); code != 0 {
		t.Fatalf("index: exit %d: %s", code, stderr)
	}
	var man struct {
		Catalogue string `json:"catalogue"`
		Images    []struct {
			File string `json:"file"`
		} `json:"images"`
	}
	b, err := os.ReadFile(filepath.Join(src, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &man); err != nil {
		t.Fatal(err)
	}

	forged := filepath.Join(t.TempDir(), "forged.idx")
	copyTree(t, src, forged)
	forgeItems(t, filepath.Join(forged, man.Images[0].File), 1<<62)
	want := `header: "items" is 4611686018427387934`
	for _, args := range [][]string{
		{"search", "--index", forged, "--text", "a red circle"},
		{"serve", "--index", forged, "--addr", "127.0.0.1:0"},
		{"index", "--checkpoint", ckpt, "--data", world, "--split", "dev", "--out", forged, "--append"},
	} {
		_, stderr, code := run(t, args...)
		if code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, man.Images[0].File) {
			t.Errorf("xmr %s on the forged index: exit %d, want 1 and %q naming %s:\n%s", args[0], code, want, man.Images[0].File, stderr)
		}
	}

	fifoIdx := filepath.Join(t.TempDir(), "fifo.idx")
	copyTree(t, src, fifoIdx)
	cat := filepath.Join(fifoIdx, man.Catalogue)
	os.Remove(cat)
	if err := syscall.Mkfifo(cat, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	type result struct {
		stderr string
		code   int
	}
	done := make(chan result, 1)
	go func() {
		_, stderr, code := run(t, "search", "--index", fifoIdx, "--text", "a red circle")
		done <- result{stderr, code}
	}()
	select {
	case r := <-done:
		if r.code != 1 || !strings.Contains(r.stderr, cat+": not a regular file (a FIFO)") {
			t.Fatalf("search with a FIFO catalogue: exit %d, want 1 and the FIFO named:\n%s", r.code, r.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("search with a FIFO catalogue still blocked after 20 s")
	}
}

// forgeItems adds add to the items of the segment file at path, and
// writes its header back with a valid CRC-32C, as a forger would.
func forgeItems(t *testing.T, path string, add int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hl := binary.LittleEndian.Uint32(b[12:])
	dec := json.NewDecoder(bytes.NewReader(b[64 : 64+hl]))
	dec.UseNumber()
	var h map[string]any
	if err := dec.Decode(&h); err != nil {
		t.Fatal(err)
	}
	n, err := h["items"].(json.Number).Int64()
	if err != nil {
		t.Fatal(err)
	}
	h["items"] = n + add
	hb, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	clear(b[64 : 64+hl])
	copy(b[64:], hb)
	binary.LittleEndian.PutUint32(b[12:], uint32(len(hb)))
	binary.LittleEndian.PutUint32(b[16:], crc32.Checksum(hb, crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies the regular files of the directory src into a new
// directory dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

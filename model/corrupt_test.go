package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/checkpoint"
)

// TestLoadRefusesCorruption damages a saved model's weights as the issue's
// careless user did (finite values overwritten, one value set to NaN):
// Load must fail naming the tensor. A checkpoint from before checksums
// still loads, with one notice.
func TestLoadRefusesCorruption(t *testing.T) {
	m := tinyModel(t, nil)
	dir := t.TempDir()
	path := filepath.Join(dir, BestCheckpoint)
	if err := Save(path, m, nil, nil); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	name := m.Params()[len(m.Params())/2].Name
	off := tensorOffset(t, path, name)
	cases := []struct {
		name   string
		damage func(b []byte)
		strip  bool // remove the checksums, as an old checkpoint
		want   string
	}{
		{"finite values overwritten", func(b []byte) {
			for i := range 16 {
				binary.LittleEndian.PutUint32(b[off+4*i:], math.Float32bits(0.5))
			}
		}, false, `"` + name + `" is corrupt`},
		{"a byte flipped to NaN", func(b []byte) { b[off+3] = 0x7f; b[off+2] = 0xc0 }, false, `"` + name + `" is corrupt`},
		{"old checkpoint with a NaN", func(b []byte) { b[off+3] = 0x7f; b[off+2] = 0xc0 }, true, `tensor "` + name + `": element 0 is NaN`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := bytes.Clone(good)
			c.damage(b)
			if c.strip {
				b = stripChecksums(t, b)
			}
			p := filepath.Join(t.TempDir(), "bad.safetensors")
			os.WriteFile(p, b, 0o644)
			_, f, err := Load(p)
			if err == nil {
				f.Close()
				t.Fatal("a damaged checkpoint loaded")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("error %q, want one naming %s and %q", err, p, c.want)
			}
		})
	}
	// An undamaged checkpoint without checksums loads, with a notice.
	var logs bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	old := filepath.Join(t.TempDir(), "old.safetensors")
	os.WriteFile(old, stripChecksums(t, good), 0o644)
	m2, f, err := Load(old)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	checkSameEmbeddings(t, m, m2, newTinyImages(rand.New(rand.NewPCG(4, 4))))
	if n := strings.Count(logs.String(), "checkpoint without checksums"); n != 1 || !strings.Contains(logs.String(), old) {
		t.Fatalf("notices: %q", logs.String())
	}
}

// tensorOffset returns the file offset of a tensor's data.
func tensorOffset(t *testing.T, path, name string) int {
	t.Helper()
	f, err := checkpoint.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, ok := f.Info(name)
	if !ok {
		t.Fatalf("no tensor %q", name)
	}
	b, _ := os.ReadFile(path)
	return 8 + int(binary.LittleEndian.Uint64(b)) + int(in.Begin)
}

// stripChecksums rewrites a file's header without its checksums, as xmr
// wrote them before.
func stripChecksums(t *testing.T, b []byte) []byte {
	t.Helper()
	n := binary.LittleEndian.Uint64(b)
	var h map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &h); err != nil {
		t.Fatal(err)
	}
	var meta map[string]string
	json.Unmarshal(h["__metadata__"], &meta)
	delete(meta, checkpoint.MetaChecksums)
	h["__metadata__"], _ = json.Marshal(meta)
	hdr, _ := json.Marshal(h)
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	return append(append(out, hdr...), b[8+n:]...)
}

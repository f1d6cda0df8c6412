package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/npy"
)

// bankEncodings returns each member's encodings of the query bank's
// captions (index.Fusion.EncodeBank): read from cache/querybank when an
// earlier run wrote them for the same models (their fingerprints) and
// captions, else encoded now and written there, the directory published
// at once (a rename). Encoding the built-in bank takes about 10 s on 2
// cores; each folder indexed with the built-in photo model needs it. An
// empty cache encodes every time; a cache that cannot be written or read
// is passed over with a warning.
func bankEncodings(ctx context.Context, fu *index.Fusion, captions []string, cache string) ([]*model.Embeddings, error) {
	if cache == "" {
		return fu.EncodeBank(ctx, captions)
	}
	h := sha256.New()
	h.Write([]byte(strings.Join(captions, "\n")))
	dims := make([]int, len(fu.Members()))
	for m, ix := range fu.Members() {
		info := ix.ModelInfo()
		fmt.Fprintf(h, "\x00%s %d", info.Fingerprint, info.Dim)
		dims[m] = info.Dim
	}
	dir := filepath.Join(cache, "querybank", hex.EncodeToString(h.Sum(nil)[:12]))
	if encs, err := readBankEncodings(dir, dims, len(captions)); err == nil {
		slog.Info("the query bank's encodings, made before", "dir", dir)
		return encs, nil
	} else if !os.IsNotExist(err) {
		slog.Warn("the query bank's cached encodings do not read; encoding again", "dir", dir, "err", err)
	}
	slog.Info("encoding the query bank", "captions", len(captions), "models", len(dims))
	encs, err := fu.EncodeBank(ctx, captions)
	if err != nil {
		return nil, err
	}
	if err := writeBankEncodings(dir, encs); err != nil {
		slog.Warn("the query bank's encodings could not be cached", "dir", dir, "err", err)
	}
	return encs, nil
}

// bankFile names member m's array part in a bank's cache directory.
func bankFile(dir string, m int, part string) string {
	return filepath.Join(dir, fmt.Sprintf("member-%d-%s.npy", m+1, part))
}

// writeBankEncodings writes the members' encodings into a new directory
// beside dir and renames it to dir.
func writeBankEncodings(dir string, encs []*model.Embeddings) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".tmp-querybank-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // nothing left once renamed
	for m, e := range encs {
		offsets := make([]int32, len(e.Offsets))
		for i, o := range e.Offsets {
			offsets[i] = int32(o)
		}
		n, v := e.Len(), len(e.Pos)
		for _, w := range []error{
			npy.WriteFile(bankFile(tmp, m, "offsets"), []int{n + 1}, offsets),
			npy.WriteFile(bankFile(tmp, m, "vecs"), []int{v, e.Dim}, e.Vecs[:v*e.Dim]),
			npy.WriteFile(bankFile(tmp, m, "pos"), []int{v}, e.Pos[:v]),
			npy.WriteFile(bankFile(tmp, m, "global"), []int{n, e.Dim}, e.Global),
		} {
			if w != nil {
				return w
			}
		}
	}
	if err := os.Rename(tmp, dir); err != nil && !dirExists(dir) {
		return err
	}
	return nil
}

// readBankEncodings reads the encodings that writeBankEncodings wrote in
// dir: one a member, of the members' widths dims and n captions each.
func readBankEncodings(dir string, dims []int, n int) ([]*model.Embeddings, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	out := make([]*model.Embeddings, len(dims))
	for m, d := range dims {
		f, err := npy.Open(bankFile(dir, m, "offsets"))
		if err != nil {
			return nil, err
		}
		offs, err := f.ReadInts()
		f.Close()
		if err != nil {
			return nil, err
		}
		f, err = npy.Open(bankFile(dir, m, "pos"))
		if err != nil {
			return nil, err
		}
		pos, err := f.ReadInts()
		f.Close()
		if err != nil {
			return nil, err
		}
		vecs, err := npy.Read(bankFile(dir, m, "vecs"))
		if err != nil {
			return nil, err
		}
		glob, err := npy.Read(bankFile(dir, m, "global"))
		if err != nil {
			return nil, err
		}
		v := len(pos)
		if len(offs) != n+1 || offs[0] != 0 || offs[n] != v || len(vecs.Data) != v*d || len(glob.Data) != n*d {
			return nil, fmt.Errorf("%s: member %d: %d offsets, %d vectors, %d floats of vectors and %d of global vectors: want %d offsets ending at the vectors' count, %d-d vectors and %d global ones", dir, m+1, len(offs), v, len(vecs.Data), len(glob.Data), n+1, d, n)
		}
		e := &model.Embeddings{Dim: d, Offsets: offs, Vecs: vecs.Data, Pos: make([]int32, v), Global: glob.Data}
		for i := 1; i <= n; i++ {
			if offs[i] < offs[i-1] {
				return nil, fmt.Errorf("%s: member %d: offset %d decreases", dir, m+1, i)
			}
		}
		for i, p := range pos {
			e.Pos[i] = int32(p)
		}
		out[m] = e
	}
	return out, nil
}

// dirExists reports whether p is a directory.
func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// bankImages returns n images spread evenly over split's, leaving out the
// mirror images that xmr extract --flip adds (their ids end in
// extract.MirrorSuffix): a query bank's images (eval --querybank-images).
func bankImages(split *data.Split, n int) []int {
	var own []int
	for i := range split.NumImages() {
		if !strings.HasSuffix(split.ID(i), extract.MirrorSuffix) {
			own = append(own, i)
		}
	}
	var out []int
	for _, k := range index.Spread(len(own), n) {
		out = append(out, own[k])
	}
	return out
}

// bankCaptions returns a query bank of n captions from split: the first
// caption of n images spread over it (bankImages). For Flickr8k's
// training split, with or without its mirror images, 2,000 of them are
// photomodel.QueryBank.
func bankCaptions(split *data.Split, n int) []string {
	var out []string
	for _, i := range bankImages(split, n) {
		out = append(out, split.Captions[i*split.CapsPerImage])
	}
	return out
}

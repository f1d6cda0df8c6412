package detect

import (
	"context"
	"fmt"

	"github.com/xmr-project/xmr/internal/npmpack"
)

// Where the weights come from.
const (
	// NPMPackage is the npm package (MIT licence) whose models/ folder holds
	// the two files.
	NPMPackage = "@vladmandic/human@3.3.6"
	// TarballURL is that package's tarball on the npm registry.
	TarballURL = "https://registry.npmjs.org/@vladmandic/human/-/human-3.3.6.tgz"
	// SHA256 of the two files.
	ModelSHA256   = "bfb942eaacc5becf738d536663bc4580a0ae9e560722306e6d4dd7fe4a09de05"
	WeightsSHA256 = "1b635a15009071f506f9f2b3519b31c072c534888989f30d269ffd44734ef7ef"
)

// Largest sizes accepted for the two files when extracting them.
const (
	maxModelBytes   = 4 << 20
	maxWeightsBytes = 64 << 20
)

// cacheSubdir is the folder inside the cache directory that holds the files.
const cacheSubdir = "centernet-" + Version

// weightsPackage says where the two files are and what they hold.
var weightsPackage = npmpack.Package{
	Spec:       NPMPackage,
	TarballURL: TarballURL,
	Subdir:     cacheSubdir,
	Files: []npmpack.File{
		{Path: "package/models/" + ModelFile, SHA256: ModelSHA256, MaxBytes: maxModelBytes},
		{Path: "package/models/" + WeightsFile, SHA256: WeightsSHA256, MaxBytes: maxWeightsBytes},
	},
	What: "the detector's weights",
}

// fetchHint says how to get the files by hand.
func fetchHint(dir string) string { return weightsPackage.Hint(dir) }

// DefaultCacheDir returns the directory model files are cached in: $XMR_MODELS
// when set, else $XDG_CACHE_HOME/xmr, else ~/.cache/xmr.
func DefaultCacheDir() string { return npmpack.CacheDir() }

// Verify checks that dir holds the two model files with their expected
// SHA-256 sums.
func Verify(dir string) error { return weightsPackage.Verify(dir) }

// Fetch returns a directory inside cacheDir holding centernet.json and
// centernet.bin with their expected SHA-256 sums. The first time (or when the
// cached files are damaged) it runs `npm pack` for NPMPackage in a temporary
// folder, extracts the two files, checks their sums and publishes them
// atomically. Without npm it fails with the one command that gets the files.
func Fetch(ctx context.Context, cacheDir string) (string, error) {
	dir, err := npmpack.Fetch(ctx, weightsPackage, cacheDir)
	if err != nil {
		return "", fmt.Errorf("detect: %w", err)
	}
	return dir, nil
}

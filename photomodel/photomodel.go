// Package photomodel holds xmr's built-in photo model, trained on
// Flickr8k's photos and captions, in half precision, so that a folder of
// uncaptioned photos is searched without training first (`xmr index
// --images DIR`, `xmr serve --images DIR` with no checkpoint): TERAN with
// the detector's last block fine-tuned (configs/teran-photos-tuned.yaml),
// fused with SEAM-E on the published detector's global vectors
// (configs/seam-e-photos.yaml) at PartnerWeight, as xmr demo --photos
// fuses them. scripts/photo-model makes both again; docs/photos.md gives
// their recall.
//
// The models learned from Flickr8k (Hodosh, Young and Hockenmaier, 2013),
// whose photos are Flickr users' and whose captions were collected for
// research; the README states the terms that come with them.
package photomodel

import (
	"bytes"
	"crypto/sha256"
	_ "embed" // the model file
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/xmr-project/xmr/atomicfile"
)

// FileName is the region model's file in this package's directory;
// PartnerFileName the global-vector model's.
const (
	FileName        = "flickr8k-teran-tuned.safetensors"
	PartnerFileName = "flickr8k-seam-e.safetensors"
)

// PartnerWeight is the global-vector model's weight in the fusion (the
// region model's is 1), chosen on Flickr8k's val split.
const PartnerWeight = 0.2

var (
	//go:embed flickr8k-teran-tuned.safetensors
	file []byte
	//go:embed flickr8k-seam-e.safetensors
	partner []byte
)

// Size returns the size in bytes of both models' files.
func Size() int { return len(file) + len(partner) }

// Path returns the path of the region model's file under the cache
// directory (e.g. detect.DefaultCacheDir()), writing it there (atomically)
// the first time: its name carries its content's hash, so a newer xmr's
// model never meets an older one's file.
func Path(cache string) (string, error) { return write(cache, FileName, file) }

// PartnerPath returns the path of the global-vector model's file under
// the cache directory, as Path does for the region model's.
func PartnerPath(cache string) (string, error) { return write(cache, PartnerFileName, partner) }

// write writes b as name, prefixed by its hash, under cache/photomodel
// unless it is there.
func write(cache, name string, b []byte) (string, error) {
	sum := sha256.Sum256(b)
	dir := filepath.Join(cache, "photomodel")
	path := filepath.Join(dir, hex.EncodeToString(sum[:8])+"-"+name)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("the built-in photo model: %w", err)
	}
	if err := atomicfile.WriteBytes(path, b); err != nil {
		return "", fmt.Errorf("the built-in photo model: %w", err)
	}
	return path, nil
}

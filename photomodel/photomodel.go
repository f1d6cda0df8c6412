// Package photomodel holds xmr's built-in photo model: TERAN trained on
// Flickr8k's photos and captions with the detector's last block
// fine-tuned (configs/teran-photos-tuned.yaml), in half precision, so
// that a folder of uncaptioned photos is searched without training first
// (`xmr index --images DIR`, `xmr serve --images DIR` with no checkpoint).
// scripts/photo-model makes it again; docs/photos.md gives its recall.
//
// The model learned from Flickr8k (Hodosh, Young and Hockenmaier, 2013),
// whose photos are Flickr users' and whose captions were collected for
// research; the README states the terms that come with it.
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

// FileName is the model file in this package's directory.
const FileName = "flickr8k-teran-tuned.safetensors"

//go:embed flickr8k-teran-tuned.safetensors
var file []byte

// Size returns the model file's size in bytes.
func Size() int { return len(file) }

// Path returns the path of the built-in model's file under the cache
// directory (e.g. detect.DefaultCacheDir()), writing it there (atomically)
// the first time: its name carries its content's hash, so a newer xmr's
// model never meets an older one's file.
func Path(cache string) (string, error) {
	sum := sha256.Sum256(file)
	dir := filepath.Join(cache, "photomodel")
	path := filepath.Join(dir, hex.EncodeToString(sum[:8])+"-"+FileName)
	if b, err := os.ReadFile(path); err == nil && bytes.Equal(b, file) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("the built-in photo model: %w", err)
	}
	if err := atomicfile.WriteBytes(path, file); err != nil {
		return "", fmt.Errorf("the built-in photo model: %w", err)
	}
	return path, nil
}

// Package photomodel holds xmr's built-in photo model, trained on
// Flickr8k's photos and captions, in half precision, so that a folder of
// uncaptioned photos is searched without training first (`xmr index
// --images DIR`, `xmr serve --images DIR` with no checkpoint): TERAN with
// the detector's last block fine-tuned (configs/teran-photos-tuned.yaml),
// fused with SEAM-E on the published detector's global vectors
// (configs/seam-e-photos.yaml, five models: seeds 1 to 5), TERN on its
// regions (configs/tern-photos.yaml) and a second TERAN on its regions,
// the detector untouched (configs/teran-photos.yaml), each at its
// Partner's weight. Both TERANs and TERN start their words from GloVe's
// vectors. A fused folder index also carries a bank of 2,000 training
// captions (QueryBank) that lowers, in text searches, the photos that
// captions about other things score high too.
// scripts/photo-model makes them all again; docs/photos.md gives their
// recall.
//
// The models learned from Flickr8k (Hodosh, Young and Hockenmaier, 2013),
// whose photos are Flickr users' and whose captions were collected for
// research; the README states the terms that come with them.
package photomodel

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/xmr-project/xmr/atomicfile"
)

// FileName is the region model's file in this package's directory.
const FileName = "flickr8k-teran-tuned.safetensors"

// files holds every model's file.
//
//go:embed *.safetensors
var files embed.FS

// A Partner is a model fused with the region model in the built-in photo
// model. Each reads the features of the detector as published (not the
// region model's fine-tuned part), which the same run of the detector
// gives beside the region model's (extract.Options.Untuned).
type Partner struct {
	// Name names the partner's index in a fused folder index's directory.
	Name string
	// File is the model's file in this package's directory.
	File string
	// Weight is its weight in the fusion (the region model's is 1),
	// chosen on Flickr8k's val split.
	Weight float32
}

// The SEAM-E models that the photo model fuses: SEAMESeeds of them, the
// same recipe trained with seeds 1, 2, ..., each of weight SEAMEWeight
// (chosen on Flickr8k's val split). xmr demo --photos trains and fuses as
// many, with the same weight.
const (
	SEAMESeeds          = 5
	SEAMEWeight float32 = 0.08
)

// Partners returns the models fused with the region model: SEAM-E on the
// published detector's global vectors (configs/seam-e-photos.yaml),
// trained with seeds 1 to 5, TERN on its regions
// (configs/tern-photos.yaml), and TERAN on the same regions
// (configs/teran-photos.yaml), the last two with their words from GloVe's
// vectors.
func Partners() []Partner {
	var ps []Partner
	for k := 1; k <= SEAMESeeds; k++ {
		p := Partner{Name: "global", File: "flickr8k-seam-e.safetensors", Weight: SEAMEWeight}
		if k > 1 {
			p.Name, p.File = fmt.Sprintf("global-%d", k), fmt.Sprintf("flickr8k-seam-e-%d.safetensors", k)
		}
		ps = append(ps, p)
	}
	return append(ps,
		Partner{Name: "tern", File: "flickr8k-tern.safetensors", Weight: 0.5},
		Partner{Name: "teran", File: "flickr8k-teran.safetensors", Weight: 0.3})
}

// bankText is the query bank's captions, one a line (QueryBank).
//
//go:embed querybank.txt
var bankText string

// QueryBank returns the captions of the fused index's query bank
// (index.Fusion.SetQueryBank): 2,000 captions of Flickr8k's training
// split (the first caption of every third of its 6,000 training photos,
// as xmr extract reads them), none of its val or test photos'. A text
// search of a folder then ranks each photo by its fused score less how
// well these captions, which are not about it, score it.
func QueryBank() []string {
	return strings.Split(strings.TrimSuffix(bankText, "\n"), "\n")
}

// Size returns the size in bytes of every model's file.
func Size() int {
	n := 0
	for _, name := range append([]string{FileName}, partnerFiles()...) {
		b, _ := files.ReadFile(name)
		n += len(b)
	}
	return n
}

// partnerFiles returns the partners' file names.
func partnerFiles() []string {
	var names []string
	for _, p := range Partners() {
		names = append(names, p.File)
	}
	return names
}

// Path returns the path of the region model's file under the cache
// directory (e.g. detect.DefaultCacheDir()), writing it there (atomically)
// the first time: its name carries its content's hash, so a newer xmr's
// model never meets an older one's file.
func Path(cache string) (string, error) { return write(cache, FileName) }

// Path returns the path of the partner's file under the cache directory,
// as the package's Path does for the region model's.
func (p Partner) Path(cache string) (string, error) { return write(cache, p.File) }

// write writes the file name, prefixed by its hash, under
// cache/photomodel unless it is there.
func write(cache, name string) (string, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("the built-in photo model: %w", err)
	}
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

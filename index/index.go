// Package index is xmr's retrieval engine: an on-disk index of encoded
// images and captions, built once (offline) by encoding a collection with
// a model, and searched online by encoding only the query.
//
// An index is a directory (docs/index-format.md): a manifest naming the
// published files, segment files of embeddings (memory-mapped, versioned,
// checksummed), an SQLite catalogue (ids, captions, image paths, boxes,
// sizes) and the model that encoded them. Builds and appends write new
// files and publish them by replacing the manifest atomically, so a killed
// build leaves the previous index intact and loadable.
//
// A search is one pipeline (pipeline.go): candidates, their scores
// estimated on compressed codes, the best scored again exactly; what
// depends on how a segment stores its vectors is its layout (layout.go).
// Search scores with the model's own scoring (model.Scoring). With
// SearchOptions.Exact it scores every item in float32, and the ranking of
// a query equals that of scoring the collection with the model directly.
// By default the alignment scorings run on compressed codes: 4-bit
// product-quantised codes (pq.go) or, on request, int8 codes (quant.go),
// with the best candidates rescored exactly in float32; on large
// collections an inverted file over the region and word vectors (ivf.go)
// or the global vectors (prune.go) first picks the candidates. Large
// collections are stored compressed by default (residual.go): each vector
// as its cell of the inverted file and a product-quantised residual,
// nothing in float32, searched through what fits in memory (the cells'
// lists and each vector's cell) and the codes of a bounded number of
// candidates. Searcher is
// the interface that xmr search and xmr serve use: an Index, or an index
// held by another engine (package weaviate).
package index

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/xmr-project/xmr/internal/infile"
	"github.com/xmr-project/xmr/model"
)

// Format names an index directory in its manifest; Version is the layout
// this package reads and writes.
const (
	Format  = "xmr-index"
	Version = 1
)

// manifestFile is the file that publishes an index's content.
const manifestFile = "manifest.json"

// Manifest says what an index holds: the files of the current generation.
type Manifest struct {
	Format     string       `json:"format"`
	Version    int          `json:"version"`
	Generation int          `json:"generation"`
	Model      ModelInfo    `json:"model"`
	Catalogue  string       `json:"catalogue"`
	Images     []SegmentRef `json:"images"`
	Captions   []SegmentRef `json:"captions"`
	// Features records what made the features of the indexed images, as
	// the data sets of xmr extract record it (package extract's Record,
	// as JSON; this package keeps it as it is given): search
	// --image-file, xmr serve's uploads and align --image extract a new
	// photo the same way. Absent for features made elsewhere
	// (precomputed ones). It is published with the rest of the manifest
	// (Writer.SetFeatures, BuildOptions.Features).
	Features json.RawMessage `json:"features,omitempty"`
}

// legacyFeaturesFile is where xmr recorded an index's Features before
// manifests carried them: read when the manifest has none
// (ReadFeatures), removed by the next commit.
const legacyFeaturesFile = "features.json"

// ReadFeatures returns what made the features of the index published in
// dir (Manifest.Features, or the file an older xmr wrote beside the
// manifest), or nil when the index records nothing; an error when dir
// holds no index or the record cannot be read.
func ReadFeatures(dir string) (json.RawMessage, error) {
	m, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	if m.Features != nil {
		return m.Features, nil
	}
	b, err := infile.ReadFile(filepath.Join(dir, legacyFeaturesFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", dir, err)
	}
	return b, nil
}

// ModelInfo identifies the model that encoded an index.
type ModelInfo struct {
	Name        string        `json:"name"`        // registry name (model.Names): teran, tern, seam, member, vsepp
	File        string        `json:"file"`        // checkpoint in the index directory
	Fingerprint string        `json:"fingerprint"` // model.Fingerprint
	Dim         int           `json:"dim"`         // width of the vectors
	Scoring     model.Scoring `json:"scoring"`     // the model's own scoring
}

// SegmentRef names a published segment file and what it holds.
type SegmentRef struct {
	File    string `json:"file"`
	Items   int    `json:"items"`
	Vectors int    `json:"vectors"`
}

// ErrNotIndex is wrapped by the errors for a directory without an index.
var ErrNotIndex = errors.New("not an xmr index")

// readManifest reads and checks dir's manifest.
func readManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, manifestFile)
	b, err := infile.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return nil, fmt.Errorf("open index: %w (%w)", serr, ErrNotIndex)
		}
		return nil, fmt.Errorf("%s is %w: no %s (build one with xmr index)", dir, ErrNotIndex, manifestFile)
	}
	if err != nil {
		return nil, fmt.Errorf("open index: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("index %s: %s: %w", dir, manifestFile, err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("index %s: %s: format %q, want %q", dir, manifestFile, m.Format, Format)
	}
	if m.Version != Version {
		return nil, fmt.Errorf("index %s: layout version %d; this xmr reads version %d: rebuild the index with this xmr", dir, m.Version, Version)
	}
	for _, refs := range [][]SegmentRef{m.Images, m.Captions} {
		// Item numbers run on from one segment to the next: their sums
		// must not wrap around (each segment's own counts are checked
		// against its header when it is opened).
		items, vectors := 0, 0
		for _, s := range refs {
			if s.File == "" || filepath.Base(s.File) != s.File {
				return nil, fmt.Errorf("index %s: %s: segment file %q is not a plain name in the directory", dir, manifestFile, s.File)
			}
			if s.Items < 0 || s.Vectors < 0 || s.Items > math.MaxInt32 || s.Vectors > math.MaxInt32 || items > math.MaxInt-s.Items || vectors > math.MaxInt-s.Vectors {
				return nil, fmt.Errorf("index %s: %s: segment %s: %d items and %d vectors: want 0 to %d of each, and totals an int holds", dir, manifestFile, s.File, s.Items, s.Vectors, math.MaxInt32)
			}
			items, vectors = items+s.Items, vectors+s.Vectors
		}
	}
	if m.Model.Dim <= 0 || m.Model.Scoring == "" {
		return nil, fmt.Errorf("index %s: %s: model dim %d and scoring %q: want a positive width and a scoring", dir, manifestFile, m.Model.Dim, m.Model.Scoring)
	}
	if m.Catalogue == "" || filepath.Base(m.Catalogue) != m.Catalogue || m.Model.File == "" || filepath.Base(m.Model.File) != m.Model.File {
		return nil, fmt.Errorf("index %s: %s: catalogue %q and model %q must be plain file names in the directory", dir, manifestFile, m.Catalogue, m.Model.File)
	}
	return &m, nil
}

// Index is an open index: its segments mapped, its catalogue open. It is
// safe for concurrent searches.
type Index struct {
	dir      string
	man      *Manifest
	images   []*segment
	captions []*segment
	cat      *catalogue

	modelOnce sync.Once
	model     model.Model
	modelErr  error
}

// OpenOptions tune Open. The zero value (and nil) gives the defaults.
type OpenOptions struct {
	// SkipChecksums skips the CRC-32C check of the segments' sections
	// (their headers are always checked): faster opening of large indexes
	// whose files are trusted.
	SkipChecksums bool
	// Preload reads what searches keep in memory into the page cache when
	// the index opens, so that the first searches do not wait for the
	// disk (Index.Resident says how much): of a segment with float32
	// vectors, every part but its float32 region, word and global vectors
	// (offsets, positions, the int8 and 4-bit codes with their scales and
	// codebooks, the inverted files, the global sketches and codes); of a
	// compressed segment, its offsets, cells, the cells' lists, centroids
	// and codebook. The float32 vectors, read only for re-ranking and
	// --exact, and the compressed codes, read per candidate, are left
	// where they are.
	Preload bool
}

// Open opens the index in dir: reads the manifest, maps and checks every
// segment and opens the catalogue read-only. Checking the checksums reads
// every segment, which takes a while on a large index: Open checks ctx
// before each segment (and before each preload), and once ctx is cancelled
// it closes what it opened and returns an error wrapping ctx's error.
func Open(ctx context.Context, dir string, o *OpenOptions) (*Index, error) {
	if err := checkHost(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open index %s: %w", dir, err)
	}
	man, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	skip := o != nil && o.SkipChecksums
	ix := &Index{dir: dir, man: man}
	if ix.images, err = openRefs(ctx, dir, man, man.Images, "images", skip); err == nil {
		ix.captions, err = openRefs(ctx, dir, man, man.Captions, "captions", skip)
	}
	if err == nil {
		markSharedCentroids(ix.images)
		markSharedCentroids(ix.captions)
		readAhead(slices.Concat(ix.images, ix.captions))
	}
	if err == nil && o != nil && o.Preload {
		for _, s := range slices.Concat(ix.images, ix.captions) {
			if err = ctx.Err(); err != nil {
				err = fmt.Errorf("stopped preloading: %w", err)
				break
			}
			s.preload()
		}
	}
	if err == nil {
		ix.cat, err = openCatalogue(filepath.Join(dir, man.Catalogue), false)
	}
	if err == nil {
		err = ix.checkCatalogue(ctx)
	}
	if err != nil {
		ix.Close()
		return nil, fmt.Errorf("index %s: %w", dir, err)
	}
	return ix, nil
}

// openRefs opens the segments refs of modality that man lists, checking
// each against the manifest. On an error it returns those it opened
// (which the caller closes) with it; it checks ctx before each segment.
func openRefs(ctx context.Context, dir string, man *Manifest, refs []SegmentRef, modality string, skipCRC bool) ([]*segment, error) {
	var out []*segment
	for _, r := range refs {
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("stopped before segment %s: %w", r.File, err)
		}
		s, err := openSegment(filepath.Join(dir, r.File), skipCRC)
		if err != nil {
			return out, err
		}
		out = append(out, s)
		h := s.header
		switch {
		case h.Modality != modality:
			return out, fmt.Errorf("segment %s holds %s, the manifest lists it among the %s", r.File, h.Modality, modality)
		case h.Items != r.Items || h.Vectors != r.Vectors:
			return out, fmt.Errorf("segment %s holds %d items and %d vectors, the manifest says %d and %d", r.File, h.Items, h.Vectors, r.Items, r.Vectors)
		case h.Dim != man.Model.Dim:
			return out, fmt.Errorf("segment %s has %d-d vectors, the index's model %d-d", r.File, h.Dim, man.Model.Dim)
		case h.Model != man.Model.Fingerprint:
			return out, fmt.Errorf("segment %s was encoded by model %s, the index's model is %s", r.File, h.Model, man.Model.Fingerprint)
		}
	}
	return out, nil
}

// checkCatalogue checks that the catalogue lists as many items as the
// segments hold.
func (ix *Index) checkCatalogue(ctx context.Context) error {
	ni, nc := ix.Len()
	ci, cc, err := ix.cat.counts(ctx, files(ix.man.Images), files(ix.man.Captions))
	if err != nil {
		return err
	}
	if ci != ni || cc != nc {
		return fmt.Errorf("catalogue %s lists %d images and %d captions, the segments hold %d and %d", ix.man.Catalogue, ci, cc, ni, nc)
	}
	return nil
}

func files(refs []SegmentRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.File
	}
	return out
}

// Close releases the mappings and the catalogue.
func (ix *Index) Close() error {
	var errs []error
	for _, s := range append(append([]*segment{}, ix.images...), ix.captions...) {
		errs = append(errs, s.close())
	}
	if ix.cat != nil {
		errs = append(errs, ix.cat.close())
	}
	ix.images, ix.captions, ix.cat = nil, nil, nil
	return errors.Join(errs...)
}

// Dir returns the index directory.
func (ix *Index) Dir() string { return ix.dir }

// Manifest returns a copy of the index's manifest.
func (ix *Index) Manifest() Manifest { return *ix.man }

// Len returns the number of images and captions.
func (ix *Index) Len() (images, captions int) {
	for _, s := range ix.images {
		images += s.header.Items
	}
	for _, s := range ix.captions {
		captions += s.header.Items
	}
	return images, captions
}

// Resident returns the bytes of the images' and captions' segments that
// searches keep in memory (the parts Preload reads).
func (ix *Index) Resident() (images, captions int64) {
	for _, s := range ix.images {
		images += s.residentBytes()
	}
	for _, s := range ix.captions {
		captions += s.residentBytes()
	}
	return images, captions
}

// Compressed reports whether every segment of the images and of the
// captions is stored compressed (no float32 vectors).
func (ix *Index) Compressed() (images, captions bool) {
	return allResidual(ix.images), allResidual(ix.captions)
}

// Model returns the model that encoded the index (read from the index
// directory on first use): search needs it to encode text queries.
func (ix *Index) Model() (model.Model, error) {
	ix.modelOnce.Do(func() {
		ix.model, ix.modelErr = LoadModel(ix.dir, ix.man.Model)
		if ix.modelErr != nil {
			ix.modelErr = fmt.Errorf("index %s: %w", ix.dir, ix.modelErr)
		}
	})
	return ix.model, ix.modelErr
}

// LoadModel loads the model an index keeps in dir (info.File) and checks
// that it is the one the manifest names (info.Fingerprint).
func LoadModel(dir string, info ModelInfo) (model.Model, error) {
	m, f, err := model.Load(filepath.Join(dir, info.File))
	if err != nil {
		return nil, err
	}
	f.Close()
	if fp := model.Fingerprint(m); fp != info.Fingerprint {
		return nil, fmt.Errorf("model file %s has fingerprint %s, the manifest %s: the file was replaced", info.File, fp, info.Fingerprint)
	}
	return m, nil
}

// locate returns the segment and row of item number n among segs.
func locate(segs []*segment, n int) (*segment, int, bool) {
	for _, s := range segs {
		if n < s.header.Items {
			return s, n, true
		}
		n -= s.header.Items
	}
	return nil, 0, false
}

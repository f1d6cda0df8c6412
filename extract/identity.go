package extract

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/internal/infile"
)

// Identity says which extractor made a set of features: models trained on
// one extractor's features cannot read another's, so data sets, training
// runs' checkpoints and indexes record it, and the commands that put a
// model and features together refuse a mismatch (Check).
type Identity struct {
	// Name and Version name the detector and its weights (detect.Name,
	// detect.Version).
	Name    string `json:"name"`
	Version string `json:"version"`
	// Width is the length of a feature vector.
	Width int `json:"width"`
	// Maps are the detector's feature maps pooled, in order.
	Maps []string `json:"maps"`
	// Pooling names how the maps are pooled (Pooling).
	Pooling string `json:"pooling"`
	// Tuned names the cut of the detector (detect.Cuts) whose upper part
	// the model fine-tuned: the maps that part computes come from the
	// model's own weights (a checkpoint carries them, package finetune),
	// not the detector's. Empty for the detector as published.
	Tuned string `json:"tuned,omitempty"`
}

// String names the identity in one line, as the error messages show it.
func (id Identity) String() string {
	tuned := ""
	if id.Tuned != "" {
		tuned = ", the detector fine-tuned from cut " + id.Tuned + " by the model"
	}
	return fmt.Sprintf("%s %s (maps %s, %s, %d-d%s)", id.Name, id.Version, strings.Join(id.Maps, "+"), id.Pooling, id.Width, tuned)
}

// Equal reports whether two identities name the same features.
func (id Identity) Equal(o Identity) bool {
	return id.Name == o.Name && id.Version == o.Version && id.Width == o.Width &&
		slices.Equal(id.Maps, o.Maps) && id.Pooling == o.Pooling && id.Tuned == o.Tuned
}

// Marshal returns the identity as JSON, the value of MetaKey.
func (id Identity) Marshal() string {
	b, _ := json.Marshal(id)
	return string(b)
}

// ParseIdentity reads the JSON that Marshal writes.
func ParseIdentity(s string) (Identity, error) {
	var id Identity
	if err := json.Unmarshal([]byte(s), &id); err != nil {
		return Identity{}, fmt.Errorf("feature extractor record: %w", err)
	}
	if id.Name == "" || id.Width <= 0 {
		return Identity{}, fmt.Errorf("feature extractor record %q: no name or width", s)
	}
	return id, nil
}

// MetaKey is the checkpoint metadata key that holds the Identity (as JSON)
// of the features a model was trained on. Checkpoints trained on features
// of unknown provenance (the bottom-up TSVs, the synthetic world) have none.
const MetaKey = "feature_extractor"

// KindMetaKey is the checkpoint metadata key that holds which kind of
// features a model was trained on: "regions" (a data set's main files) or
// "global" (its global/ copy), as Record.Kind says.
const KindMetaKey = "feature_kind"

// FileName is the file, in a data set's or an index's directory, that
// records which extractor made its features.
const FileName = "features.json"

// FileFormat identifies FileName's content.
const FileFormat = "xmr-features/1"

// Record is the content of FileName.
type Record struct {
	Format    string   `json:"format"`
	Extractor Identity `json:"extractor"`
	// Kind is "regions" ((N, R, D) features with boxes) or "global" ((N,
	// D), one vector per image).
	Kind string `json:"kind,omitempty"`
	// MaxBoxes, MinScore and Fill say how the regions were chosen.
	MaxBoxes int     `json:"max_boxes,omitempty"`
	MinScore float32 `json:"min_score,omitempty"`
	Fill     string  `json:"fill,omitempty"`
	// Splits lists the splits written, with their image counts.
	Splits map[string]SplitRecord `json:"splits,omitempty"`
	// FeatureKind, in an index's record, is the Kind of the features its
	// model was trained on, so that a new image is given to it the same
	// way; empty when unknown.
	FeatureKind string `json:"feature_kind,omitempty"`
	// Taps, in a data set's record (not its global/ copy's), names the cut
	// (detect.Cuts) at which the run that wrote it cached the detector's
	// activations, for each split it wrote, in TapsPath(DATA, Taps, SPLIT);
	// empty when it cached none. Splits listed from earlier runs keep the
	// taps files those runs wrote, if any: every taps file matches its
	// split's images.
	Taps string `json:"taps,omitempty"`
}

// SplitRecord describes one split of an extracted data set.
type SplitRecord struct {
	Images   int  `json:"images"`
	Captions bool `json:"captions"`
	Skipped  int  `json:"skipped,omitempty"`
}

// ReadRecord reads dir's FileName; it returns nil and no error when dir
// has none (features of unknown provenance).
func ReadRecord(dir string) (*Record, error) {
	path := filepath.Join(dir, FileName)
	b, err := infile.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, unwrapPath(err))
	}
	return ParseRecord(b, path)
}

// ParseRecord parses a Record (the content of FileName, or an index
// manifest's record of its features); where names it in errors.
func ParseRecord(b []byte, where string) (*Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read %s: %w", where, err)
	}
	if r.Format != FileFormat {
		return nil, fmt.Errorf("read %s: format %q, want %q", where, r.Format, FileFormat)
	}
	if r.Extractor.Name == "" || r.Extractor.Width <= 0 {
		return nil, fmt.Errorf("read %s: field extractor: no name or width", where)
	}
	return &r, nil
}

// ReadIdentity returns the identity that dir's FileName records, or nil
// when dir has none.
func ReadIdentity(dir string) (*Identity, error) {
	r, err := ReadRecord(dir)
	if r == nil || err != nil {
		return nil, err
	}
	return &r.Extractor, nil
}

// WriteRecord writes r to dir's FileName atomically.
func WriteRecord(dir string, r *Record) error {
	b, err := r.Encode()
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(filepath.Join(dir, FileName), append(b, '\n'))
}

// Encode returns r as JSON, its Format set to FileFormat.
func (r *Record) Encode() ([]byte, error) {
	r.Format = FileFormat
	return json.MarshalIndent(r, "", "  ")
}

// RemoveRecord removes dir's FileName if it exists.
func RemoveRecord(dir string) error {
	err := os.Remove(filepath.Join(dir, FileName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// ErrMismatch is wrapped by Check's errors.
var ErrMismatch = errors.New("features of another extractor")

// Check refuses to put a model trained on features of identity model
// (what its checkpoint records; nil: none recorded) together with features
// of identity feats (what the data records; nil: none). modelName and
// featsName name the two in the message. Two unknown identities pass: the
// precomputed features xmr has always read (bottom-up, the synthetic
// world) record none.
func Check(model *Identity, modelName string, feats *Identity, featsName string) error {
	switch {
	case model == nil && feats == nil:
		return nil
	case model != nil && feats != nil:
		if model.Equal(*feats) {
			return nil
		}
		return fmt.Errorf("%w: %s was trained on features of %s, but %s holds features of %s; extract them again with the model's extractor, or use a model trained on these features",
			ErrMismatch, modelName, model, featsName, feats)
	case model != nil:
		return fmt.Errorf("%w: %s was trained on features of %s, but %s records no extractor (%s absent: precomputed features such as bottom-up or the synthetic world's); make its features with xmr extract",
			ErrMismatch, modelName, model, featsName, FileName)
	default:
		return fmt.Errorf("%w: %s records no feature extractor (trained on precomputed features such as bottom-up or the synthetic world's), but %s holds features of %s; train a model on these features (xmr train --data on xmr extract's output)",
			ErrMismatch, modelName, featsName, feats)
	}
}

// Feature kinds, as Record.Kind and the checkpoint metadata under
// KindMetaKey name them.
const (
	// KindRegions: a data set's main files, (N, R, D) region features
	// with their boxes.
	KindRegions = "regions"
	// KindGlobal: a data set's global/ copy, (N, D), one vector per image.
	KindGlobal = "global"
)

// ErrKindMismatch is wrapped by CheckKind's errors.
var ErrKindMismatch = errors.New("features of another kind")

// describeKind names a feature kind in CheckKind's messages.
func describeKind(kind string) string {
	switch kind {
	case KindRegions:
		return "region features (boxes per image: a data set's main directory)"
	case KindGlobal:
		return "global features (one vector per image: a data set's global/ directory)"
	}
	return fmt.Sprintf("features of kind %q", kind)
}

// CheckKind refuses to give a model trained on features of kind model
// (what its checkpoint records under KindMetaKey) features of kind feats
// (Record.Kind of the data, or the kind a command is about to extract).
// modelName and featsName name the two in the message. An empty kind is
// unknown (checkpoints and records written before kinds were recorded,
// precomputed features) and passes; so does any kind other than
// KindRegions and KindGlobal (an index's record), which names no layout
// of features.
func CheckKind(model, modelName, feats, featsName string) error {
	known := func(k string) bool { return k == KindRegions || k == KindGlobal }
	if !known(model) || !known(feats) || model == feats {
		return nil
	}
	return fmt.Errorf("%w: %s was trained on %s, but %s holds %s; give it features of the kind it was trained on (xmr extract writes both), or use a model trained on these",
		ErrKindMismatch, modelName, describeKind(model), featsName, describeKind(feats))
}

// FromMeta returns the identity stored under MetaKey in checkpoint
// metadata, or nil when there is none.
func FromMeta(md map[string]string) (*Identity, error) {
	s, ok := md[MetaKey]
	if !ok || s == "" {
		return nil, nil
	}
	id, err := ParseIdentity(s)
	if err != nil {
		return nil, err
	}
	return &id, nil
}

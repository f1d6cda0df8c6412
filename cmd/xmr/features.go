package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
)

// dataIdentity returns the feature extractor that the data set at path
// records (extract.FileName), or nil when it records none: precomputed
// features (bottom-up, the synthetic world's), TSV files, or a path that is
// not a directory.
func dataIdentity(path string) (*extract.Identity, error) {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return nil, nil
	}
	return extract.ReadIdentity(path)
}

// checkpointIdentity returns the feature extractor that the metadata of a
// checkpoint records (extract.MetaKey), or nil.
func checkpointIdentity(f *checkpoint.File) (*extract.Identity, error) {
	id, err := extract.FromMeta(f.Metadata())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path(), err)
	}
	return id, nil
}

// checkDataFeatures refuses to pair the model of checkpoint file f (given
// as ckptFlag on the command line) with the data at dataPath when their
// feature extractors differ (extract.Check).
func checkDataFeatures(f *checkpoint.File, ckptFlag, dataPath string) error {
	mid, err := checkpointIdentity(f)
	if err != nil {
		return err
	}
	did, err := dataIdentity(dataPath)
	if err == nil {
		did, err = tunedDataIdentity(f, ckptFlag, did, dataPath)
	}
	if err != nil {
		return err
	}
	if err := extract.Check(mid, "the model of --checkpoint "+ckptFlag, did, "--data "+dataPath); err != nil {
		return err
	}
	return checkDataKind(f, "the model of --checkpoint "+ckptFlag, dataPath)
}

// dataKind returns the kind of features (extract.KindRegions,
// extract.KindGlobal) that the data set at path records, or "" when it
// records none.
func dataKind(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return "", nil
	}
	rec, err := extract.ReadRecord(path)
	if err != nil || rec == nil {
		return "", err
	}
	return rec.Kind, nil
}

// checkDataKind refuses to give the model of checkpoint file f (named
// modelName in the message) the data at dataPath when the model was
// trained on features of another kind: regions against a data set's
// global/ copy, or the reverse (extract.CheckKind).
func checkDataKind(f *checkpoint.File, modelName, dataPath string) error {
	kind, err := dataKind(dataPath)
	if err != nil {
		return err
	}
	return extract.CheckKind(f.Metadata()[extract.KindMetaKey], modelName, kind, "--data "+dataPath)
}

// checkResumedFeatures refuses to resume the run in runDir on the data at
// dataPath when the run's last checkpoint records features of another
// extractor or kind than the data's. A run that fine-tunes the detector
// from a cut (visionCut, or what the run records) reads the data's
// features with that cut's maps made by its own part. (Each checkpoint
// records the data's extractor itself: train.Run reads it from the data
// set.)
func checkResumedFeatures(dataPath, runDir, visionCut string) error {
	last := filepath.Join(runDir, "last.safetensors")
	if !fileExists(last) {
		return nil
	}
	did, err := dataIdentity(dataPath)
	if err != nil {
		return err
	}
	if did != nil && visionCut != "" {
		did.Tuned = visionCut
	}
	f, err := checkpoint.Open(last)
	if err != nil {
		return err
	}
	defer f.Close()
	mid, err := checkpointIdentity(f)
	if err != nil {
		return err
	}
	if mid != nil && did != nil && did.Tuned == "" {
		did.Tuned = mid.Tuned
	}
	if err := extract.Check(mid, "the run in "+runDir, did, "--data "+dataPath); err != nil {
		return err
	}
	return checkDataKind(f, "the run in "+runDir, dataPath)
}

// imageModel loads the model of a checkpoint that is to read features made
// from images now, by e: the checkpoint must record e's identity, or, for
// a model that fine-tuned the detector, e's with the model's part, which
// the returned extractor runs. It also returns the kind of features the
// model was trained on ("regions", "global"; "" when the checkpoint does
// not say) and what an index's copy of the model must carry (attachment).
func imageModel(ckpt string, e *extract.Extractor) (model.Model, *extract.Extractor, string, *index.Attachment, error) {
	m, cf, err := model.Load(ckpt)
	if err != nil {
		return nil, nil, "", nil, err
	}
	defer cf.Close()
	mid, err := checkpointIdentity(cf)
	if err != nil {
		return nil, nil, "", nil, err
	}
	if e, err = tunedExtractor(cf, e); err != nil {
		return nil, nil, "", nil, err
	}
	id := e.Identity()
	if err := extract.Check(mid, "the model of --checkpoint "+ckpt, &id, "images extracted now"); err != nil {
		return nil, nil, "", nil, err
	}
	att, err := attachment(cf)
	if err != nil {
		return nil, nil, "", nil, err
	}
	return m, e, cf.Metadata()[extract.KindMetaKey], att, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

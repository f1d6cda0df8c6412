package train

import (
	"os"

	"github.com/xmr-project/xmr/extract"
)

// featureMeta returns the checkpoint metadata that records what made the
// features of the data set at path, as its extract.FileName says: the
// extractor (extract.MetaKey; tuned from visionCut when the run
// fine-tunes the detector from that cut) and the kind of features
// (extract.KindMetaKey). Data that records nothing (precomputed features,
// a TSV file, a path that is no directory) gives nil. Commands that later
// pair the model with features check it (extract.Check).
func featureMeta(path, visionCut string) (map[string]string, error) {
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		return nil, nil
	}
	rec, err := extract.ReadRecord(path)
	if err != nil || rec == nil {
		return nil, err
	}
	id := rec.Extractor
	if visionCut != "" {
		id.Tuned = visionCut
	}
	md := map[string]string{extract.MetaKey: id.Marshal()}
	if rec.Kind != "" {
		md[extract.KindMetaKey] = rec.Kind
	}
	return md, nil
}

package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/server"
)

// fusionImages encodes a new photo for every member of a fusion of local
// indexes with one detector run for each set of features the members
// read, not one a member: members that read the same features (the same
// published detector, maps, box count and score threshold) share a run,
// and those that read the published detector's features share the run of
// a member that fine-tuned the detector from the same published one, whose
// extract.Options.Untuned gives them, over the same boxes, bit for bit
// what the published detector's own run gives (extract.TestUntuned). The
// built-in photo model's eight members take one run a photo.
type fusionImages struct {
	runs    []*extract.Extractor
	members []memberImage
}

// memberImage is how one member of a fusion encodes a photo.
type memberImage struct {
	m model.Model
	// e is the member's own extractor (the width and box count of its
	// features) and kind the features its model was trained on.
	e    *extract.Extractor
	kind string
	// run is the run (fusionImages.runs) whose features the member reads;
	// untuned says it reads that run's published detector's features.
	run     int
	untuned bool
}

// newFusionImages plans the runs that encode a photo for the members,
// their detector loaded from cache. It fails, naming the member, when a
// member records no feature extractor (noExtractorError).
func newFusionImages(ctx context.Context, members []*index.Index, cache string) (*fusionImages, error) {
	fi := &fusionImages{}
	var published []*memberImage // members that read the published detector's features
	for _, ix := range members {
		dir := ix.Dir()
		rec, err := indexRecord(dir)
		if err != nil {
			return nil, err
		}
		if rec == nil {
			return nil, noExtractorError{dir}
		}
		e, err := recordExtractor(ctx, cache, rec, filepath.Join(dir, ix.ModelInfo().File))
		if err != nil {
			return nil, err
		}
		m, err := ix.Model()
		if err != nil {
			return nil, err
		}
		fi.members = append(fi.members, memberImage{m: m, e: e, kind: rec.FeatureKind, run: -1})
	}
	// Each member that fine-tuned the detector runs its own: its part is
	// its checkpoint's.
	tunedRuns := map[string]int{} // published features' key -> the first tuned run over them
	for k := range fi.members {
		mi := &fi.members[k]
		id := mi.e.Identity()
		if id.Tuned == "" {
			published = append(published, mi)
			continue
		}
		mi.run = len(fi.runs)
		fi.runs = append(fi.runs, mi.e)
		id.Tuned = ""
		if key := featuresKey(id, mi.e); tunedRuns[key] == 0 {
			tunedRuns[key] = mi.run + 1
		}
	}
	runs := map[string]int{} // features' key -> run
	for _, mi := range published {
		key := featuresKey(mi.e.Identity(), mi.e)
		if r, ok := runs[key]; ok {
			mi.run, mi.untuned = r, fi.runs[r].Identity().Tuned != ""
			continue
		}
		if t := tunedRuns[key]; t > 0 {
			r := t - 1
			if !fi.runs[r].Untuned() {
				u, err := fi.runs[r].WithUntuned()
				if err != nil {
					return nil, err
				}
				fi.runs[r] = u
			}
			mi.run, mi.untuned = r, true
			runs[key] = r
			continue
		}
		mi.run = len(fi.runs)
		fi.runs = append(fi.runs, mi.e)
		runs[key] = mi.run
	}
	return fi, nil
}

// featuresKey names the features that extractor e makes as identity id:
// two extractors with the same key make the same features of a photo.
func featuresKey(id extract.Identity, e *extract.Extractor) string {
	return fmt.Sprintf("%s|boxes %d|score %g", id, e.MaxBoxes(), e.MinScore())
}

// noExtractorError is a member of a fusion, dir, whose index records no
// feature extractor: its model reads precomputed features, which no photo
// can be turned into here.
type noExtractorError struct{ dir string }

func (e noExtractorError) Error() string {
	return fmt.Sprintf("%s records no feature extractor: its model was trained on precomputed features, which no image can be turned into here; index with a model trained on xmr extract's features", e.dir)
}

// encode encodes the decoded photo pic as a query of one item for each
// member in want (indexes into the members, in order), running only the
// detector runs they need, once each.
func (fi *fusionImages) encode(ctx context.Context, pic *extract.Picture, want []int) ([]*model.Embeddings, error) {
	feats := make([]*extract.Features, len(fi.runs))
	qs := make([]*model.Embeddings, len(want))
	for i, k := range want {
		mi := fi.members[k]
		if feats[mi.run] == nil {
			f, err := fi.runs[mi.run].Run(ctx, pic)
			if err != nil {
				return nil, err
			}
			feats[mi.run] = f
		}
		f := feats[mi.run]
		if mi.untuned {
			if f = f.Untuned(); f == nil {
				return nil, fmt.Errorf("member %d: the detector's run gave no published detector's features", k+1)
			}
		}
		q, err := model.EncodeImages(ctx, mi.m, photoSource(mi.m, []*extract.Features{f}, mi.e, mi.kind), nil)
		if err != nil {
			return nil, err
		}
		qs[i] = q
	}
	return qs, nil
}

// all returns the numbers of every member, in order.
func (fi *fusionImages) all() []int {
	want := make([]int, len(fi.members))
	for k := range want {
		want[k] = k
	}
	return want
}

// fusionUploads returns the server's ImageQuery for a fusion: an upload is
// decoded once and encoded by each member's model (fusionImages), the
// members chosen by the models that the server passes. Nil, and no error,
// when a member's model reads no extracted features.
func fusionUploads(ctx context.Context, fu *index.Fusion, cache string, maxBytes int64) (server.ImageQuery, error) {
	if _, err := loadDetector(ctx, cache); err != nil {
		return nil, err // now, not at the first upload
	}
	fi, err := newFusionImages(ctx, fu.Members(), cache)
	if _, ok := err.(noExtractorError); ok {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	lim := extract.Limits{MaxBytes: maxBytes}
	return func(ctx context.Context, b []byte, ms []model.Model) ([]*model.Embeddings, error) {
		want := make([]int, len(ms))
		for i, m := range ms {
			want[i] = -1
			for k, mi := range fi.members {
				if mi.m == m {
					want[i] = k
					break
				}
			}
			if want[i] < 0 {
				return nil, fmt.Errorf("the fused index has no member of model %s", m.Name())
			}
		}
		pic, err := decodeUpload(ctx, b, lim)
		if err != nil {
			return nil, err
		}
		return fi.encode(ctx, pic, want)
	}, nil
}

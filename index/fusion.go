package index

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/model"
)

// FusionFile is the file that makes a directory a fusion of indexes
// (OpenFusion): the indexes of one collection made by different models,
// searched as one ranking.
const FusionFile = "fusion.json"

// fusionFormat names the format of FusionFile.
const fusionFormat = "xmr-fusion/1"

// Fusion defaults: each member ranks FusionDepth items (at least k) for
// a query, and a query's scores under each member are standardised with
// their mean and deviation over FusionSample items of the collection
// spread evenly over it (all of them in a smaller collection).
const (
	FusionDepth  = 100
	FusionSample = 256
)

// fusionCheck is how many images and captions, spread over a collection,
// WriteFusion compares between the members.
const fusionCheck = 1000

// FusionMember is one index of a fusion and its weight.
type FusionMember struct {
	// Dir is the member's index directory: relative to the fusion's
	// directory, or absolute.
	Dir string `json:"dir"`
	// Weight scales the member's standardised scores (> 0).
	Weight float32 `json:"weight"`
}

// fusionManifest is the content of FusionFile.
type fusionManifest struct {
	Format  string         `json:"format"`
	Members []FusionMember `json:"members"`
	// QueryBank, when set, names the image offsets of the fusion's query
	// bank (Fusion.SetQueryBank).
	QueryBank *fusionBank `json:"querybank,omitempty"`
}

// IsFusion reports whether dir holds a fusion of indexes (FusionFile).
func IsFusion(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, FusionFile))
	return err == nil && st.Mode().IsRegular()
}

// Fusion searches the indexes of one collection, made by different
// models, as one ranking: a region model's index and a global-vector
// model's, say, which err differently. For a query, each member ranks its
// best FusionDepth items (at least k); every item that one of them ranks
// is scored by every member, each member's scores are standardised with
// the query's mean and deviation over FusionSample items of the
// collection, and the standardised scores are summed with the members'
// weights (what eval.Fuse does over a whole split); a text query then
// subtracts each image's offset under the fusion's query bank, if it has
// one (SetQueryBank). The first member
// gives the catalogue, the explanations and what Searcher's lookups
// return. A Fusion is safe for concurrent use.
type Fusion struct {
	dir     string
	members []*Index
	weights []float32
	// bank and imageOffsets are the fusion's query bank and each image's
	// offset under it (SetQueryBank); nil without one.
	bank         *fusionBank
	imageOffsets []float32
}

var _ Searcher = (*Fusion)(nil)

// WriteFusion makes dir a fusion of the member indexes (FusionFile,
// written atomically; dir is created when missing). Every member must
// open and hold the same images and captions in the same order as the
// first: their counts, and the ids and texts of up to 1,000 items
// spread over them, are compared.
func WriteFusion(ctx context.Context, dir string, members []FusionMember) error {
	if len(members) < 2 {
		return fmt.Errorf("fusion %s: %d member indexes: want at least 2", dir, len(members))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("fusion: %w", err)
	}
	f, err := openMembers(ctx, dir, members, &OpenOptions{SkipChecksums: true})
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.checkSameCollection(ctx); err != nil {
		return err
	}
	return writeFusionManifest(filepath.Join(dir, FusionFile), &fusionManifest{Format: fusionFormat, Members: members})
}

// writeFusionManifest writes man to path (FusionFile), atomically.
func writeFusionManifest(path string, man *fusionManifest) error {
	b, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, append(b, '\n'))
}

// OpenFusion opens the fusion in dir (FusionFile) and its member indexes.
func OpenFusion(ctx context.Context, dir string, o *OpenOptions) (*Fusion, error) {
	path := filepath.Join(dir, FusionFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s is %w: no %s", dir, ErrNotIndex, FusionFile)
	}
	man, err := readFusionManifest(path)
	if err != nil {
		return nil, err
	}
	f, err := openMembers(ctx, dir, man.Members, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if man.QueryBank != nil {
		n, _ := f.Len()
		switch f.imageOffsets, err = loadBank(dir, man.QueryBank, n); {
		case errors.Is(err, errStaleBank):
			slog.Warn("the fusion's members changed after its query bank was made: text searches run without it; make it again (xmr fuse --querybank)", "fusion", dir, "images", n)
			f.imageOffsets = nil
		case err != nil:
			f.Close()
			return nil, err
		default:
			f.bank = man.QueryBank
		}
	}
	return f, nil
}

// openMembers opens the members of a fusion in dir and checks their
// weights and counts.
func openMembers(ctx context.Context, dir string, members []FusionMember, o *OpenOptions) (*Fusion, error) {
	f := &Fusion{dir: dir}
	for k, m := range members {
		if w := float64(m.Weight); !(w > 0) || math.IsInf(w, 0) {
			f.Close()
			return nil, fmt.Errorf("member %d (%s): weight %v: want a finite number > 0", k+1, m.Dir, m.Weight)
		}
		d := m.Dir
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		ix, err := Open(ctx, d, o)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("member %d: %w", k+1, err)
		}
		f.members = append(f.members, ix)
		f.weights = append(f.weights, m.Weight)
		ni, nc := ix.Len()
		if n0, c0 := f.members[0].Len(); ni != n0 || nc != c0 {
			f.Close()
			return nil, fmt.Errorf("member %d (%s) holds %d images and %d captions, member 1 (%s) %d and %d: want the same collection", k+1, d, ni, nc, f.members[0].dir, n0, c0)
		}
	}
	return f, nil
}

// checkSameCollection compares the ids of up to fusionCheck images and
// the texts of as many captions of every member with the first's.
func (f *Fusion) checkSameCollection(ctx context.Context) error {
	first := f.members[0]
	ni, nc := first.Len()
	for k, ix := range f.members[1:] {
		for _, i := range Spread(ni, fusionCheck) {
			a, err := first.cat.image(ctx, i)
			if err != nil {
				return err
			}
			b, err := ix.cat.image(ctx, i)
			if err != nil {
				return err
			}
			if a.ID != b.ID {
				return fmt.Errorf("fusion: image %d is %q in %s, %q in %s (member %d): want the same images in the same order", i, a.ID, first.dir, b.ID, ix.dir, k+2)
			}
		}
		for _, i := range Spread(nc, fusionCheck) {
			a, err := first.cat.caption(ctx, i)
			if err != nil {
				return err
			}
			b, err := ix.cat.caption(ctx, i)
			if err != nil {
				return err
			}
			if a != b {
				return fmt.Errorf("fusion: caption %d is %q in %s, %q in %s (member %d): want the same captions in the same order", i, a.Text, first.dir, b.Text, ix.dir, k+2)
			}
		}
	}
	return nil
}

// Members returns the member indexes, in order; the Fusion owns them.
func (f *Fusion) Members() []*Index { return f.members }

// Weights returns the members' weights, in order.
func (f *Fusion) Weights() []float32 { return f.weights }

// SearchText returns the images that text describes best under the
// fusion. o.Scoring must be empty: each member scores with its own model's
// scoring.
func (f *Fusion) SearchText(ctx context.Context, text string, o *SearchOptions) ([]Result, error) {
	if err := checkFusionOptions(o); err != nil {
		return nil, err
	}
	qs := make([]*query, len(f.members))
	for k, ix := range f.members {
		s := ix.scoring(nil)
		q, err := ix.encodeText(ctx, text, s)
		if err != nil {
			return nil, err
		}
		qs[k] = newQuery(ix.images, q, true, s, o)
	}
	return f.search(ctx, qs, strings.Fields(text), nil)
}

// SearchImage returns the captions that describe the indexed image
// imageID best under the fusion (o.Scoring empty, as for SearchText).
func (f *Fusion) SearchImage(ctx context.Context, imageID string, o *SearchOptions) ([]Result, error) {
	if err := checkFusionOptions(o); err != nil {
		return nil, err
	}
	qs := make([]*query, len(f.members))
	var boxes [][4]float32
	for k, ix := range f.members {
		q, row, err := ix.imageVectors(ctx, imageID)
		if err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
		if k == 0 {
			boxes = row.Boxes
		}
		qs[k] = newQuery(ix.captions, q, false, ix.scoring(nil), o)
	}
	return f.search(ctx, qs, nil, boxes)
}

// SearchEncoded is Index.Search for a fusion: qs holds the query encoded
// by each member's model, in order (images for a caption when
// queryIsText, captions for an image).
func (f *Fusion) SearchEncoded(ctx context.Context, qs []*model.Embeddings, queryIsText bool, o *SearchOptions) ([]Result, error) {
	if err := checkFusionOptions(o); err != nil {
		return nil, err
	}
	if len(qs) != len(f.members) {
		return nil, fmt.Errorf("search: %d encoded queries for a fusion of %d indexes", len(qs), len(f.members))
	}
	out := make([]*query, len(qs))
	for k, ix := range f.members {
		if qs[k].Len() != 1 || qs[k].Dim != ix.man.Model.Dim {
			return nil, fmt.Errorf("search: member %d's query must be one item of %d-d vectors, is %d items of %d", k+1, ix.man.Model.Dim, qs[k].Len(), qs[k].Dim)
		}
		segs := ix.captions
		if queryIsText {
			segs = ix.images
		}
		out[k] = newQuery(segs, qs[k], queryIsText, ix.scoring(nil), o)
	}
	return f.search(ctx, out, nil, nil)
}

// checkFusionOptions refuses a scoring chosen for a fused search.
func checkFusionOptions(o *SearchOptions) error {
	if o != nil && o.Scoring != "" {
		return fmt.Errorf("search: a fusion of indexes scores each with its own model's scoring; --pooling %s chooses one: search a member index for it: %w", o.Scoring, ErrBadQuery)
	}
	return nil
}

// search ranks the items for the members' queries qs (one a member, in
// order) under the fusion and fills in the results through the first
// member.
func (f *Fusion) search(ctx context.Context, qs []*query, words []string, queryBoxes [][4]float32) ([]Result, error) {
	k := qs[0].k
	depth := max(k, FusionDepth)
	var union []int
	seen := map[int]bool{}
	for m, ix := range f.members {
		q := *qs[m]
		q.k, q.explain = depth, false
		hits, err := ix.rank(ctx, &q)
		if err != nil {
			return nil, fmt.Errorf("member %d (%s): %w", m+1, ix.dir, err)
		}
		for _, h := range hits {
			if !seen[h.Index] {
				seen[h.Index] = true
				union = append(union, h.Index)
			}
		}
	}
	total := 0
	for _, seg := range qs[0].segs {
		total += seg.header.Items
	}
	sample := Spread(total, FusionSample)
	fused := make([]float32, len(union))
	if qs[0].text && f.imageOffsets != nil {
		for i, n := range union {
			fused[i] = -f.imageOffsets[n]
		}
	}
	for m, ix := range f.members {
		sc, err := scoreItems(ctx, qs[m], append(sample[:len(sample):len(sample)], union...))
		if err != nil {
			return nil, fmt.Errorf("member %d (%s): %w", m+1, ix.dir, err)
		}
		for i, v := range sc[len(sample):] {
			if !isFinite(v) {
				seg, row, _ := locate(qs[m].segs, union[i])
				return nil, nonFiniteScore(ix.dir, seg, row, v)
			}
		}
		mean, sd := moments(sc[:len(sample)])
		addStandardised(fused, sc[len(sample):], float64(f.weights[m]), mean, sd)
	}
	top := model.TopK(fused, k)
	for i := range top {
		top[i].Index = union[top[i].Index]
	}
	return f.members[0].results(ctx, qs[0], top, words, queryBoxes)
}

// scoreItems scores the items of q.segs numbered items exactly under q.
func scoreItems(ctx context.Context, q *query, items []int) ([]float32, error) {
	cands := make([]candidate, len(items))
	for i, n := range items {
		seg, row, ok := locate(q.segs, n)
		if !ok {
			return nil, fmt.Errorf("search: item %d is beyond the index's segments", n)
		}
		cands[i] = candidate{item: n, row: row, seg: seg}
	}
	return exactScores(ctx, cands, q)
}

// addStandardised adds w times each score of sc, standardised by mean and
// sd (its query's sample's, moments), to dst: one member's part of a
// fused score.
func addStandardised(dst, sc []float32, w, mean, sd float64) {
	for i, v := range sc {
		dst[i] += float32(w * (float64(v) - mean) / sd)
	}
}

// moments returns the mean and standard deviation of the finite values of
// x (a deviation of 1 when there is none: such scores add nothing but a
// constant).
func moments(x []float32) (mean, sd float64) {
	var s, ss float64
	n := 0
	for _, v := range x {
		if isFinite(v) {
			s += float64(v)
			n++
		}
	}
	if n == 0 {
		return 0, 1
	}
	mean = s / float64(n)
	for _, v := range x {
		if isFinite(v) {
			d := float64(v) - mean
			ss += d * d
		}
	}
	sd = math.Sqrt(ss / float64(n))
	if sd == 0 {
		return mean, 1
	}
	return mean, sd
}

// Image returns the catalogue row of an indexed image (the first
// member's).
func (f *Fusion) Image(ctx context.Context, imageID string) (ImageRow, error) {
	return f.members[0].Image(ctx, imageID)
}

// ImageCaptions returns the indexed captions of an image, in item order.
func (f *Fusion) ImageCaptions(ctx context.Context, imageID string) ([]CaptionItem, error) {
	return f.members[0].ImageCaptions(ctx, imageID)
}

// Caption returns the catalogue row of caption item n.
func (f *Fusion) Caption(ctx context.Context, n int) (CaptionRow, error) {
	return f.members[0].Caption(ctx, n)
}

// Align matches a sentence with an indexed image under the first
// member's model: its word-region alignment.
func (f *Fusion) Align(ctx context.Context, imageID, text string, o *SearchOptions) (*Match, error) {
	return f.members[0].Align(ctx, imageID, text, o)
}

// AlignCaption matches indexed caption n with an indexed image under the
// first member's model.
func (f *Fusion) AlignCaption(ctx context.Context, imageID string, n int, o *SearchOptions) (*Match, error) {
	return f.members[0].AlignCaption(ctx, imageID, n, o)
}

// Len returns the number of images and captions.
func (f *Fusion) Len() (images, captions int) { return f.members[0].Len() }

// ModelInfo identifies the first member's model.
func (f *Fusion) ModelInfo() ModelInfo { return f.members[0].ModelInfo() }

// Model returns the first member's model.
func (f *Fusion) Model() (model.Model, error) { return f.members[0].Model() }

// Close closes every member.
func (f *Fusion) Close() error {
	var errs []error
	for _, ix := range f.members {
		errs = append(errs, ix.Close())
	}
	return errors.Join(errs...)
}

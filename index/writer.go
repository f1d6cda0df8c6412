package index

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/lockfile"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/nn"
)

// Mode says what a Writer does to an index directory.
type Mode int

const (
	// Create makes a new index; an existing one is an error.
	Create Mode = iota
	// Append adds items to an existing index encoded by the same model
	// (creating the index if there is none).
	Append
	// Overwrite replaces an existing index. The old index stays intact
	// and searchable until Commit.
	Overwrite
)

// Writer adds embeddings and their catalogue rows to an index directory.
// AddImages and AddCaptions write segment files at once, under names no
// manifest lists; Commit inserts the catalogue rows and publishes
// everything by replacing the manifest atomically. Until then readers see
// the previous index, and a killed build leaves it intact.
type Writer struct {
	dir   string
	m     model.Model
	fp    string
	prev  *Manifest // nil when there is no index to keep
	man   Manifest  // the manifest Commit publishes
	imgs  []imageEntry
	caps  []captionEntry
	files []string                // written by this Writer, removed by Abort
	qz    map[string]*quantizer   // per modality: trained on the first batch, shared by the rest
	rcb   map[string]*pqCodebook  // per modality, when compressed: the residual quantiser, as qz
	cc    map[string]*coarseCoder // per modality, when compressed: the coarse codes' quantiser, as qz
	lay   LayoutOptions
	// stored, in an append, says how the index stores each modality's
	// vectors: the segments the append adds keep that layout.
	stored map[string]storedLayout
	lock   *lockfile.Lock
	done   bool
	attach *Attachment // stored in the model's file, when Commit writes one
}

// Attachment is what an index's copy of its model carries beside the
// model's weights, as the checkpoint it came from did: the weights and
// metadata of the detector's part that the model fine-tuned (package
// finetune), with which the features of a new image are made.
type Attachment struct {
	Tensors []nn.Named
	Meta    map[string]string
}

// SetFeatures sets what made the features of the images the index holds
// (Manifest.Features; nil: nothing recorded), published by Commit with
// the rest of the manifest. An append keeps the index's record unless it
// is set.
func (w *Writer) SetFeatures(raw json.RawMessage) { w.man.Features = raw }

// Attach stores a in the index's copy of the model, when Commit writes
// one (a new index, or a new model: an append keeps the file, and what is
// attached to it).
func (w *Writer) Attach(a *Attachment) { w.attach = a }

// NewWriter starts writing to the index in dir with the vectors of model m.
// It locks the directory (package lockfile) until Commit or Abort: a second
// writer is refused, naming the first one's process. Readers need no lock.
func NewWriter(dir string, m model.Model, mode Mode) (*Writer, error) {
	if err := checkHost(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("index %s: %w", dir, err)
	}
	lock, err := lockfile.Acquire(dir, "index directory")
	if err != nil {
		return nil, err
	}
	w, err := newWriter(dir, m, mode)
	if err != nil {
		lock.Release()
		return nil, err
	}
	w.lock = lock
	return w, nil
}

func newWriter(dir string, m model.Model, mode Mode) (*Writer, error) {
	w := &Writer{dir: dir, m: m, fp: model.Fingerprint(m)}
	prev, err := readManifest(dir)
	exists := err == nil
	if err != nil && !errors.Is(err, ErrNotIndex) && mode != Overwrite {
		return nil, fmt.Errorf("%w (overwrite replaces it)", err) // never overwrite an unreadable index silently
	}
	switch {
	case exists && mode == Create:
		return nil, fmt.Errorf("index %s already exists (%d images, %d captions): add to it with append, or replace it with overwrite", dir, count(prev.Images), count(prev.Captions))
	case exists && mode == Append:
		if prev.Model.Fingerprint != w.fp {
			return nil, fmt.Errorf("index %s was encoded by another model (%s %s), this checkpoint is %s %s: append with the index's model, or overwrite", dir, prev.Model.Name, prev.Model.Fingerprint, m.Name(), w.fp)
		}
		if w.stored, err = layoutsOf(context.Background(), dir, prev); err != nil {
			return nil, err
		}
		w.prev = prev
		w.man = *prev
		w.man.Images = append([]SegmentRef(nil), prev.Images...)
		w.man.Captions = append([]SegmentRef(nil), prev.Captions...)
		gen, err := nextGeneration(dir)
		if err != nil {
			return nil, err
		}
		w.man.Generation = gen
		return w, nil
	case exists:
		w.prev = prev
	}
	gen, err := nextGeneration(dir)
	if err != nil {
		return nil, err
	}
	w.man.Generation = gen
	w.man.Format, w.man.Version = Format, Version
	w.man.Catalogue = fmt.Sprintf("catalogue-%06d.db", gen)
	w.man.Model = ModelInfo{Name: m.Name(), File: fmt.Sprintf("model-%06d.safetensors", gen), Fingerprint: w.fp,
		Dim: m.Config().EmbeddingDim(), Scoring: m.Scoring()}
	return w, nil
}

// nextGeneration returns a generation number above that of the manifest
// and of every index file in dir, so that a new build never writes over a
// file of the published index or of one being replaced.
func nextGeneration(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("index %s: %w", dir, err)
	}
	gen := 0
	if m, err := readManifest(dir); err == nil {
		gen = m.Generation
	}
	for _, e := range ents {
		if g, ok := generationOf(e.Name()); ok {
			gen = max(gen, g)
		}
	}
	return gen + 1, nil
}

// generationOf returns the generation in the name of an index file (or of
// its temporary file) that carries one: PREFIX-GGGGGG-... or
// PREFIX-GGGGGG.EXT, six digits. The manifest and its temporary files
// (.manifest.json.tmp-RANDOM, whose random digits once moved the
// generation forward) carry none.
func generationOf(name string) (int, bool) {
	if !isIndexFile(name) {
		return 0, false
	}
	base := strings.TrimPrefix(name, ".")
	if i := strings.Index(base, ".tmp-"); i >= 0 {
		base = base[:i]
	}
	if base == manifestFile {
		return 0, false
	}
	i := strings.IndexByte(base, '-')
	if i < 0 || len(base) < i+8 || (base[i+7] != '-' && base[i+7] != '.') {
		return 0, false
	}
	g := 0
	for _, c := range base[i+1 : i+7] {
		if c < '0' || c > '9' {
			return 0, false
		}
		g = 10*g + int(c-'0')
	}
	return g, true
}

func count(refs []SegmentRef) int {
	n := 0
	for _, r := range refs {
		n += r.Items
	}
	return n
}

// segmentName returns a file name for the next segment of a modality.
func (w *Writer) segmentName(modality string) string {
	k := len(w.man.Images)
	if modality == "captions" {
		k = len(w.man.Captions)
	}
	return fmt.Sprintf("%s-%06d-%04d.seg", modality, w.man.Generation, k)
}

// AddImages writes the embeddings of images (one catalogue row each) as a
// new segment. It checks ctx before it starts and between training the
// quantizer and writing the segment: once ctx is cancelled it writes
// nothing more and returns an error wrapping ctx's error (Abort then
// removes what the Writer wrote).
func (w *Writer) AddImages(ctx context.Context, e *model.Embeddings, rows []ImageRow) error {
	if len(rows) != e.Len() {
		return fmt.Errorf("index %s: %d image rows for %d embedded images", w.dir, len(rows), e.Len())
	}
	name, err := w.addSegment(ctx, "images", e)
	if err != nil {
		return err
	}
	for i, r := range rows {
		w.imgs = append(w.imgs, imageEntry{segment: name, row: i, ImageRow: r})
	}
	return nil
}

// AddCaptions writes the embeddings of captions (one catalogue row each)
// as a new segment. A caption's image must be added by this Writer or be
// in the index already. It checks ctx as AddImages does.
func (w *Writer) AddCaptions(ctx context.Context, e *model.Embeddings, rows []CaptionRow) error {
	if len(rows) != e.Len() {
		return fmt.Errorf("index %s: %d caption rows for %d embedded captions", w.dir, len(rows), e.Len())
	}
	name, err := w.addSegment(ctx, "captions", e)
	if err != nil {
		return err
	}
	for i, r := range rows {
		w.caps = append(w.caps, captionEntry{segment: name, row: i, CaptionRow: r})
	}
	return nil
}

// addSegment writes e as the next segment of modality; the first segment
// of a modality also trains the quantizer the later ones share.
func (w *Writer) addSegment(ctx context.Context, modality string, e *model.Embeddings) (string, error) {
	if w.done {
		return "", fmt.Errorf("index %s: writer already committed or aborted", w.dir)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("index %s: %s: %w", w.dir, modality, err)
	}
	if e.Len() > 0 && e.Dim != w.man.Model.Dim {
		return "", fmt.Errorf("index %s: %d-d %s vectors, the index's model makes %d-d vectors", w.dir, e.Dim, modality, w.man.Model.Dim)
	}
	if w.qz == nil {
		w.qz, w.rcb, w.cc = map[string]*quantizer{}, map[string]*pqCodebook{}, map[string]*coarseCoder{}
	}
	qz := w.qz[modality]
	if qz == nil {
		qz = quantizerFor(e)
		w.qz[modality] = qz
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("index %s: %s: stopped after training the quantizer: %w", w.dir, modality, err)
		}
	}
	name := w.segmentName(modality)
	path := filepath.Join(w.dir, name)
	w.files = append(w.files, path)
	if qz != nil && w.compressed(modality) {
		vecs := e.Vecs[e.Offsets[0]*e.Dim : e.Offsets[e.Len()]*e.Dim]
		cellOf := qz.assign(vecs)
		rcb := w.rcb[modality]
		if rcb == nil {
			dsub := w.lay.Dsub
			if dsub <= 0 {
				dsub = resDsubFor(e.Dim)
			}
			rcb = trainResidual(modality, vecs, e.Dim, cellOf, qz, dsub, w.lay.Coder)
			w.rcb[modality] = rcb
			w.cc[modality] = trainCoarse(modality, vecs, e.Dim, cellOf, qz, dsub, rcb)
		}
		if err := writeCompressedSegment(path, modality, w.fp, e, qz, rcb, w.cc[modality], cellOf); err != nil {
			return "", err
		}
	} else if err := writeSegment(path, modality, w.fp, e, qz); err != nil {
		return "", err
	}
	ref := SegmentRef{File: name, Items: e.Len(), Vectors: 0}
	if e.Len() > 0 {
		ref.Vectors = e.Offsets[e.Len()] - e.Offsets[0]
	}
	if modality == "images" {
		w.man.Images = append(w.man.Images, ref)
	} else {
		w.man.Captions = append(w.man.Captions, ref)
	}
	return name, nil
}

// SetLayout says how the segments written from now on store their
// vectors (the zero LayoutOptions: LayoutAuto, sizes unknown, which keeps
// float32). An append stores each modality's vectors as the index already
// does (LayoutAuto follows it): a Layout that asks for the other one is
// refused with an error saying which layout the index has, and the
// Writer keeps the layout it had.
func (w *Writer) SetLayout(o LayoutOptions) error {
	if err := checkAppendLayout(w.dir, o.Layout, w.stored); err != nil {
		return err
	}
	w.lay = o
	return nil
}

// compressed reports whether the next segment of modality is written in
// the compressed layout.
func (w *Writer) compressed(modality string) bool {
	switch w.lay.Layout {
	case LayoutCompressed:
		return true
	case LayoutFloat32:
		return false
	}
	if s := w.stored[modality]; s.segments() > 0 {
		return s.lastCompressed
	}
	total := w.lay.Images
	if modality == "captions" {
		total = w.lay.Captions
	}
	if total == 0 {
		return false
	}
	if w.prev != nil && w.man.Catalogue == w.prev.Catalogue { // an append
		if modality == "images" {
			total += count(w.prev.Images)
		} else {
			total += count(w.prev.Captions)
		}
	}
	return total > AutoCompressItems
}

// Commit inserts the catalogue rows, writes the model (for a new index)
// and publishes the new manifest; then it removes the files that no
// manifest lists any more.
func (w *Writer) Commit(ctx context.Context) error {
	if w.done {
		return fmt.Errorf("index %s: writer already committed or aborted", w.dir)
	}
	w.done = true
	defer w.lock.Release()
	fail := func(err error) error {
		w.removeWritten()
		return err
	}
	firstImage, firstCaption := 0, 0
	var keep []string
	if w.prev != nil && w.prev.Catalogue == w.man.Catalogue {
		firstImage, firstCaption = count(w.prev.Images), count(w.prev.Captions)
		keep = append(files(w.prev.Images), files(w.prev.Captions)...)
	}
	catPath := filepath.Join(w.dir, w.man.Catalogue)
	if w.prev == nil || w.prev.Catalogue != w.man.Catalogue {
		// A fresh catalogue: remove what a killed build may have left.
		for _, suffix := range []string{"", "-journal"} {
			if err := os.Remove(catPath + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fail(fmt.Errorf("index %s: %w", w.dir, err))
			}
		}
		w.files = append(w.files, catPath)
	}
	cat, err := openCatalogue(catPath, true)
	if err != nil {
		return fail(err)
	}
	err = cat.insert(ctx, w.imgs, w.caps, firstImage, firstCaption, append(keep, newFiles(w.imgs, w.caps)...))
	if cerr := cat.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err)
	}
	if w.prev == nil || w.prev.Model.File != w.man.Model.File {
		path := filepath.Join(w.dir, w.man.Model.File)
		w.files = append(w.files, path)
		md := map[string]string{"index_generation": fmt.Sprint(w.man.Generation)}
		var extra []nn.Named
		if w.attach != nil {
			for k, v := range w.attach.Meta {
				md[k] = v
			}
			extra = w.attach.Tensors
		}
		if err := model.Save(path, w.m, extra, md); err != nil {
			return fail(fmt.Errorf("index %s: %w", w.dir, err))
		}
	}
	b, err := json.MarshalIndent(w.man, "", "  ")
	if err != nil {
		return fail(fmt.Errorf("index %s: %w", w.dir, err))
	}
	if err := atomicfile.WriteBytes(filepath.Join(w.dir, manifestFile), b); err != nil {
		return fail(fmt.Errorf("index %s: publish: %w", w.dir, err))
	}
	w.files = nil
	w.collectGarbage()
	// The manifest now says what made the features: the record an older
	// xmr wrote beside it goes.
	if err := os.Remove(filepath.Join(w.dir, legacyFeaturesFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		slog.Warn("index: clean-up", "file", legacyFeaturesFile, "err", err)
	}
	return nil
}

func newFiles(imgs []imageEntry, caps []captionEntry) []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range imgs {
		if !seen[e.segment] {
			seen[e.segment] = true
			out = append(out, e.segment)
		}
	}
	for _, e := range caps {
		if !seen[e.segment] {
			seen[e.segment] = true
			out = append(out, e.segment)
		}
	}
	return out
}

// Abort removes what the Writer wrote; the index stays as it was.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.removeWritten()
	w.lock.Release()
}

func (w *Writer) removeWritten() {
	for _, f := range w.files {
		os.Remove(f)
	}
	w.files = nil
}

// collectGarbage removes the index files that the published manifest does
// not list (those of a replaced index, of killed builds, and their
// temporary files). Failures are logged, never fatal: the index is
// published.
func (w *Writer) collectGarbage() {
	keep := map[string]bool{manifestFile: true, w.man.Catalogue: true, w.man.Model.File: true}
	for _, f := range append(files(w.man.Images), files(w.man.Captions)...) {
		keep[f] = true
	}
	ents, err := os.ReadDir(w.dir)
	if err != nil {
		slog.Warn("index: listing for clean-up", "dir", w.dir, "err", err)
		return
	}
	for _, e := range ents {
		name := e.Name()
		if keep[name] || e.IsDir() || !isIndexFile(name) {
			continue
		}
		if err := os.Remove(filepath.Join(w.dir, name)); err != nil {
			slog.Warn("index: clean-up", "file", name, "err", err)
		}
	}
}

// isIndexFile reports whether name is one this package writes (or a
// temporary file of one): the only files clean-up may remove.
func isIndexFile(name string) bool {
	base := strings.TrimPrefix(name, ".")
	if i := strings.Index(base, ".tmp-"); i >= 0 {
		base = base[:i]
	}
	for _, p := range []string{"images-", "captions-"} {
		if strings.HasPrefix(base, p) && strings.HasSuffix(base, ".seg") {
			return true
		}
	}
	return (strings.HasPrefix(base, "catalogue-") && (strings.HasSuffix(base, ".db") || strings.HasSuffix(base, ".db-journal"))) ||
		(strings.HasPrefix(base, "model-") && strings.HasSuffix(base, ".safetensors")) ||
		base == manifestFile
}

// storedLayout is how an index stores one modality's vectors: how many of
// its segments hold float32 vectors (format versions 1 and 2) and how
// many only compressed codes (version 3), and which its last one holds.
// Both kinds at once come from appends of older versions of xmr.
type storedLayout struct {
	float32, compressed int
	lastCompressed      bool
}

func (s storedLayout) segments() int { return s.float32 + s.compressed }

// describe says, for an error message, how the modality is stored.
func (s storedLayout) describe() string {
	switch {
	case s.compressed == 0:
		return "as float32 vectors (with int8 and 4-bit codes)"
	case s.float32 == 0:
		return "compressed (codes only, no float32 vectors)"
	}
	return fmt.Sprintf("in both layouts (%d segments of float32 vectors, %d compressed)", s.float32, s.compressed)
}

// layoutsOf opens the published segments of man, the index in dir (their
// headers and structure, not their checksums: an append does not read
// their vectors), and returns how each modality is stored. A segment
// that does not open is an error: an append onto it would publish it
// again.
func layoutsOf(ctx context.Context, dir string, man *Manifest) (map[string]storedLayout, error) {
	out := map[string]storedLayout{}
	for _, m := range []struct {
		modality string
		refs     []SegmentRef
	}{{"images", man.Images}, {"captions", man.Captions}} {
		segs, err := openRefs(ctx, dir, man, m.refs, m.modality, true)
		var s storedLayout
		for _, seg := range segs {
			if seg.res != nil {
				s.compressed++
			} else {
				s.float32++
			}
			s.lastCompressed = seg.res != nil
			seg.close()
		}
		if err != nil {
			return nil, fmt.Errorf("index %s: cannot append: %w (overwrite replaces the index)", dir, err)
		}
		out[m.modality] = s
	}
	return out, nil
}

// checkAppendLayout refuses layout l for an append onto an index that
// stores a modality in the other layout (stored, from layoutsOf; nil
// when the Writer does not append). LayoutAuto always passes: it follows
// the index. An index that already holds both layouts takes either.
func checkAppendLayout(dir string, l Layout, stored map[string]storedLayout) error {
	for _, modality := range []string{"images", "captions"} {
		s := stored[modality]
		switch {
		case l == LayoutCompressed && s.float32 > 0 && s.compressed == 0:
			return fmt.Errorf("index %s stores its %s %s, and an append adds segments in the index's own layout: append without --compress (the new %s are stored as the index's are), or rebuild the whole index compressed with --overwrite --compress", dir, modality, s.describe(), modality)
		case l == LayoutFloat32 && s.compressed > 0 && s.float32 == 0:
			return fmt.Errorf("index %s stores its %s %s, and an append adds segments in the index's own layout: append without --keep-float32 (the new %s are stored as the index's are), or rebuild the whole index with float32 vectors with --overwrite --keep-float32", dir, modality, s.describe(), modality)
		}
	}
	return nil
}

// CheckAppend reports why an append in layout l to the index in dir
// would be refused: a published segment that does not open (its header
// and structure; checksums are not read), or a layout other than the one
// the index stores its images or captions in. It returns nil when dir
// holds no index yet (an append creates one), and an unreadable manifest
// as NewWriter does. NewWriter and Writer.SetLayout check the same when
// they run; a command calls CheckAppend to refuse before it encodes
// anything.
func CheckAppend(ctx context.Context, dir string, l Layout) error {
	man, err := readManifest(dir)
	if errors.Is(err, ErrNotIndex) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w (overwrite replaces it)", err)
	}
	stored, err := layoutsOf(ctx, dir, man)
	if err != nil {
		return err
	}
	return checkAppendLayout(dir, l, stored)
}

// Layout says how a Writer stores the vectors of the segments it writes.
type Layout int

const (
	// LayoutAuto stores a modality compressed when the index will hold
	// more than AutoCompressItems of its items (as LayoutOptions says),
	// with float32 vectors otherwise.
	LayoutAuto Layout = iota
	// LayoutFloat32 keeps the float32 vectors, their int8 and 4-bit
	// product-quantised codes (segment format version 2): exact search
	// and float32 re-ranking.
	LayoutFloat32
	// LayoutCompressed stores each vector as its cell and a residual in
	// 4-bit codes (format version 3), nothing in float32.
	LayoutCompressed
)

// AutoCompressItems is the size above which LayoutAuto compresses: the
// size above which searches prune (AutoPruneItems). Below it every item
// is scored and the best re-ranked in float32, so that search scores equal
// xmr eval's matrix.
const AutoCompressItems = AutoPruneItems

// LayoutOptions tell a Writer how to store vectors (Writer.SetLayout).
type LayoutOptions struct {
	Layout Layout
	// Images and Captions are how many items of each modality the build
	// adds (0: unknown), which LayoutAuto adds to those of the index.
	Images, Captions int
	// Dsub sets the residual codes' size: a byte per 2 x Dsub elements,
	// as product quantisation with subspaces of Dsub elements takes (0:
	// resDsubFor, 2 up to 512 dimensions and 4 above).
	Dsub int
	// Coder is the residuals' coder (CoderAuto: the better on the first
	// batch).
	Coder ResidualCoder
}

package weaviate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/internal/infile"
	"github.com/xmr-project/xmr/lockfile"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/progress"
)

// Format names a Weaviate-backed index directory in its manifest;
// Version is the layout this package reads and writes.
const (
	Format  = "xmr-weaviate"
	Version = 1
)

// ManifestFile is the file that marks a directory as a Weaviate-backed
// index; modelFile is the model that encoded it.
const (
	ManifestFile = "weaviate.json"
	modelFile    = "model.safetensors"
)

// Manifest is weaviate.json: where the index is held, by which model it
// was encoded, and how far its upload got.
type Manifest struct {
	Format  string          `json:"format"`
	Version int             `json:"version"`
	Config  Config          `json:"weaviate"`
	Model   index.ModelInfo `json:"model"`
	// Images and Captions are the collection's sizes; ImagesDone and
	// CaptionsDone how many of them Weaviate has acknowledged (in item
	// order). The index is searchable when Complete.
	Images       int  `json:"images"`
	Captions     int  `json:"captions"`
	ImagesDone   int  `json:"images_done"`
	CaptionsDone int  `json:"captions_done"`
	Complete     bool `json:"complete"`
}

// IsIndex reports whether dir holds a Weaviate-backed index (its
// manifest, complete or not).
func IsIndex(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, ManifestFile))
	return err == nil && st.Mode().IsRegular()
}

// readManifest reads and checks dir's manifest.
func readManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	b, err := infile.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("weaviate index: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("weaviate index %s: %w", path, err)
	}
	switch {
	case m.Format != Format:
		return nil, fmt.Errorf("weaviate index %s: format %q, want %q", path, m.Format, Format)
	case m.Version != Version:
		return nil, fmt.Errorf("weaviate index %s: version %d; this xmr reads version %d", path, m.Version, Version)
	case m.Model.File != modelFile:
		return nil, fmt.Errorf("weaviate index %s: model file %q, want %q", path, m.Model.File, modelFile)
	case m.Model.Scoring == "":
		return nil, fmt.Errorf("weaviate index %s: no model scoring", path)
	case m.Model.Dim <= 0:
		return nil, fmt.Errorf("weaviate index %s: model dim %d, want a positive width", path, m.Model.Dim)
	case m.Images < 0 || m.Captions < 0:
		return nil, fmt.Errorf("weaviate index %s: %d images and %d captions; counts are not negative", path, m.Images, m.Captions)
	case m.ImagesDone < 0 || m.ImagesDone > m.Images || m.CaptionsDone < 0 || m.CaptionsDone > m.Captions:
		return nil, fmt.Errorf("weaviate index %s: %d of %d images and %d of %d captions uploaded; want 0 to the count", path, m.ImagesDone, m.Images, m.CaptionsDone, m.Captions)
	case m.Complete && (m.ImagesDone != m.Images || m.CaptionsDone != m.Captions):
		return nil, fmt.Errorf("weaviate index %s: complete, but %d of %d images and %d of %d captions uploaded", path, m.ImagesDone, m.Images, m.CaptionsDone, m.Captions)
	}
	if err := m.Config.check(); err != nil {
		return nil, fmt.Errorf("weaviate index %s: %w", path, err)
	}
	return &m, nil
}

func writeManifest(dir string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(filepath.Join(dir, ManifestFile), append(b, '\n'))
}

// BuildOptions tune Build.
type BuildOptions struct {
	// Overwrite deletes the index's collections and uploads again; without
	// it, a complete index is refused and an incomplete one (a killed
	// upload) resumes where it stopped.
	Overwrite bool
	// Progress shows progress bars (or log lines off a terminal).
	Progress bool
	// Encode tunes the encoding batches.
	Encode *model.EncodeOptions
}

// Build encodes a collection with m and uploads it to Weaviate as cfg
// says, writing the index directory dir (weaviate.json and the model).
// Objects have deterministic ids (images by dataset id, captions by item
// number), and the manifest records, after every acknowledged run, how
// many items are uploaded: a killed or failed build run again with the
// same arguments skips them and resumes.
func Build(ctx context.Context, dir string, m model.Model, c index.Collection, cfg Config, o *BuildOptions) (*index.Stats, error) {
	var opt BuildOptions
	if o != nil {
		opt = *o
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if n := c.Images.Len(); len(c.ImageRows) != n {
		return nil, fmt.Errorf("weaviate index %s: %d image rows for %d images", dir, len(c.ImageRows), n)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("weaviate index %s: %w", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err == nil {
		return nil, fmt.Errorf("weaviate index %s: the directory holds a local xmr index; choose another --out", dir)
	}
	lock, err := lockfile.Acquire(dir, "index directory")
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	u, err := NewUploader(ctx, cfg)
	if err != nil {
		return nil, err
	}
	fp := model.Fingerprint(m)
	man := &Manifest{Format: Format, Version: Version, Config: cfg, Images: c.Images.Len(), Captions: len(c.Captions),
		Model: index.ModelInfo{Name: m.Name(), File: modelFile, Fingerprint: fp, Dim: m.Config().EmbeddingDim(), Scoring: m.Scoring()}}
	if prev, err := readManifest(dir); err == nil && !opt.Overwrite {
		switch {
		case prev.Complete:
			return nil, fmt.Errorf("weaviate index %s is complete (%d images, %d captions in %s): replace it with --overwrite", dir, prev.Images, prev.Captions, prev.Config.URL)
		case prev.Model.Fingerprint != fp || prev.Images != man.Images || prev.Captions != man.Captions ||
			prev.Config.Collection != cfg.Collection:
			return nil, fmt.Errorf("weaviate index %s: an unfinished upload of another model or collection (%s, %d images, %d captions, collection %s) is there; resume it with the same arguments, or start again with --overwrite",
				dir, prev.Model.Fingerprint, prev.Images, prev.Captions, prev.Config.Collection)
		}
		man.ImagesDone, man.CaptionsDone = prev.ImagesDone, prev.CaptionsDone
		u.SkipExisting = true
		slog.Info("resuming the upload", "index", dir, "images done", man.ImagesDone, "captions done", man.CaptionsDone)
	} else if opt.Overwrite {
		if err := u.Reset(ctx); err != nil {
			return nil, err
		}
	} else if name, err := u.anyCollection(ctx); err != nil {
		return nil, err
	} else if name != "" {
		return nil, fmt.Errorf("weaviate index %s: collection %s already exists in %s (another index?): replace it with --overwrite, or choose another --collection", dir, name, cfg.URL)
	}
	if err := model.Save(filepath.Join(dir, modelFile), m, nil, nil); err != nil {
		return nil, fmt.Errorf("weaviate index %s: %w", dir, err)
	}
	if err := writeManifest(dir, man); err != nil {
		return nil, err
	}
	if err := u.EnsureCollections(ctx); err != nil {
		return nil, err
	}
	s := &sink{u: u, dir: dir, man: man}
	if opt.Progress {
		s.bar = progress.New("upload images", int64(man.Images-man.ImagesDone), "images")
	}
	sub := index.Collection{Images: model.SliceImages(c.Images, man.ImagesDone, man.Images),
		ImageRows: c.ImageRows[man.ImagesDone:], Captions: c.Captions[man.CaptionsDone:]}
	s.imageBase, s.captionBase = man.ImagesDone, man.CaptionsDone
	st, err := index.Encode(ctx, m, sub, s, &index.BuildOptions{SegmentItems: 512, Encode: opt.Encode})
	s.bar.Finish()
	if err != nil {
		return nil, err
	}
	man.Complete = true
	if err := writeManifest(dir, man); err != nil {
		return nil, err
	}
	return st, nil
}

// sink uploads what index.Encode encodes and records the progress in the
// manifest after each run.
type sink struct {
	u                      *Uploader
	dir                    string
	man                    *Manifest
	bar                    *progress.Bar
	imageBase, captionBase int
	captionsStarted        bool
}

func (s *sink) AddImages(ctx context.Context, e *model.Embeddings, rows []index.ImageRow) error {
	if err := s.u.AddImages(ctx, s.imageBase, e, rows, s.bar); err != nil {
		return err
	}
	s.imageBase += e.Len()
	s.man.ImagesDone = s.imageBase
	return writeManifest(s.dir, s.man)
}

func (s *sink) AddCaptions(ctx context.Context, e *model.Embeddings, rows []index.CaptionRow) error {
	if !s.captionsStarted && s.bar != nil {
		s.bar.Finish()
		s.bar = progress.New("upload captions", int64(s.man.Captions-s.man.CaptionsDone), "captions")
	}
	s.captionsStarted = true
	if err := s.u.AddCaptions(ctx, s.captionBase, e, rows, s.bar); err != nil {
		return err
	}
	s.captionBase += e.Len()
	s.man.CaptionsDone = s.captionBase
	return writeManifest(s.dir, s.man)
}

// Uploader writes encoded images and captions into an index's Weaviate
// collections, in concurrent batches with retries. Build uses it; so do
// the benchmarks, which upload generated vectors.
type Uploader struct {
	c   *Client
	cfg Config
	// SkipExisting makes every batch leave out the objects that Weaviate
	// already holds: a resumed upload sets it. Sending an object again
	// (an update) is not harmless: Weaviate 1.35.2's multi-vector index
	// then returns wrong objects for some queries (docs/weaviate.md).
	SkipExisting bool
}

// NewUploader connects to the server of cfg, waiting up to a minute for
// it to be ready.
func NewUploader(ctx context.Context, cfg Config) (*Uploader, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	c, err := NewClient(cfg.URL)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.WaitReady(wctx); err != nil {
		return nil, err
	}
	return &Uploader{c: c, cfg: cfg}, nil
}

// anyCollection returns the name of one of the index's collections that
// exists in Weaviate, or "".
func (u *Uploader) anyCollection(ctx context.Context) (string, error) {
	for _, name := range []string{u.cfg.ImagesCollection(), u.cfg.CaptionsCollection()} {
		_, err := u.c.Class(ctx, name)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, errNotFound) {
			return "", fmt.Errorf("collection %s: %w", name, err)
		}
	}
	return "", nil
}

// Reset deletes the index's collections and their objects.
func (u *Uploader) Reset(ctx context.Context) error {
	for _, name := range []string{u.cfg.ImagesCollection(), u.cfg.CaptionsCollection()} {
		if err := u.c.DeleteClass(ctx, name); err != nil && !errors.Is(err, errNotFound) {
			return fmt.Errorf("delete collection %s: %w", name, err)
		}
	}
	return nil
}

// EnsureCollections creates the index's collections unless they exist.
func (u *Uploader) EnsureCollections(ctx context.Context) error {
	for _, cl := range []struct {
		name, multi string
		props       []map[string]any
	}{{u.cfg.ImagesCollection(), vecRegions, imageProps}, {u.cfg.CaptionsCollection(), vecWords, captionProps}} {
		if _, err := u.c.Class(ctx, cl.name); err == nil {
			continue
		} else if !errors.Is(err, errNotFound) {
			return fmt.Errorf("collection %s: %w", cl.name, err)
		}
		if err := u.c.CreateClass(ctx, u.cfg.classSchema(cl.name, cl.multi, cl.props)); err != nil {
			return fmt.Errorf("create collection %s: %w", cl.name, err)
		}
	}
	return nil
}

// AddImages uploads images first, first+1, ... (item numbers) with their
// catalogue rows; bar, if not nil, advances as batches are acknowledged.
func (u *Uploader) AddImages(ctx context.Context, first int, e *model.Embeddings, rows []index.ImageRow, bar *progress.Bar) error {
	if len(rows) != e.Len() {
		return fmt.Errorf("weaviate upload: %d image rows for %d images", len(rows), e.Len())
	}
	class := u.cfg.ImagesCollection()
	id := func(i int) string { return objectID(class, rows[i].ID) }
	return u.upload(ctx, class, e.Len(), bar, id, func(buf *bytes.Buffer, i int) {
		r := rows[i]
		props := map[string]any{"item": first + i, "extId": r.ID, "path": r.Path, "width": r.Width, "height": r.Height,
			"pos": e.ItemPos(i)}
		if len(r.Boxes) > 0 {
			flat := make([]float32, 0, 4*len(r.Boxes))
			for _, b := range r.Boxes {
				flat = append(flat, b[:]...)
			}
			props["boxes"] = flat
		}
		writeObject(buf, class, id(i), props, vecRegions, e, i)
	})
}

// AddCaptions uploads captions first, first+1, ... (item numbers).
func (u *Uploader) AddCaptions(ctx context.Context, first int, e *model.Embeddings, rows []index.CaptionRow, bar *progress.Bar) error {
	if len(rows) != e.Len() {
		return fmt.Errorf("weaviate upload: %d caption rows for %d captions", len(rows), e.Len())
	}
	class := u.cfg.CaptionsCollection()
	id := func(i int) string { return objectID(class, strconv.Itoa(first+i)) }
	return u.upload(ctx, class, e.Len(), bar, id, func(buf *bytes.Buffer, i int) {
		r := rows[i]
		props := map[string]any{"item": first + i, "text": r.Text, "imageId": r.ImageID, "pos": e.ItemPos(i)}
		writeObject(buf, class, id(i), props, vecWords, e, i)
	})
}

// upload sends n objects of class (with ids id(i), written by write) in
// batches of cfg.BatchSize, cfg.Parallel at a time, each retried up to
// cfg.Retries times.
func (u *Uploader) upload(ctx context.Context, class string, n int, bar *progress.Bar, id func(i int) string, write func(buf *bytes.Buffer, i int)) error {
	type job struct{ lo, hi int }
	jobs := make(chan job)
	errc := make(chan error, u.cfg.Parallel)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range u.cfg.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			for j := range jobs {
				var have map[string]bool
				if u.SkipExisting {
					var err error
					if have, err = u.existing(ctx, class, j.lo, j.hi, id); err != nil {
						errc <- err
						cancel()
						return
					}
				}
				buf.Reset()
				buf.WriteString(`{"objects":[`)
				sent := 0
				for i := j.lo; i < j.hi; i++ {
					if have[id(i)] {
						continue
					}
					if sent > 0 {
						buf.WriteByte(',')
					}
					write(&buf, i)
					sent++
				}
				buf.WriteString(`]}`)
				if sent > 0 {
					if err := u.send(ctx, buf.Bytes()); err != nil {
						errc <- err
						cancel()
						return
					}
				}
				bar.Add(int64(j.hi - j.lo))
			}
		}()
	}
send:
	for lo := 0; lo < n; lo += u.cfg.BatchSize {
		select {
		case jobs <- job{lo, min(lo+u.cfg.BatchSize, n)}:
		case <-ctx.Done():
			break send
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
	}
	return ctx.Err()
}

// existing returns the ids among id(lo..hi-1) of objects that class
// holds.
func (u *Uploader) existing(ctx context.Context, class string, lo, hi int, id func(i int) string) (map[string]bool, error) {
	ids := make([]string, 0, hi-lo)
	for i := lo; i < hi; i++ {
		ids = append(ids, id(i))
	}
	list, _ := json.Marshal(ids)
	consistency := ""
	if u.cfg.Replication > 1 {
		consistency = ",consistencyLevel:QUORUM"
	}
	query := fmt.Sprintf(`{Get{%s(limit:%d%s,where:{path:["id"],operator:ContainsAny,valueText:%s}){_additional{id}}}}`, class, len(ids), consistency, list)
	var out struct {
		Get map[string][]struct {
			Additional struct {
				ID string `json:"id"`
			} `json:"_additional"`
		} `json:"Get"`
	}
	if err := u.c.graphQL(ctx, query, &out); err != nil {
		return nil, fmt.Errorf("weaviate upload: which objects exist: %w", err)
	}
	have := map[string]bool{}
	for _, o := range out.Get[class] {
		have[o.Additional.ID] = true
	}
	return have, nil
}

// send posts one batch, retrying with exponential backoff.
func (u *Uploader) send(ctx context.Context, body []byte) error {
	consistency := "QUORUM"
	var err error
	for attempt := 0; ; attempt++ {
		if err = u.c.batch(ctx, body, consistency); err == nil {
			return nil
		}
		if attempt >= u.cfg.Retries || ctx.Err() != nil {
			return fmt.Errorf("weaviate upload to %s (after %d attempts): %w", u.cfg.URL, attempt+1, err)
		}
		wait := time.Duration(200<<attempt) * time.Millisecond
		slog.Warn("weaviate batch failed; retrying", "attempt", attempt+1, "wait", wait, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// writeObject writes one object of the batch body: its class, id,
// properties, multi-vector (item i's vectors of e, unless it has none) and
// global vector.
func writeObject(buf *bytes.Buffer, class, id string, props map[string]any, multi string, e *model.Embeddings, i int) {
	p, _ := json.Marshal(props) // plain strings and numbers: cannot fail
	fmt.Fprintf(buf, `{"class":%q,"id":%q,"properties":%s,"vectors":{`, class, id, p)
	if e.Count(i) > 0 {
		buf.WriteString(strconv.Quote(multi) + `:[`)
		v := e.Item(i)
		for r := 0; r < e.Count(i); r++ {
			if r > 0 {
				buf.WriteByte(',')
			}
			writeFloats(buf, v[r*e.Dim:(r+1)*e.Dim])
		}
		buf.WriteString(`],`)
	}
	buf.WriteString(strconv.Quote(vecGlobal) + `:`)
	writeFloats(buf, e.GlobalOf(i))
	buf.WriteString(`}}`)
}

// writeFloats writes v as a JSON array, each float32 in the fewest digits
// that read back to it exactly.
func writeFloats(buf *bytes.Buffer, v []float32) {
	b := buf.AvailableBuffer()
	b = append(b, '[')
	for k, x := range v {
		if k > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	}
	b = append(b, ']')
	buf.Write(b)
}

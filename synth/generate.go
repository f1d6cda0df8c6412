package synth

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/blas"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/lockfile"
	"github.com/xmr-project/xmr/npy"
	"github.com/xmr-project/xmr/progress"
)

// World generates the images, features and captions of one Config. Every
// method may be called from several goroutines.
type World struct {
	cfg    Config
	splits []Split
	proj   []float32 // StatsDim x Dim, row-major
	chunk  int       // images per projection batch
}

// New checks cfg, fills in its defaults and allocates the splits.
func New(cfg Config) (*World, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	splits, err := Allocate(cfg.N, cfg.Dev, cfg.Test)
	if err != nil {
		return nil, err
	}
	return &World{
		cfg:    cfg,
		splits: splits,
		proj:   Projection(cfg.Dim),
		// The batch size depends on the settings only, never on the machine,
		// so that every projection is the same BLAS call in every run.
		chunk: max(1, min(32, (1<<20)/(cfg.Regions*cfg.Dim))),
	}, nil
}

// Config returns the world's settings with defaults filled in.
func (w *World) Config() Config { return w.cfg }

// Splits returns the splits in writing order: testall, test, dev, train.
func (w *World) Splits() []Split { return append([]Split(nil), w.splits...) }

// Split returns the split called name.
func (w *World) Split(name string) (Split, bool) {
	for _, s := range w.splits {
		if s.Name == name {
			return s, true
		}
	}
	return Split{}, false
}

// Image is one generated image and everything derived from it except the
// projected features (see Features).
type Image struct {
	// Split and Index locate the image; Global is its number in the world
	// and ID its id.
	Split         string
	Index, Global int
	ID            string
	Scene         Scene
	Pixels        *image.RGBA
	// Regions are the ordered region proposals; Stats holds StatsDim
	// statistics per region.
	Regions  []Region
	Stats    []float32
	Captions []Caption
}

// Image generates image i of the named split.
func (w *World) Image(split string, i int) (*Image, error) {
	sp, ok := w.Split(split)
	if !ok {
		return nil, fmt.Errorf("synth: no split %q", split)
	}
	if i < 0 || i >= sp.Len {
		return nil, fmt.Errorf("synth: image %d out of range for split %s of %d images", i, split, sp.Len)
	}
	wk := newWorker(w)
	img := &Image{Stats: make([]float32, w.cfg.Regions*StatsDim)}
	wk.makeImage(sp, i, img)
	img.Pixels = wk.rend.img
	img.Stats = img.Stats[:len(img.Regions)*StatsDim]
	return img, nil
}

// Features returns the projected features of img, Regions x Dim (padded rows
// zero), exactly as written to the ims file.
func (w *World) Features(img *Image) []float32 {
	sp, _ := w.Split(img.Split)
	slot := img.Index % w.chunk
	rd := w.cfg.Regions * w.cfg.Dim
	stats := make([]float32, w.chunk*w.cfg.Regions*StatsDim)
	copy(stats[slot*w.cfg.Regions*StatsDim:], img.Stats)
	feats := make([]float32, w.chunk*rd)
	w.project(stats, feats)
	f := feats[slot*rd : (slot+1)*rd]
	w.finishFeatures(f, len(img.Regions), sp.Start+img.Index, newRNG())
	return f
}

// project computes feats = stats x proj for a whole chunk (always the same
// shape).
func (w *World) project(stats, feats []float32) {
	m := w.chunk * w.cfg.Regions
	blas.Sgemm(false, false, m, w.cfg.Dim, StatsDim, 1, stats, StatsDim, w.proj, w.cfg.Dim, 0, feats, w.cfg.Dim)
}

// finishFeatures adds the noise of global image g to its nvalid rows,
// applies the ReLU and zeroes the padded rows.
func (w *World) finishFeatures(f []float32, nvalid, g int, r *rng) {
	d := w.cfg.Dim
	valid := f[:nvalid*d]
	if w.cfg.Noise > 0 {
		r.reset(w.cfg.Seed, tagNoise, g)
		sd := w.cfg.Noise
		for i, v := range valid {
			valid[i] = float32(float64(v) + sd*r.NormFloat64())
		}
	}
	for i, v := range valid {
		if !(v > 0) {
			valid[i] = 0
		}
	}
	clear(f[nvalid*d:])
}

// worker holds the reusable state of one generating goroutine.
type worker struct {
	w      *World
	rend   *renderer
	ext    *extractor
	capt   captioner
	r      *rng
	pngBuf bytes.Buffer
	png    pngWriter
}

func newWorker(w *World) *worker {
	return &worker{w: w, rend: newRenderer(), ext: newExtractor(), r: newRNG()}
}

// makeImage generates local image l of sp into img (reusing its slices);
// the pixels stay in wk.rend.img until the next call.
func (wk *worker) makeImage(sp Split, l int, img *Image) {
	cfg := &wk.w.cfg
	g := sp.Start + l
	fam, v := familyOf(cfg.Seed, sp, l)
	img.Split, img.Index, img.Global, img.ID = sp.Name, l, g, IDOf(g)
	img.Scene = makeScene(cfg.Seed, fam, v, g, wk.r)
	wk.rend.render(&img.Scene)
	img.Regions = proposals(&img.Scene, cfg.Regions, wk.r.reset(cfg.Seed, tagRegions, g), img.Regions)
	wk.ext.prepare(wk.rend.img)
	stats := img.Stats[:len(img.Regions)*StatsDim]
	for k := range img.Regions {
		wk.ext.region(wk.rend.img, img.Regions[k].Box, stats[k*StatsDim:(k+1)*StatsDim])
	}
	clear(img.Stats[len(stats):])
	img.Captions = wk.capt.captions(&img.Scene, wk.r.reset(cfg.Seed, tagCaptions, g), img.Captions)
}

// Output files of a split, in a fixed order.
const (
	fCaps = iota
	fIms
	fBoxes
	fSizes
	fNRegions
	fIDs
	fAlign
	fScenes
	nFiles
)

var fileSuffixes = [nFiles]string{"_caps.txt", "_ims.npy", "_boxes.npy", "_sizes.npy", "_nregions.npy", "_ids.txt", "_align.jsonl", "_scenes.jsonl"}

// chunk is the output of a run of consecutive images.
type chunk struct {
	start, n int // local index of the first image, count
	stats    []float32
	feats    []float32
	// bin holds the binary records (ims, boxes, sizes, nregions) and text the
	// text records (caps, ids, align, scenes); off[f][i] is where image i's
	// record of file f starts, off[f][n] the end.
	bin  [nFiles][]byte
	text [nFiles]bytes.Buffer
	off  [nFiles][]int
	img  Image
	err  error
}

// output is the set of temporary files of one split.
type output struct {
	sp    Split
	files [nFiles]*atomicfile.File
}

func (w *World) openOutput(dir string, sp Split) (*output, error) {
	o := &output{sp: sp}
	R, D, N := w.cfg.Regions, w.cfg.Dim, sp.Len
	headers := [nFiles][]byte{
		fIms:      npy.Header{DType: npy.Float32, Shape: []int{N, R, D}}.Bytes(),
		fBoxes:    npy.Header{DType: npy.Float32, Shape: []int{N, R, 4}}.Bytes(),
		fSizes:    npy.Header{DType: npy.Float32, Shape: []int{N, 2}}.Bytes(),
		fNRegions: npy.Header{DType: npy.Int32, Shape: []int{N}}.Bytes(),
	}
	for f := range nFiles {
		t, err := atomicfile.Create(filepath.Join(dir, sp.Name+fileSuffixes[f]))
		if err != nil {
			o.abort()
			return nil, err
		}
		o.files[f] = t
		if headers[f] != nil {
			if _, err := t.Write(headers[f]); err != nil {
				o.abort()
				return nil, err
			}
		}
	}
	return o, nil
}

func (o *output) abort() {
	for _, t := range o.files {
		if t != nil {
			t.Abort()
		}
	}
}

// write appends the first k images of c.
func (o *output) write(c *chunk, k int) error {
	for f := range nFiles {
		var data []byte
		if c.bin[f] != nil {
			data = c.bin[f][:c.off[f][k]]
		} else {
			data = c.text[f].Bytes()[:c.off[f][k]]
		}
		if _, err := o.files[f].Write(data); err != nil {
			return fmt.Errorf("write %s: %w", o.files[f].Name(), err)
		}
	}
	return nil
}

// Manifest is the content of world.json: the settings, the splits and the
// vocabulary of a generated world.
type Manifest struct {
	// Format is "xmr-synth"; Version its version, 1.
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Flags are the generation settings.
	Flags Flags `json:"flags"`
	// Seed, Images (total distinct images), Dim and Regions repeat the
	// settings the files depend on.
	Seed    uint64 `json:"seed"`
	Images  int    `json:"images"`
	Dim     int    `json:"dim"`
	Regions int    `json:"regions"`
	// ImageWidth and ImageHeight are the pixel size of every image.
	ImageWidth       int  `json:"image_width"`
	ImageHeight      int  `json:"image_height"`
	CaptionsPerImage int  `json:"captions_per_image"`
	PNG              bool `json:"png"` // images/{split}/{id}.png were written
	// Splits lists the splits in writing order: testall, test, dev, train.
	Splits    []Split   `json:"splits"`
	Extractor Extractor `json:"extractor"`
	// The vocabulary: categories, colours, size words (small, large) and
	// background tones.
	Categories  []Category   `json:"categories"`
	Colours     []Colour     `json:"colours"`
	Sizes       [2][]string  `json:"sizes"`
	Backgrounds []Background `json:"backgrounds"`
}

// Flags are the generation settings, defaults filled in, except that Dev and
// Test stay 0 when the split sizes were automatic. Workers is not among them:
// it never changes the output.
type Flags struct {
	N        int     `json:"n"`
	Seed     uint64  `json:"seed"`
	Dim      int     `json:"dim"`
	Regions  int     `json:"regions"`
	Noise    float64 `json:"noise"`
	NoImages bool    `json:"no_images"`
	Dev      int     `json:"dev"`
	Test     int     `json:"test"`
}

// Extractor describes the feature extractor in world.json.
type Extractor struct {
	Version     string `json:"version"`
	Description string `json:"description"`
	// Stats names the StatsDim statistics of a region, in order.
	Stats []string `json:"stats"`
	// ProjectionSeed and ProjectionStd define the random projection;
	// Noise is the feature noise std.
	ProjectionSeed uint64  `json:"projection_seed"`
	ProjectionStd  float64 `json:"projection_std"`
	Noise          float64 `json:"noise"`
}

const extractorDescription = "region statistics of the rendered pixels inside each box " +
	"(geometry, colour, foreground fill, hue histogram, moments and Hu invariants, edge orientation histogram, " +
	"radial profile, 3x3 fill grid, compactness, bias), projected by a fixed Gaussian matrix (projection_seed), " +
	"plus Gaussian noise (noise), then max(0, .); padded slots are zero"

// Manifest returns the world.json content of w.
func (w *World) Manifest() *Manifest {
	c := w.cfg
	return &Manifest{
		Format: "xmr-synth", Version: 1,
		Flags: Flags{N: c.N, Seed: c.Seed, Dim: c.Dim, Regions: c.Regions, Noise: c.Noise, NoImages: c.NoImages, Dev: c.Dev, Test: c.Test},
		Seed:  c.Seed, Images: c.N, Dim: c.Dim, Regions: c.Regions,
		ImageWidth: ImageWidth, ImageHeight: ImageHeight, CaptionsPerImage: CaptionsPerImage,
		PNG: !c.NoImages, Splits: w.Splits(),
		Extractor: Extractor{Version: ExtractorVersion, Description: extractorDescription, Stats: StatNames,
			ProjectionSeed: ProjectionSeed, ProjectionStd: ProjectionStd, Noise: c.Noise},
		Categories: Categories, Colours: Colours, Sizes: SizeWords, Backgrounds: Backgrounds,
	}
}

// Generate writes the world of cfg into dir; see World.Write.
func Generate(ctx context.Context, dir string, cfg Config) (*Manifest, error) {
	w, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return w.Write(ctx, dir)
}

// SingleThreadBLAS makes OpenBLAS run each product on the calling thread
// and returns a function restoring the previous setting. Generation runs one
// product per chunk on every worker, so BLAS threads would only compete with
// the workers. The output does not depend on it.
func SingleThreadBLAS() (restore func()) {
	ob, ok := blas.Current().(*blas.OpenBLAS)
	if !ok || ob.Threads() <= 1 {
		return func() {}
	}
	prev := ob.Threads()
	ob.SetThreads(1)
	return func() { ob.SetThreads(prev) }
}

// Write generates every split into dir (created if needed): the files of
// each split, images/{split}/{id}.png unless NoImages, then world.json. All
// files are written under temporary names and renamed into place only after
// everything was generated and synced; world.json is removed first and
// written last, so its presence marks a complete world. Before the first
// rename Write creates the marker data.IncompleteMarker, and it removes it
// after world.json: a world whose renames were cut short by a kill keeps
// the marker, and readers refuse it until a Write completes. On error or
// cancellation before the renames the temporary files are removed and the
// previous content of dir is left as it was.
func (w *World) Write(ctx context.Context, dir string) (m *Manifest, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	lock, err := lockfile.Acquire(dir, "world directory")
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	defer lock.Release()
	if err := removeStale(dir); err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	var outs []*output
	var imgDirs []string // temporary image directories, by split
	var imgFinal []string
	imagesDir := filepath.Join(dir, "images")
	defer func() {
		if err != nil {
			for _, o := range outs {
				o.abort()
			}
			for _, d := range imgDirs {
				os.RemoveAll(d)
			}
			os.Remove(imagesDir) // only if empty
		}
	}()
	var bar *progress.Bar
	if w.cfg.Progress {
		bar = progress.New("synth", int64(w.cfg.N), "images")
	}
	for _, sp := range w.splits {
		if sp.Of != "" {
			continue // written with its parent
		}
		var parts []*output
		var pdirs []string
		for _, s := range w.splits {
			if s.Name != sp.Name && s.Of != sp.Name {
				continue
			}
			o, err := w.openOutput(dir, s)
			if err != nil {
				return nil, err
			}
			outs = append(outs, o)
			parts = append(parts, o)
			if !w.cfg.NoImages {
				if err := os.MkdirAll(imagesDir, 0o755); err != nil {
					return nil, fmt.Errorf("synth: %w", err)
				}
				d, err := os.MkdirTemp(imagesDir, "."+s.Name+".tmp-")
				if err == nil {
					err = os.Chmod(d, 0o755)
				}
				if err != nil {
					return nil, fmt.Errorf("synth: %w", err)
				}
				imgDirs = append(imgDirs, d)
				pdirs = append(pdirs, d)
			}
			imgFinal = append(imgFinal, filepath.Join(imagesDir, s.Name))
		}
		if err := w.run(ctx, sp, parts, pdirs, bar); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	bar.Finish()
	// Make everything durable before anything gets a final name.
	for _, o := range outs {
		for _, t := range o.files {
			if err := t.Close(); err != nil {
				return nil, err
			}
		}
	}
	if len(imgDirs) > 0 {
		if err := syncTree(imagesDir); err != nil {
			return nil, fmt.Errorf("synth: sync images: %w", err)
		}
	}
	// From here on the files are renamed one by one over the old world's:
	// a kill leaves a mix of the two. The marker, durable before the first
	// rename and removed after world.json is written, makes readers refuse
	// such a mix (LoadManifest, data.LoadPrecomp).
	marker := filepath.Join(dir, data.IncompleteMarker)
	if err := atomicfile.WriteBytes(marker, []byte("xmr synth is replacing the files of this world; if no xmr synth runs, it was stopped half-way: run it again\n")); err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	manifest := filepath.Join(dir, "world.json")
	if err := os.Remove(manifest); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("synth: %w", err)
	}
	for _, o := range outs {
		for _, t := range o.files {
			if testHookRename != nil {
				if err := testHookRename(t.Name()); err != nil {
					return nil, err
				}
			}
			if err := t.Commit(); err != nil {
				return nil, err
			}
		}
	}
	for i, final := range imgFinal {
		tmp := ""
		if i < len(imgDirs) {
			tmp = imgDirs[i]
		}
		if err := replaceDir(final, tmp); err != nil {
			return nil, fmt.Errorf("synth: %w", err)
		}
	}
	if _, err := os.Stat(imagesDir); err == nil {
		if err := atomicfile.SyncDir(imagesDir); err != nil {
			return nil, fmt.Errorf("synth: %w", err)
		}
	}
	imgDirs = nil
	m = w.Manifest()
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteBytes(manifest, append(b, '\n')); err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	if err := os.Remove(marker); err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	return m, nil
}

// testHookRename, when set (by tests), is called before each file of
// Write is renamed into place; an error stops Write there, as a kill would.
var testHookRename func(path string) error

// splitNames are the names of the splits a world has.
var splitNames = []string{"testall", "test", "dev", "train"}

// removeStale removes what a killed Write left in dir: temporary files and
// image directories of the names Write gives them (".test_ims.npy.tmp-*",
// "images/.dev.tmp-*", "images/.dev.old-*"). The caller holds dir's lock, so
// no other Write is using them; files of other names are left alone.
func removeStale(dir string) error {
	var prefixes []string
	for _, s := range splitNames {
		for _, suf := range fileSuffixes {
			prefixes = append(prefixes, "."+s+suf+".tmp-")
		}
	}
	prefixes = append(prefixes, ".world.json.tmp-")
	var imgPrefixes []string
	for _, s := range splitNames {
		imgPrefixes = append(imgPrefixes, "."+s+".tmp-", "."+s+".old-")
	}
	n, size := 0, int64(0)
	for _, d := range []struct {
		path     string
		prefixes []string
	}{{dir, prefixes}, {filepath.Join(dir, "images"), imgPrefixes}} {
		entries, err := os.ReadDir(d.path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return err
		}
		for _, e := range entries {
			if !slices.ContainsFunc(d.prefixes, func(p string) bool { return strings.HasPrefix(e.Name(), p) }) {
				continue
			}
			p := filepath.Join(d.path, e.Name())
			size += treeSize(p)
			if err := os.RemoveAll(p); err != nil {
				return fmt.Errorf("remove stale %s: %w", p, err)
			}
			n++
		}
	}
	if n > 0 {
		slog.Info("synth: removed the temporary files of an interrupted run", "dir", dir, "entries", n, "bytes", size)
	}
	return nil
}

// treeSize returns the bytes of the files under path, 0 where unreadable.
func treeSize(path string) int64 {
	var n int64
	filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// replaceDir puts directory tmp in place of final, removing the old final;
// with tmp empty it only removes final (stale images of a previous world).
func replaceDir(final, tmp string) error {
	old := ""
	if _, err := os.Stat(final); err == nil {
		// A fresh unused name: os.Rename refuses to replace a directory.
		o, err := os.MkdirTemp(filepath.Dir(final), "."+filepath.Base(final)+".old-")
		if err != nil {
			return err
		}
		if err := os.Remove(o); err != nil {
			return err
		}
		if err := os.Rename(final, o); err != nil {
			return err
		}
		old = o
	}
	if tmp != "" {
		if err := os.Rename(tmp, final); err != nil {
			return err
		}
	}
	if old != "" {
		return os.RemoveAll(old)
	}
	return nil
}

// run generates split sp with a worker pool and writes it, in order, to
// outs[0] (sp itself) and outs[1:] (splits that are prefixes of sp). dirs
// are the matching temporary image directories (none without images).
func (w *World) run(ctx context.Context, sp Split, outs []*output, dirs []string, bar *progress.Bar) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	nchunks := (sp.Len + w.chunk - 1) / w.chunk
	workers := min(w.cfg.Workers, nchunks)
	type job struct {
		k   int
		res chan *chunk
	}
	jobs := make(chan job)
	order := make(chan job, 2*workers+2) // bounds the chunks in memory
	pool := sync.Pool{New: func() any { return w.newChunk() }}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // feeder
		defer wg.Done()
		defer close(jobs)
		defer close(order)
		for k := range nchunks {
			j := job{k, make(chan *chunk, 1)}
			select {
			case order <- j:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- j:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk := newWorker(w)
			for j := range jobs {
				c := pool.Get().(*chunk)
				if ctx.Err() != nil {
					c.err = ctx.Err()
				} else {
					c.err = wk.safeFill(sp, j.k, c, outs, dirs)
				}
				j.res <- c
			}
		}()
	}
	err := func() error {
		for j := range order {
			var c *chunk
			select {
			case c = <-j.res:
			case <-ctx.Done():
				return ctx.Err()
			}
			if c.err != nil {
				return c.err
			}
			for _, o := range outs {
				if k := min(c.n, o.sp.Len-c.start); k > 0 {
					if err := o.write(c, k); err != nil {
						return err
					}
				}
			}
			bar.Add(int64(c.n))
			pool.Put(c)
		}
		return ctx.Err()
	}()
	cancel()
	wg.Wait()
	return err
}

func (w *World) newChunk() *chunk {
	R, D, C := w.cfg.Regions, w.cfg.Dim, w.chunk
	c := &chunk{
		stats: make([]float32, C*R*StatsDim),
		feats: make([]float32, C*R*D),
	}
	c.bin[fIms] = make([]byte, C*R*D*4)
	c.bin[fBoxes] = make([]byte, C*R*4*4)
	c.bin[fSizes] = make([]byte, C*2*4)
	c.bin[fNRegions] = make([]byte, C*4)
	for f := range nFiles {
		c.off[f] = make([]int, C+1)
	}
	c.img.Stats = make([]float32, R*StatsDim)
	return c
}

// Record sizes of the binary files, per image.
func (w *World) recordSize(f int) int {
	switch f {
	case fIms:
		return w.cfg.Regions * w.cfg.Dim * 4
	case fBoxes:
		return w.cfg.Regions * 16
	case fSizes:
		return 8
	case fNRegions:
		return 4
	}
	return 0
}

// safeFill is fill with a panic (a bug) turned into an error, so that Write
// still removes its temporary files.
func (wk *worker) safeFill(sp Split, k int, c *chunk, outs []*output, dirs []string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("synth: panic generating %s chunk %d: %v\n%s", sp.Name, k, p, debug.Stack())
		}
	}()
	return wk.fill(sp, k, c, outs, dirs)
}

// fill generates chunk k of sp into c; PNG files go to dirs[i] for every
// output whose split holds the image.
func (wk *worker) fill(sp Split, k int, c *chunk, outs []*output, dirs []string) error {
	w := wk.w
	R, S := w.cfg.Regions, StatsDim
	c.start = k * w.chunk
	c.n = min(w.chunk, sp.Len-c.start)
	clear(c.stats)
	for f := range nFiles {
		c.text[f].Reset()
		if c.bin[f] != nil {
			for i := range c.n + 1 {
				c.off[f][i] = i * w.recordSize(f)
			}
		}
	}
	img := &c.img
	le := binary.LittleEndian
	for i := range c.n {
		l := c.start + i
		img.Stats = c.stats[i*R*S : (i+1)*R*S]
		wk.makeImage(sp, l, img)
		nv := len(img.Regions)
		// boxes, sizes, nregions
		bx := c.bin[fBoxes][i*R*16 : (i+1)*R*16]
		clear(bx)
		for r, reg := range img.Regions {
			for q := range 4 {
				le.PutUint32(bx[r*16+4*q:], math.Float32bits(reg.Box[q]))
			}
		}
		le.PutUint32(c.bin[fSizes][i*8:], math.Float32bits(ImageWidth))
		le.PutUint32(c.bin[fSizes][i*8+4:], math.Float32bits(ImageHeight))
		le.PutUint32(c.bin[fNRegions][i*4:], uint32(int32(nv)))
		// text records
		for q, cp := range img.Captions {
			c.text[fCaps].WriteString(cp.Text)
			c.text[fCaps].WriteByte('\n')
			wk.writeJSON(&c.text[fAlign], alignRecord{Caption: l*CaptionsPerImage + q, Image: l, Words: cp.Words})
		}
		c.text[fIDs].WriteString(img.ID)
		c.text[fIDs].WriteByte('\n')
		wk.writeJSON(&c.text[fScenes], sceneRecordOf(img))
		for _, f := range []int{fCaps, fIDs, fAlign, fScenes} {
			c.off[f][i+1] = c.text[f].Len()
		}
		if len(dirs) > 0 {
			if err := wk.writePNG(img, outs, dirs); err != nil {
				return err
			}
		}
	}
	w.project(c.stats, c.feats)
	rd := R * w.cfg.Dim
	for i := range c.n {
		f := c.feats[i*rd : (i+1)*rd]
		nv := int(int32(le.Uint32(c.bin[fNRegions][i*4:])))
		w.finishFeatures(f, nv, sp.Start+c.start+i, wk.r)
		b := c.bin[fIms][i*rd*4 : (i+1)*rd*4]
		for q, v := range f {
			le.PutUint32(b[4*q:], math.Float32bits(v))
		}
	}
	return nil
}

func (wk *worker) writeJSON(buf *bytes.Buffer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // our own records always marshal
	}
	buf.Write(b)
	buf.WriteByte('\n')
}

func (wk *worker) writePNG(img *Image, outs []*output, dirs []string) error {
	wk.pngBuf.Reset()
	if err := wk.png.encode(&wk.pngBuf, wk.rend.img); err != nil {
		return fmt.Errorf("encode %s: %w", img.ID, err)
	}
	for i, o := range outs {
		if img.Index >= o.sp.Len {
			continue
		}
		path := filepath.Join(dirs[i], img.ID+".png")
		if err := os.WriteFile(path, wk.pngBuf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	return nil
}

// alignRecord is one line of {split}_align.jsonl.
type alignRecord struct {
	Caption int       `json:"caption"`
	Image   int       `json:"image"`
	Words   []WordRef `json:"words"`
}

// SceneRecord is one line of {split}_scenes.jsonl: an image's scene as
// generated (see docs/synth.md).
type SceneRecord struct {
	Image      int            `json:"image"`
	ID         string         `json:"id"`
	Family     string         `json:"family"`
	Variant    int            `json:"variant"`
	Change     string         `json:"change,omitempty"`
	Width      int            `json:"width"`
	Height     int            `json:"height"`
	Background string         `json:"background"`
	NRegions   int            `json:"nregions"`
	Objects    []ObjectRecord `json:"objects"`
}

// ObjectRecord is one object of a SceneRecord: what it is, where it is
// drawn (centre, radius, angle, grid cell, pixel box) and the region
// proposal that covers it best.
type ObjectRecord struct {
	Category string  `json:"category"`
	Colour   string  `json:"colour"`
	Size     string  `json:"size"`
	X        float64 `json:"x"`
	Y        float64 `json:"y"`
	Radius   float64 `json:"radius"`
	Angle    float64 `json:"angle"`
	Cell     string  `json:"cell"`
	Box      [4]int  `json:"box"`
	Region   int     `json:"region"`
}

var cellNames = [3][3]string{
	{"top left", "top", "top right"},
	{"left", "middle", "right"},
	{"bottom left", "bottom", "bottom right"},
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

func sceneRecordOf(img *Image) SceneRecord {
	s := &img.Scene
	rec := SceneRecord{Image: img.Index, ID: img.ID, Family: IDOf(s.Family), Variant: s.Variant, Change: s.Change,
		Width: ImageWidth, Height: ImageHeight, Background: Backgrounds[s.Background].Name, NRegions: len(img.Regions)}
	for _, o := range s.Objects {
		size := "small"
		if o.Large {
			size = "large"
		}
		row, col := min(2, int(3*o.Y/ImageHeight)), min(2, int(3*o.X/ImageWidth))
		rec.Objects = append(rec.Objects, ObjectRecord{
			Category: Categories[o.Category].Name, Colour: Colours[o.Colour].Name, Size: size,
			X: round2(o.X), Y: round2(o.Y), Radius: round2(o.Radius), Angle: round2(o.Angle),
			Cell: cellNames[row][col], Box: o.Box, Region: o.Region,
		})
	}
	return rec
}

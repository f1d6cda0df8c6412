package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/outpath"
	"github.com/xmr-project/xmr/weaviate"
)

var indexFlags indexOptions

// indexOptions are xmr index's flags.
type indexOptions struct {
	checkpoint string
	data       dataFlags
	split      string
	out        string
	images     string
	appendTo   bool
	overwrite  bool
	backend    string
	weaviate   weaviate.Config
	ext        extractorFlags
	workers    int
	layout     layoutFlags
	cpuProfile string
}

// layoutFlags choose how a local index stores its vectors.
type layoutFlags struct {
	keepFloat32, compress bool
}

func (l *layoutFlags) set(fs *flag.FlagSet) {
	fs.BoolVar(&l.keepFloat32, "keep-float32", false, fmt.Sprintf("store the float32 vectors (with int8 and 4-bit codes) however large the collection: exact search (--exact) and float32 re-ranking; the default above %d images or captions is compressed codes only (docs/index-format.md)", index.AutoCompressItems))
	fs.BoolVar(&l.compress, "compress", false, fmt.Sprintf("store compressed codes only (each vector's cell and its residual in 4-bit codes), however small the collection; the default at most %d images or captions keeps float32 vectors", index.AutoCompressItems))
}

// layout returns the layout the flags ask for, or a usage error.
func (l layoutFlags) layout() (index.Layout, error) {
	switch {
	case l.keepFloat32 && l.compress:
		return 0, usageErrorf("--keep-float32 and --compress contradict each other: give one")
	case l.keepFloat32:
		return index.LayoutFloat32, nil
	case l.compress:
		return index.LayoutCompressed, nil
	}
	return index.LayoutAuto, nil
}

func init() {
	register(&command{
		name:    "index",
		summary: "encode a collection (images and captions) with a model into an on-disk index for xmr search",
		usage:   "(--checkpoint CKPT --data PATH [--split S] | [--checkpoint CKPT] --images PHOTOS) --out INDEX [--append | --overwrite] [--backend weaviate --weaviate-url URL] [flags]",
		examples: `  xmr index --checkpoint runs/teran --data world --split test --out world.idx
  xmr index --checkpoint runs/teran --data world --split dev --out world.idx --append   # add more images and captions
  xmr index --checkpoint runs/teran --data /data/coco --karpathy dataset_coco.json \
      --coco-annotations captions_val2014.json --split testall --images /data/coco/val2014 --out coco5k.idx
  # A folder of photos, features extracted now (docs/extract.md), with the
  # built-in photo model (photomodel/), or a model trained on xmr extract's
  # features:
  xmr index --images ~/photos --out photos.idx
  xmr index --checkpoint runs/teran-px --images ~/photos --out photos.idx

The index directory holds the model, the region/word and global vectors in
memory-mapped segment files, and a catalogue (ids, captions, image paths,
boxes, sizes) in SQLite; docs/index-format.md describes it. A build that is
killed or fails leaves the previous index as it was.

With --backend weaviate the vectors and the catalogue go to a Weaviate
server or cluster (sharded and replicated there), in the collections
COLLECTION+"Images" and COLLECTION+"Captions"; the --out directory holds
only weaviate.json and the model, and xmr search and xmr serve take it as
they take a local index. A killed upload resumes when the same command is
run again. docs/weaviate.md describes it:

  xmr index --checkpoint runs/teran --data world --split test --out world.wv \
      --backend weaviate --weaviate-url http://127.0.0.1:8080 --collection World --shards 2 --replication 2`,
		setFlags: func(fs *flag.FlagSet) {
			fs.StringVar(&indexFlags.checkpoint, "checkpoint", "", "model checkpoint `CKPT`, or a training run directory (its best-rsum checkpoint); none, with --images or an index-only --data split (a folder xmr extract made): the built-in photo model")
			indexFlags.data.addTo(fs)
			fs.StringVar(&indexFlags.split, "split", "test", "split of --data to index")
			fs.StringVar(&indexFlags.out, "out", "", "index `DIR`")
			fs.StringVar(&indexFlags.images, "images", "", "directory of the image files (ID.png, ID.jpg); for a synthetic world, its images/SPLIT folder is used by default. Without --data: a folder of JPEG and PNG photos, whose features are extracted now and indexed without captions")
			indexFlags.ext.addTo(fs)
			fs.IntVar(&indexFlags.workers, "workers", runtime.NumCPU(), "with --images and no --data: images extracted at once (1 to 4 per CPU)")
			fs.BoolVar(&indexFlags.appendTo, "append", false, "add the split to an existing index (encoded by the same model), stored in the index's own layout (float32 or compressed)")
			indexFlags.layout.set(fs)
			fs.BoolVar(&indexFlags.overwrite, "overwrite", false, "replace an existing index (with --backend weaviate: delete its collections and upload again)")
			addCompatRefusal(fs, &indexCompat)
			fs.StringVar(&indexFlags.backend, "backend", "local", "where the index lives: local (files in --out) or weaviate (a Weaviate server; --out holds its manifest)")
			w := &indexFlags.weaviate
			fs.StringVar(&w.URL, "weaviate-url", "", "Weaviate server `URL` (http://host:port; any node of a cluster), with --backend weaviate")
			fs.StringVar(&w.Collection, "collection", "", "Weaviate collection name prefix (an upper-case letter, then letters, digits, _; default: from --out)")
			fs.IntVar(&w.Shards, "shards", 1, "Weaviate: shards per collection")
			fs.IntVar(&w.Replication, "replication", 1, "Weaviate: replication factor (at most the number of nodes)")
			fs.IntVar(&w.EfConstruction, "ef-construction", 0, "Weaviate HNSW efConstruction (0: Weaviate's default, 128)")
			fs.IntVar(&w.MaxConnections, "max-connections", 0, "Weaviate HNSW maxConnections (0: Weaviate's default, 32)")
			fs.IntVar(&w.Ef, "ef", 0, "Weaviate HNSW ef at query time (0: dynamic, Weaviate's default)")
			fs.BoolVar(&w.Muvera, "muvera", false, "Weaviate: index the multi-vectors by their MUVERA encodings (faster to build, approximate candidates rescored by maxSim)")
			fs.IntVar(&w.BatchSize, "batch-size", 0, "Weaviate: objects per batch request (0: 64)")
			fs.StringVar(&indexFlags.cpuProfile, "cpuprofile", "", "write a CPU profile (go tool pprof) of the build to `FILE`")
		},
		run: runIndex,
	})
}

func runIndex(ctx context.Context, args []string) error {
	f := indexFlags
	if len(args) > 0 {
		return usageErrorf("unexpected arguments %q", args)
	}
	if err := refuseCompat("index", indexCompat); err != nil {
		return err
	}
	if err := checkWorkers(f.workers, false); err != nil {
		return err
	}
	var partners []fusionPartner // the built-in models fused with the built-in region model
	if f.checkpoint == "" && (f.images != "" && f.data.path == "" || f.data.path != "" && extract.IsIndexOnly(f.data.path, f.split)) {
		// A folder of photos (or one that xmr extract made an index-only
		// split of) and no model: the built-in photo model; a folder of
		// photos, indexed now, as the fusion of its models (an index
		// of the region model alone, built before, takes --append).
		path, err := builtinPhotoModel(f.ext.models)
		if err != nil {
			return err
		}
		f.checkpoint = path
		if f.images != "" && f.data.path == "" && f.backend == "local" && !(f.appendTo && !index.IsFusion(f.out) && fileExists(filepath.Join(f.out, "manifest.json"))) {
			if partners, err = builtinPartners(f.ext.models); err != nil {
				return err
			}
		}
	}
	if err := f.check(); err != nil {
		return err
	}
	// The index directory is the index's as a whole (--overwrite and
	// --append remove the files its manifest no longer lists).
	if err := checkOutputs(append(append(checkpointInputs(f.checkpoint), f.data.inputs()...), outpath.Input{Flag: "--images", Path: f.images}),
		[]outpath.Output{{Flag: "--out", Path: f.out, Kind: outpath.Dir}, profileOutput(f.cpuProfile)}); err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(f.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	if f.images != "" {
		st, err := os.Stat(f.images)
		if err != nil {
			return fmt.Errorf("--images: %w", err)
		}
		if !st.IsDir() {
			return fmt.Errorf("--images %s: not a directory (want the folder of the image files)", f.images)
		}
	}
	layout, err := f.layout.layout()
	if err != nil {
		return err
	}
	if f.backend != "local" && layout != index.LayoutAuto {
		return usageErrorf("--keep-float32 and --compress choose how a local index stores its vectors; Weaviate (--backend weaviate) stores them its own way")
	}
	// An append keeps the index's own layout: a flag asking for the
	// other one, or a published segment that does not open, is refused
	// before anything is read or encoded.
	if f.appendTo && f.backend == "local" {
		if err := index.CheckAppend(ctx, f.out, layout); err != nil {
			return err
		}
	}
	var feats *extract.Identity // the extractor of the model's features
	mode := index.Create
	if f.appendTo {
		mode = index.Append
	} else if f.overwrite {
		mode = index.Overwrite
	}
	if f.data.path == "" && f.images != "" {
		if f.backend != "local" {
			return usageErrorf("--images without --data builds a local index; extract the photos with xmr extract and index them with --data for --backend weaviate")
		}
		job := photoJob{checkpoint: f.checkpoint, images: f.images, out: f.out, mode: mode, layout: layout, workers: f.workers, ext: f.ext}
		if partners != nil {
			return indexPhotoFusion(ctx, job, partners)
		}
		return indexPhotos(ctx, job)
	}
	src, err := f.data.source()
	if err != nil {
		return err
	}
	m, cf, err := model.Load(f.checkpoint)
	if err != nil {
		return err
	}
	defer cf.Close()
	err = checkDataFeatures(cf, f.checkpoint, src.Path)
	if err == nil {
		feats, err = checkpointIdentity(cf)
	}
	if err != nil {
		return err
	}
	att, err := attachment(cf)
	if err != nil {
		return err
	}
	var rec *extract.Record // how the data's regions were chosen
	if feats != nil {
		if rec, err = extract.ReadRecord(src.Path); err != nil {
			return err
		}
	}
	record, err := indexFeatures(feats, rec)
	if err != nil {
		return err
	}
	if extract.IsIndexOnly(src.Path, f.split) {
		return runIndexImageSet(ctx, &f, m, cf, att, src.Path, mode, layout, record)
	}
	split, err := src.Load(ctx, f.split)
	if err != nil {
		return err
	}
	defer split.Close()
	if split, err = tunedSplit(ctx, cf, f.ext.models, src.Path, split); err != nil {
		return err
	}
	imageDir := f.images
	if imageDir == "" {
		if d := filepath.Join(src.Path, "images", split.Name); isDir(d) {
			imageDir = d
		}
	}
	start := time.Now()
	if f.backend == "weaviate" {
		return runIndexWeaviate(ctx, f.out, f.weaviate, f.overwrite, m, split, imageDir, src.String())
	}
	st, err := index.Build(ctx, f.out, m, collection(split, imageDir), &index.BuildOptions{Mode: mode, Progress: true, Layout: layout, Attach: att, Features: record})
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return &interruptedError{err: err, msg: fmt.Sprintf("interrupted; nothing was published: the index in %s is as it was, and this build's files are removed (run the same command again)", f.out)}
		}
		return err
	}
	// The index is published: count what it holds even if a signal comes
	// now.
	ix, err := index.Open(context.WithoutCancel(ctx), f.out, &index.OpenOptions{SkipChecksums: true})
	if err != nil {
		return fmt.Errorf("indexed %d images and %d captions, but the index published in %s does not open: %w", st.Images, st.Captions, f.out, err)
	}
	ni, nc := ix.Len()
	ix.Close()
	fmt.Fprintf(stdout, "indexed %d images and %d captions of %s %s in %s (%.0f images/s); %s now holds %d images and %d captions\n",
		st.Images, st.Captions, src, split.Name, time.Since(start).Round(time.Millisecond), float64(st.Images)/time.Since(start).Seconds(), f.out, ni, nc)
	fmt.Fprintf(stdout, "search it: xmr search --index %s --text %q\n", f.out, firstCaption(split))
	return nil
}

// runIndexWeaviate uploads a split to Weaviate, with the index directory
// out holding its manifest and model.
func runIndexWeaviate(ctx context.Context, out string, cfg weaviate.Config, overwrite bool, m model.Model, split *data.Split, imageDir, srcName string) error {
	if cfg.Collection == "" {
		cfg.Collection = collectionName(out)
	}
	start := time.Now()
	st, err := weaviate.Build(ctx, out, m, collection(split, imageDir), cfg, &weaviate.BuildOptions{Overwrite: overwrite, Progress: true})
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return &interruptedError{err: err, msg: fmt.Sprintf("interrupted; the upload to %s stopped, and %s records how far it got: run the same command again to resume it", cfg.URL, out)}
		}
		return err
	}
	fmt.Fprintf(stdout, "uploaded %d images and %d captions of %s %s to %s (collections %s, %s) in %s\n",
		st.Images, st.Captions, srcName, split.Name, cfg.URL, cfg.ImagesCollection(), cfg.CaptionsCollection(), time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(stdout, "search it: xmr search --index %s --text %q\n", out, firstCaption(split))
	return nil
}

// collectionName makes a Weaviate collection name of an index directory's
// name: letters, digits and underscores, starting with an upper-case
// letter.
func collectionName(dir string) string {
	var b strings.Builder
	for _, r := range filepath.Base(filepath.Clean(dir)) {
		switch {
		case r >= 'a' && r <= 'z' && b.Len() == 0:
			b.WriteRune(r - 'a' + 'A')
		case r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z', (r >= '0' && r <= '9' || r == '_') && b.Len() > 0:
			b.WriteRune(r)
		default:
			if b.Len() > 0 {
				b.WriteByte('_')
			}
		}
	}
	if b.Len() == 0 {
		return "Xmr"
	}
	return b.String()
}

// collection turns a split into what the index builds from: the catalogue
// rows carry the image ids, files (found in imageDir), sizes and boxes.
func collection(s *data.Split, imageDir string) index.Collection {
	c := index.Collection{Images: s.Images}
	for i := 0; i < s.NumImages(); i++ {
		row := index.ImageRow{ID: s.ID(i), Path: imageFile(imageDir, s.ID(i))}
		if s.Sizes != nil {
			row.Width, row.Height = s.Sizes[i][0], s.Sizes[i][1]
		}
		if s.Images.Boxes != nil {
			for r := 0; r < s.Images.NumRegions(i); r++ {
				b := s.Images.Box5(i, r)
				row.Boxes = append(row.Boxes, [4]float32{b[0], b[1], b[2], b[3]})
			}
		}
		c.ImageRows = append(c.ImageRows, row)
		for _, cp := range s.CaptionsOf(i) {
			c.Captions = append(c.Captions, index.CaptionRow{Text: cp, ImageID: s.ID(i)})
		}
	}
	return c
}

// imageFile returns the file of image id in dir (ID.png, ID.jpg or
// ID.jpeg), or "" when there is none.
func imageFile(dir, id string) string {
	if dir == "" {
		return ""
	}
	for _, ext := range []string{"", ".png", ".jpg", ".jpeg"} {
		p := filepath.Join(dir, id+ext)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			if abs, err := filepath.Abs(p); err == nil {
				return abs
			}
			return p
		}
	}
	return ""
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func firstCaption(s *data.Split) string {
	if len(s.Captions) == 0 {
		return "a red circle"
	}
	return s.Captions[0]
}

// check refuses flags that do not go together, or a required one
// missing, with a usage error.
func (f *indexOptions) check() error {
	switch {
	case f.checkpoint == "":
		return usageErrorf("--checkpoint is required (without it, --images DIR, or an index-only split of photos xmr extract made, uses the built-in photo model)")
	case f.out == "":
		return usageErrorf("--out is required")
	case f.appendTo && f.overwrite:
		return usageErrorf("give --append or --overwrite, not both")
	case f.backend != "local" && f.backend != "weaviate":
		return usageErrorf("--backend %q: want local or weaviate", f.backend)
	case f.backend == "weaviate" && f.appendTo:
		return usageErrorf("--append is for the local index; a Weaviate upload that stopped resumes when run again")
	case f.backend == "weaviate" && f.weaviate.URL == "":
		return usageErrorf("--backend weaviate needs --weaviate-url http://host:port")
	case f.backend == "local" && f.weaviate.URL != "":
		return usageErrorf("--weaviate-url needs --backend weaviate")
	}
	return nil
}

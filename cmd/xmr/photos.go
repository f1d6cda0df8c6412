package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/photomodel"
	"github.com/xmr-project/xmr/server"
)

// photoSource returns the features of extracted images as a model's input,
// of the kind the model was trained on: the global vectors for kind
// "global", the regions for "regions", and when the kind is unknown, the
// global vectors for a model that reads one per image (SEAM, VSE++).
func photoSource(m model.Model, fs []*extract.Features, e *extract.Extractor, kind string) *data.Regions {
	if kind == extract.KindGlobal || kind == "" && m.Config().GlobalImages() {
		return extract.PackGlobal(fs, e.Width())
	}
	return extract.Pack(fs, e.MaxBoxes(), e.Width())
}

// imageSetCollection turns an index-only split into what the index builds
// from: images without captions, their files found in imageDir.
func imageSetCollection(set *extract.ImageSet, imageDir string) index.Collection {
	c := index.Collection{Images: set.Images}
	for i, id := range set.IDs {
		row := index.ImageRow{ID: id, Path: imageFile(imageDir, id), Width: set.Sizes[i][0], Height: set.Sizes[i][1]}
		if !set.Global {
			for r := 0; r < set.Images.NumRegions(i); r++ {
				b := set.Images.Box5(i, r)
				row.Boxes = append(row.Boxes, [4]float32{b[0], b[1], b[2], b[3]})
			}
		}
		c.ImageRows = append(c.ImageRows, row)
	}
	return c
}

// photoCollection turns images extracted now into an index collection,
// without captions.
func photoCollection(src *data.Regions, fs []*extract.Features, items []extract.Item) index.Collection {
	c := index.Collection{Images: src}
	for i, f := range fs {
		path := items[i].Path
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		row := index.ImageRow{ID: items[i].ID, Path: path, Width: float32(f.Width), Height: float32(f.Height)}
		if src.Boxes != nil {
			for r := 0; r < src.NumRegions(i); r++ {
				b := src.Box5(i, r)
				row.Boxes = append(row.Boxes, [4]float32{b[0], b[1], b[2], b[3]})
			}
		}
		c.ImageRows = append(c.ImageRows, row)
	}
	return c
}

// indexFeatures returns the record an index publishes in its manifest
// (index.Manifest.Features) of what made its images' features: the
// extractor id (nil: the model reads features of unknown provenance, and
// nothing is recorded) and, from rec when given, how its regions were
// chosen and the kind of features the model was trained on. Search
// --image-file, the server's uploads and align --image extract a new
// image the same way.
func indexFeatures(id *extract.Identity, rec *extract.Record) (json.RawMessage, error) {
	if id == nil {
		return nil, nil
	}
	r := &extract.Record{Extractor: *id, Kind: "index", MaxBoxes: 36, MinScore: extract.DefaultMinScore}
	if rec != nil && rec.MaxBoxes > 0 {
		r.MaxBoxes, r.MinScore, r.Fill = rec.MaxBoxes, rec.MinScore, rec.Fill
	}
	if rec != nil {
		r.FeatureKind = rec.Kind
	}
	return r.Encode()
}

// indexRecord returns the record of what made the features of the index
// in dir (indexFeatures; index.ReadFeatures), or nil when it records
// none.
func indexRecord(dir string) (*extract.Record, error) {
	raw, err := index.ReadFeatures(dir)
	if errors.Is(err, index.ErrNotIndex) {
		return nil, nil // an index held by another engine: nothing recorded here
	}
	if err != nil || raw == nil {
		return nil, err
	}
	return extract.ParseRecord(raw, filepath.Join(dir, "manifest.json")+": features")
}

// recordExtractor returns the extractor that makes the features rec
// records: its maps, number of boxes and score threshold, with the
// detector loaded from cache (see loadDetector), and, when rec says the
// model fine-tuned the detector, the part that the checkpoint at
// modelFile carries. The detector must be the one rec names.
func recordExtractor(ctx context.Context, cache string, rec *extract.Record, modelFile string) (*extract.Extractor, error) {
	det, err := loadDetector(ctx, cache)
	if err != nil {
		return nil, err
	}
	e, err := extract.New(det, extract.Options{Maps: rec.Extractor.Maps, MaxBoxes: rec.MaxBoxes, MinScore: rec.MinScore})
	if err != nil {
		return nil, err
	}
	if rec.Extractor.Tuned != "" {
		cf, err := checkpoint.Open(modelFile)
		if err != nil {
			return nil, err
		}
		e, err = tunedExtractor(cf, e)
		cf.Close()
		if err != nil {
			return nil, err
		}
	}
	id := e.Identity()
	if err := extract.Check(&rec.Extractor, "the recorded model", &id, "this xmr's detector"); err != nil {
		return nil, err
	}
	return e, nil
}

// imageQuery extracts the features of one image file with e and encodes
// them with m as a query of one item.
func imageQuery(ctx context.Context, m model.Model, e *extract.Extractor, pic *extract.Picture, kind string) (*model.Embeddings, *extract.Features, error) {
	f, err := e.Run(ctx, pic)
	if err != nil {
		return nil, nil, err
	}
	q, err := model.EncodeImages(ctx, m, photoSource(m, []*extract.Features{f}, e, kind), nil)
	if err != nil {
		return nil, nil, err
	}
	return q, f, nil
}

// searchImageFile finds the captions of a local index that describe a new
// image, the file at path: its features are extracted as the index
// records (extract.FileName in the index directory), once for the members
// of a fusion that read the same ones (fusionImages).
func searchImageFile(ctx context.Context, ix index.Searcher, dir, path, cache string, lim extract.Limits, o *index.SearchOptions) ([]index.Result, error) {
	var members []*index.Index
	switch s := ix.(type) {
	case *index.Index:
		members = []*index.Index{s}
	case *index.Fusion:
		members = s.Members()
	default:
		return nil, usageErrorf("--image-file searches a local index; %s is held by another engine", dir)
	}
	fi, err := newFusionImages(ctx, members, cache)
	if err != nil {
		return nil, fmt.Errorf("--image-file: %w", err)
	}
	// The decode stops on the first Ctrl-C or SIGTERM (ctx).
	pic, err := extract.LoadFileContext(ctx, path, lim)
	if err != nil {
		return nil, err
	}
	qs, err := fi.encode(ctx, pic, fi.all())
	if err != nil {
		return nil, err
	}
	if fu, ok := ix.(*index.Fusion); ok {
		return fu.SearchEncoded(ctx, qs, false, o)
	}
	return members[0].Search(ctx, qs[0], false, o)
}

// photoJob is an index of a folder of photos to build.
type photoJob struct {
	checkpoint, images, out string
	mode                    index.Mode
	layout                  index.Layout
	workers                 int // 0: as many as the CPUs and memory allow
	ext                     extractorFlags
}

// indexPhotos indexes the folder of photos f.images with the model of
// f.checkpoint into f.out: their features are extracted now, and the
// index holds the images without captions.
func indexPhotos(ctx context.Context, f photoJob) error {
	workers, err := fitExtractWorkers(f.workers, runtime.NumCPU(), f.ext.maxPixels)
	if err != nil {
		return err
	}
	e, err := f.ext.extractor(ctx)
	if err != nil {
		return err
	}
	m, e, kind, att, err := imageModel(f.checkpoint, e)
	if err != nil {
		return err
	}
	start := time.Now()
	fs, kept, skips, err := collectFolder(ctx, f, e, workers)
	if err != nil {
		return err
	}
	extracted := time.Since(start)
	id := e.Identity()
	feats, err := indexFeatures(&id, &extract.Record{MaxBoxes: e.MaxBoxes(), MinScore: float32(f.ext.minScore), Kind: kind})
	if err != nil {
		return err
	}
	src := photoSource(m, fs, e, kind)
	st, err := index.Build(ctx, f.out, m, photoCollection(src, fs, kept), &index.BuildOptions{Mode: f.mode, Progress: true, Layout: f.layout, Attach: att, Features: feats})
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return &interruptedError{err: err, msg: fmt.Sprintf("interrupted; nothing was published: the index in %s is as it was (run the same command again)", f.out)}
		}
		return err
	}
	return reportFolder(f, st.Images, time.Since(start), extracted, skips, "")
}

// collectFolder extracts the photos of the folder f.images with e on
// workers goroutines: their features, the items kept and those skipped
// as unreadable.
func collectFolder(ctx context.Context, f photoJob, e *extract.Extractor, workers int) ([]*extract.Features, []extract.Item, []extract.Skip, error) {
	items, err := extract.FolderItems(f.images)
	if err != nil {
		return nil, nil, nil, err
	}
	fs, kept, skips, err := extract.Collect(ctx, e, items, workers, f.ext.limits(), true)
	if err != nil && errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil, nil, nil, &interruptedError{err: err, msg: fmt.Sprintf("interrupted while extracting; %s is as it was", f.out)}
	}
	return fs, kept, skips, err
}

// reportFolder prints what indexing the folder f.images into f.out did
// (n photos in el, of which extraction took extracted; what, when not
// empty, follows the line) and the photos skipped, which make its error.
func reportFolder(f photoJob, n int, el, extracted time.Duration, skips []extract.Skip, what string) error {
	fmt.Fprintf(stdout, "indexed %d photos of %s in %s (%.1f images/s; extraction %s)%s\n",
		n, f.images, el.Round(time.Millisecond), float64(n)/el.Seconds(), extracted.Round(time.Millisecond), what)
	for _, sk := range skips {
		fmt.Fprintf(stdout, "skipped %s: %s\n", sk.Path, sk.Err)
	}
	fmt.Fprintf(stdout, "search it: xmr search --index %s --text %q\n", f.out, "a dog on a sofa")
	if len(skips) > 0 {
		return &skippedError{n: len(skips)}
	}
	return nil
}

// skippedError says that an index was built without the photos that
// could not be read.
type skippedError struct{ n int }

func (e *skippedError) Error() string {
	return fmt.Sprintf("%d images could not be read and were left out (listed above)", e.n)
}

// folderIndex returns the index of the photos in the folder images, with
// the built-in photo model (its models fused: indexPhotoFusion): one
// that an earlier call built under the models' cache directory (cache,
// default detect.DefaultCacheDir()) when it holds as many photos as the
// folder, else built now.
func folderIndex(ctx context.Context, images, cache string) (string, error) {
	ckpt, err := builtinPhotoModel(cache)
	if err != nil {
		return "", err
	}
	partners, err := builtinPartners(cache)
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(images)
	if err != nil {
		return "", err
	}
	id := abs + "\n" + filepath.Base(ckpt)
	for _, p := range partners {
		id += "\n" + filepath.Base(p.path)
	}
	bank := sha256.Sum256([]byte(strings.Join(photomodel.QueryBank(), "\n")))
	id += "\nquerybank " + hex.EncodeToString(bank[:8])
	key := sha256.Sum256([]byte(id))
	dir := filepath.Join(filepath.Dir(filepath.Dir(ckpt)), "indexes", hex.EncodeToString(key[:8]))
	items, err := extract.FolderItems(images)
	if err != nil {
		return "", err
	}
	if fu, err := index.OpenFusion(ctx, dir, &index.OpenOptions{SkipChecksums: true}); err == nil {
		n, _ := fu.Len()
		fu.Close()
		if n == len(items) {
			slog.Info("the photos' index, built before", "index", dir, "photos", n)
			return dir, nil
		}
	}
	fmt.Fprintf(stdout, "indexing the %d photos of %s with the built-in photo model into %s\n", len(items), images, dir)
	err = indexPhotoFusion(ctx, photoJob{checkpoint: ckpt, images: images, out: dir, mode: index.Overwrite,
		ext: extractorFlags{maxBoxes: 36, minScore: extract.DefaultMinScore, maxPixels: extract.DefaultMaxPixels, models: cache}}, partners)
	var sk *skippedError
	if errors.As(err, &sk) {
		slog.Warn("some photos could not be read; serving the others", "skipped", sk.n)
		err = nil
	}
	return dir, err
}

// runIndexImageSet indexes, as f says, an index-only split that xmr
// extract wrote for a folder of photos: images without captions, read as
// the model of checkpoint file cf reads them (tunedRegions), att stored
// with the index's copy of it and features in its manifest.
func runIndexImageSet(ctx context.Context, f *indexOptions, m model.Model, cf *checkpoint.File, att *index.Attachment, dir string, mode index.Mode, layout index.Layout, features json.RawMessage) error {
	if f.backend != "local" {
		return usageErrorf("--data %s: split %s has no captions (index-only); index it locally, without --backend %s", dir, f.split, f.backend)
	}
	set, err := extract.LoadImages(dir, f.split)
	if err != nil {
		return err
	}
	if set.Images, err = tunedRegions(ctx, cf, f.ext.models, dir, f.split, set.Images, set.Global); err != nil {
		return err
	}
	start := time.Now()
	st, err := index.Build(ctx, f.out, m, imageSetCollection(set, f.images), &index.BuildOptions{Mode: mode, Progress: true, Layout: layout, Attach: att, Features: features})
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return &interruptedError{err: err, msg: fmt.Sprintf("interrupted; nothing was published: the index in %s is as it was (run the same command again)", f.out)}
		}
		return err
	}
	fmt.Fprintf(stdout, "indexed %d images (no captions) of %s %s in %s\n", st.Images, dir, f.split, time.Since(start).Round(time.Millisecond))
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// alignInput is an image whose regions were extracted now, for xmr align.
type alignInput struct {
	img   image.Image // upright
	feat  []float32   // len(boxes) x d
	boxes [][4]float32
	d     int
}

// extractForAlign extracts the regions of the image file at path as the
// model of checkpoint ckpt was trained to read them (the extractor its
// metadata records). The file is read and decoded as xmr extract reads
// its photos: lim's limits, upright as its EXIF orientation says.
func extractForAlign(ctx context.Context, ckpt, path, cache string, lim extract.Limits) (*alignInput, error) {
	_, cf, err := model.Load(ckpt)
	if err != nil {
		return nil, err
	}
	id, err := checkpointIdentity(cf)
	kind := cf.Metadata()[extract.KindMetaKey]
	cf.Close()
	if err != nil {
		return nil, err
	}
	if id == nil {
		return nil, fmt.Errorf("the model of --checkpoint %s records no feature extractor (it was trained on precomputed features): give the image's --features and --boxes, or use a model trained on xmr extract's features", ckpt)
	}
	if err := extract.CheckKind(kind, "the model of --checkpoint "+ckpt, extract.KindRegions, "--image "+path+" (align extracts its regions)"); err != nil {
		return nil, err
	}
	b, err := extract.ReadFile(path, lim)
	if err != nil {
		return nil, err
	}
	pic, img, err := extract.DecodeUprightContext(ctx, b, path, lim)
	if err != nil {
		return nil, err
	}
	e, err := recordExtractor(ctx, cache, &extract.Record{Extractor: *id, MaxBoxes: 36, MinScore: extract.DefaultMinScore}, cf.Path())
	if err != nil {
		return nil, err
	}
	feats, err := e.Run(ctx, pic)
	if err != nil {
		return nil, err
	}
	return &alignInput{img: img, feat: feats.Regions, boxes: feats.Boxes, d: e.Width()}, nil
}

// uploadQuery returns the server's ImageQuery for the index ix in dir
// whose model reads xmr extract's features (its manifest's record):
// nil, and no error, for an index without one, or one held by Weaviate.
// For a model that fine-tuned the detector, the extractor runs the part
// that the index's copy of the model carries, made again for each model
// the index (which serve follows) publishes.
func uploadQuery(ctx context.Context, dir string, ix index.Searcher, weaviateIndex bool, cache string, maxBytes int64) (server.ImageQuery, error) {
	if weaviateIndex {
		return nil, nil
	}
	rec, err := indexRecord(dir)
	if err != nil || rec == nil {
		return nil, err
	}
	lim := extract.Limits{MaxBytes: maxBytes}
	var extractor func(model.Model) (*extract.Extractor, string, error)
	if rec.Extractor.Tuned == "" {
		e, err := recordExtractor(ctx, cache, rec, "")
		if err != nil {
			return nil, err
		}
		extractor = func(model.Model) (*extract.Extractor, string, error) { return e, rec.FeatureKind, nil }
	} else {
		if _, err := loadDetector(ctx, cache); err != nil {
			return nil, err // now, not at the first upload
		}
		var mu sync.Mutex
		var last model.Model
		var lastE *extract.Extractor
		var lastKind string
		extractor = func(m model.Model) (*extract.Extractor, string, error) {
			mu.Lock()
			defer mu.Unlock()
			if m == last {
				return lastE, lastKind, nil
			}
			info := ix.ModelInfo()
			if fp := model.Fingerprint(m); fp != info.Fingerprint {
				return nil, "", fmt.Errorf("the index %s published another model during the search: search again", dir)
			}
			rec, err := indexRecord(dir)
			if err == nil && rec == nil {
				err = fmt.Errorf("%s records no feature extractor any more", dir)
			}
			if err != nil {
				return nil, "", err
			}
			e, err := recordExtractor(ctx, cache, rec, filepath.Join(dir, info.File))
			if err != nil {
				return nil, "", err
			}
			last, lastE, lastKind = m, e, rec.FeatureKind
			return e, lastKind, nil
		}
	}
	return func(ctx context.Context, b []byte, ms []model.Model) ([]*model.Embeddings, error) {
		if len(ms) != 1 {
			return nil, fmt.Errorf("an index of one model encodes an upload for %d models", len(ms))
		}
		pic, err := decodeUpload(ctx, b, lim)
		if err != nil {
			return nil, err
		}
		e, kind, err := extractor(ms[0])
		if err != nil {
			return nil, err
		}
		q, _, err := imageQuery(ctx, ms[0], e, pic, kind)
		if err != nil {
			return nil, err
		}
		return []*model.Embeddings{q}, nil
	}, nil
}

// decodeUpload decodes an uploaded image for the detector. It returns
// once ctx is done (the search timeout, the client gone, the server's
// shutdown timeout), with ctx's error, which the server answers for (503,
// 499); the errors about the image itself are of the server's kinds (see
// uploadError).
func decodeUpload(ctx context.Context, b []byte, lim extract.Limits) (*extract.Picture, error) {
	pic, err := extract.DecodeContext(ctx, b, "upload", lim)
	if err != nil {
		if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			return nil, err
		}
		return nil, uploadError(err)
	}
	return pic, nil
}

// uploadError returns the error of decoding an upload as the kind the
// server answers for (server.ErrImageTooLarge, 413, or server.ErrBadImage,
// 400), in extract's words alone: "image too large: read image upload:
// image too large: ..." said it twice.
func uploadError(err error) error {
	kind := server.ErrBadImage
	if errors.Is(err, extract.ErrTooLarge) {
		kind = server.ErrImageTooLarge
	}
	return &kindError{err: err, kind: kind}
}

// kindError is an error that is also of a kind (errors.Is), whose message
// is the error's alone.
type kindError struct{ err, kind error }

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.err, e.kind} }

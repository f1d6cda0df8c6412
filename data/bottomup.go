package data

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sbinet/npyio/npz"
	"github.com/xmr-project/xmr/internal/infile"
	"github.com/xmr-project/xmr/npy"
	"github.com/xmr-project/xmr/progress"
)

// BottomUpOptions tunes LoadBottomUp. The zero value (and nil) gives the
// defaults, but boxes need a source of image sizes.
type BottomUpOptions struct {
	// Karpathy is the parsed split file; when nil the karpathyJSON
	// argument is read. Pass it to load several splits with one parse.
	Karpathy *Karpathy
	// IDs picks the Karpathy field that names the files; IDAuto is the
	// COCO id for COCO and the imgid for other datasets, as TERAN does.
	IDs IDScheme
	// SizesFile is a text file of "id width height" lines (see
	// LoadSizesFile) giving image sizes in pixels.
	SizesFile string
	// COCOAnnotations are COCO caption annotation files
	// (captions_train2014.json, captions_val2014.json) giving image sizes.
	COCOAnnotations []string
	// CapsPerImage is the number of captions per image; 0 means 5.
	CapsPerImage int
	// Workers is the number of files read in parallel; 0 means GOMAXPROCS.
	Workers int
	// SkipFiniteCheck skips the scan of the features for NaN and Inf.
	SkipFiniteCheck bool
}

// BottomUpImage is the bottom-up data of one image: N regions of D
// features and their boxes in pixels, as stored in the files.
type BottomUpImage struct {
	ID    string
	N, D  int
	Feat  []float32 // N*D
	Boxes []float32 // N*4 pixel x1, y1, x2, y2; nil when there is no bu_box folder
}

// Bottom-up folder names inside the features directory.
const (
	buAttDir = "bu_att"
	buBoxDir = "bu_box"
)

// ReadBottomUpImage reads bu_att/{id}.npz (array "feat", (N,D)) and, when
// the bu_box folder exists, bu_box/{id}.npy ((N,4) pixel boxes) from dir.
func ReadBottomUpImage(dir, id string) (*BottomUpImage, error) {
	featPath := filepath.Join(dir, buAttDir, id+".npz")
	h, feat, err := readNPZFeat(featPath, true)
	if err != nil {
		return nil, err
	}
	im := &BottomUpImage{ID: id, N: h.Shape[0], D: h.Shape[1], Feat: feat}
	boxDir := filepath.Join(dir, buBoxDir)
	if ok, err := exists(boxDir); err != nil {
		return nil, err
	} else if ok {
		boxPath := filepath.Join(boxDir, id+".npy")
		a, err := npy.Read(boxPath)
		if err != nil {
			return nil, err
		}
		if len(a.Shape) != 2 || a.Shape[1] != 4 {
			return nil, fmt.Errorf("read %s: shape %s: want (N,4) boxes", boxPath, npy.FormatShape(a.Shape))
		}
		if a.Shape[0] != im.N {
			return nil, fmt.Errorf("read %s: %d boxes, but %s has %d regions", boxPath, a.Shape[0], featPath, im.N)
		}
		im.Boxes = a.Data
	}
	return im, nil
}

// readNPZFeat opens the npz file at path and reads the header of its
// "feat" array, (N,D) float, and its data when withData.
func readNPZFeat(path string, withData bool) (npy.Header, []float32, error) {
	f, err := infile.Open(path)
	if err != nil {
		return npy.Header{}, nil, fmt.Errorf("read %s: %w", path, unwrapPathErr(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return npy.Header{}, nil, fmt.Errorf("read %s: %w", path, unwrapPathErr(err))
	}
	z, err := npz.NewReader(f, st.Size())
	if err != nil {
		return npy.Header{}, nil, fmt.Errorf("read %s: not an .npz (zip) file: %w", path, err)
	}
	return readFeatEntry(z, path, withData)
}

// readFeatEntry reads the "feat" array of an open npz archive.
func readFeatEntry(z *npz.Reader, path string, withData bool) (npy.Header, []float32, error) {
	key := ""
	for _, k := range z.Keys() {
		if k == "feat.npy" || (k == "feat" && key == "") {
			key = k
		}
	}
	if key == "" {
		return npy.Header{}, nil, fmt.Errorf("read %s: no array \"feat\" (has %s)", path, strings.Join(z.Keys(), ", "))
	}
	rc, err := z.Open(key)
	if err != nil {
		return npy.Header{}, nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer rc.Close()
	r, err := npy.NewReader(rc)
	if err != nil {
		return npy.Header{}, nil, fmt.Errorf("read %s: feat: %w", path, err)
	}
	h := r.Header
	if len(h.Shape) != 2 {
		return h, nil, fmt.Errorf("read %s: feat has shape %s: want (regions, features)", path, npy.FormatShape(h.Shape))
	}
	if h.DType.Kind != 'f' {
		return h, nil, fmt.Errorf("read %s: feat has dtype %s (%s): want float16, float32 or float64", path, h.DType.Descr(), h.DType)
	}
	if !withData {
		return h, nil, nil
	}
	feat, err := r.ReadFloat32()
	if err != nil {
		return h, nil, fmt.Errorf("read %s: feat: %w", path, err)
	}
	return h, feat, nil
}

// LoadBottomUp loads split from per-image bottom-up files in dir, the
// layout TERAN and TERN read: bu_att/{id}.npz with array "feat" (regions x
// features) and bu_box/{id}.npy (regions x 4 pixel boxes). The split's
// images, their captions (the first CapsPerImage of each) and their ids
// come from the Karpathy split file karpathyJSON (or opt.Karpathy). Boxes
// are normalised by the image sizes from opt.SizesFile or
// opt.COCOAnnotations, which are required when the bu_box folder exists.
// Images may have different region counts: R is the largest, shorter
// images are zero-padded and Count says how many regions are valid.
//
// LoadBottomUp checks ctx before each image file it reads; once ctx is
// cancelled it returns an error wrapping ctx's error.
func LoadBottomUp(ctx context.Context, dir, karpathyJSON, split string, opt *BottomUpOptions) (*Split, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("load bottom-up %s: %w", split, err)
	}
	var o BottomUpOptions
	if opt != nil {
		o = *opt
	}
	per := o.CapsPerImage
	if per <= 0 {
		per = DefaultCapsPerImage
	}
	kname := karpathyJSON
	if kname == "" {
		kname = "the Karpathy split file"
	}
	_, _, caps, ids, err := karpathySplit(o.Karpathy, karpathyJSON, split, per, o.IDs)
	if err != nil {
		return nil, err
	}
	n := len(ids)
	boxDir := filepath.Join(dir, buBoxDir)
	haveBoxes, err := exists(boxDir)
	if err != nil {
		return nil, err
	}
	var sizes [][2]float32
	if haveBoxes || o.SizesFile != "" || len(o.COCOAnnotations) > 0 {
		if sizes, err = lookupSizes(ids, o.SizesFile, o.COCOAnnotations, boxDir, haveBoxes); err != nil {
			return nil, err
		}
	}

	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	missing := func(id string, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: missing for image id %s listed in split %s of %s", err, id, split, kname)
		}
		return err
	}

	// Pass 1: the shapes, to size the arrays.
	rows := make([]int, n)
	dims := make([]int, n)
	bar := newBar("bottom-up "+split+" (shapes)", n)
	err = parallelFor(ctx, n, workers, func(i int) error {
		h, _, err := readNPZFeat(filepath.Join(dir, buAttDir, ids[i]+".npz"), false)
		if err != nil {
			return missing(ids[i], err)
		}
		rows[i], dims[i] = h.Shape[0], h.Shape[1]
		bar.Add(1)
		return nil
	})
	bar.Finish()
	if err != nil {
		return nil, stopped(ctx, "load bottom-up "+split+" (shapes)", err)
	}
	R, D := 0, dims[0]
	for i := range n {
		if dims[i] != D {
			return nil, fmt.Errorf("%s: %d features per region, but %s has %d",
				filepath.Join(dir, buAttDir, ids[i]+".npz"), dims[i], filepath.Join(dir, buAttDir, ids[0]+".npz"), D)
		}
		if rows[i] == 0 {
			return nil, fmt.Errorf("read %s: image %s has 0 regions: %w", filepath.Join(dir, buAttDir, ids[i]+".npz"), ids[i], ErrNoRegions)
		}
		R = max(R, rows[i])
	}

	// Pass 2: the data, straight into place.
	g := &Regions{N: n, R: R, D: D, Feat: make([]float32, n*R*D), Count: rows}
	if haveBoxes {
		g.Boxes = make([]float32, n*R*4)
	}
	bar = newBar("bottom-up "+split, n)
	err = parallelFor(ctx, n, workers, func(i int) error {
		im, err := ReadBottomUpImage(dir, ids[i])
		if err != nil {
			return missing(ids[i], err)
		}
		featPath := filepath.Join(dir, buAttDir, ids[i]+".npz")
		if im.N != rows[i] {
			return fmt.Errorf("read %s: changed while loading (%d regions, then %d)", featPath, rows[i], im.N)
		}
		j := -1
		if !o.SkipFiniteCheck {
			j = firstNonFinite(im.Feat)
		}
		if j >= 0 {
			return fmt.Errorf("read %s: feat: region %d feature %d is %v", featPath, j/D, j%D, im.Feat[j])
		}
		copy(g.Feat[i*R*D:], im.Feat)
		if im.Boxes != nil && g.Boxes != nil {
			w, h := sizes[i][0], sizes[i][1]
			for j, x := range im.Boxes {
				if !isFinite32(x) {
					return fmt.Errorf("read %s: region %d coordinate %d is %v", filepath.Join(boxDir, ids[i]+".npy"), j/4, j%4, x)
				}
				if j%2 == 0 {
					x /= w
				} else {
					x /= h
				}
				if !(x >= -boxSlack && x <= 1+boxSlack) {
					return fmt.Errorf("read %s: region %d coordinate %d is %v, %.3g image sizes from the %v x %v image %s: want a box within %g image size of it",
						filepath.Join(boxDir, ids[i]+".npy"), j/4, j%4, im.Boxes[j], x, w, h, ids[i], float64(boxSlack))
				}
				g.Boxes[i*R*4+j] = x
			}
		}
		bar.Add(1)
		return nil
	})
	bar.Finish()
	if err != nil {
		return nil, stopped(ctx, "load bottom-up "+split, err)
	}
	return &Split{Name: split, Images: g, Captions: caps, CapsPerImage: per, ImageIDs: ids, Sizes: sizes}, nil
}

// stopped prefixes what to an error that ctx's cancellation caused, and
// returns other errors, which name their file, as they are.
func stopped(ctx context.Context, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return err
}

// newBar returns a progress bar for loads of many images, nil (which
// reports nothing) for small ones.
func newBar(desc string, n int) *progress.Bar {
	if n < 1000 {
		return nil
	}
	return progress.New(desc, int64(n), "images")
}

// lookupSizes returns the sizes of the images ids from a sizes file and
// COCO annotation files.
func lookupSizes(ids []string, sizesFile string, cocoAnns []string, boxDir string, need bool) ([][2]float32, error) {
	if sizesFile == "" && len(cocoAnns) == 0 {
		return nil, fmt.Errorf("%s holds pixel boxes, which need image sizes: give a sizes file or COCO caption annotation files", boxDir)
	}
	all := map[string][2]float32{}
	var sources []string
	if sizesFile != "" {
		m, err := LoadSizesFile(sizesFile)
		if err != nil {
			return nil, err
		}
		all = m
		sources = append(sources, sizesFile)
	}
	if len(cocoAnns) > 0 {
		m, err := LoadCOCOSizes(cocoAnns...)
		if err != nil {
			return nil, err
		}
		for id, wh := range m {
			if _, ok := all[id]; !ok {
				all[id] = wh
			}
		}
		sources = append(sources, cocoAnns...)
	}
	sizes := make([][2]float32, len(ids))
	for i, id := range ids {
		wh, ok := all[id]
		if !ok {
			if !need {
				return nil, nil
			}
			return nil, fmt.Errorf("no size for image id %s in %s", id, strings.Join(sources, ", "))
		}
		sizes[i] = wh
	}
	return sizes, nil
}

// parallelFor calls fn(i) for i in [0, n) on up to workers goroutines. It
// stops early on an error and returns the error of the lowest index seen.
// It checks ctx before each call and, once ctx is cancelled, stops and
// returns an error wrapping ctx's error.
func parallelFor(ctx context.Context, n, workers int, fn func(i int) error) error {
	workers = max(1, min(workers, n))
	var next, done atomic.Int64
	var failed atomic.Bool
	errs := make([]error, workers)
	errAt := make([]int, workers)
	var wg sync.WaitGroup
	for w := range workers {
		errAt[w] = n
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				err := ctx.Err()
				if err != nil {
					err = fmt.Errorf("stopped with %d of %d done: %w", done.Load(), n, err)
				} else if err = fn(i); err == nil {
					done.Add(1)
				}
				if err != nil {
					errs[w], errAt[w] = err, i
					failed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	best := -1
	for w := range workers {
		if errs[w] != nil && (best < 0 || errAt[w] < errAt[best]) {
			best = w
		}
	}
	if best >= 0 {
		return errs[best]
	}
	return nil
}

// LoadSizesFile reads image sizes from a text file of lines
// "id width height" (whitespace-separated, sizes in pixels). Blank lines
// and lines starting with '#' are skipped.
func LoadSizesFile(path string) (map[string][2]float32, error) {
	f, err := infile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, unwrapPathErr(err))
	}
	defer f.Close()
	return ReadSizes(f, path)
}

// ReadSizes parses a sizes file (see LoadSizesFile) from r; path names it
// in errors.
func ReadSizes(r io.Reader, path string) (map[string][2]float32, error) {
	m := map[string][2]float32{}
	sc := bufio.NewScanner(r)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 3 {
			return nil, fmt.Errorf("read %s: line %d: want \"id width height\", have %d fields", path, ln, len(fs))
		}
		var wh [2]float32
		for j, s := range fs[1:] {
			v, err := strconv.ParseFloat(s, 32)
			if err != nil || !(v > 0) || !isFinite32(float32(v)) {
				return nil, fmt.Errorf("read %s: line %d: bad %s %q", path, ln, [2]string{"width", "height"}[j], s)
			}
			wh[j] = float32(v)
		}
		if _, dup := m[fs[0]]; dup {
			return nil, fmt.Errorf("read %s: line %d: image id %s listed twice", path, ln, fs[0])
		}
		m[fs[0]] = wh
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return m, nil
}

// WriteSizesFile writes sizes as "id width height" lines, atomically, in
// the order of ids.
func WriteSizesFile(path string, ids []string, sizes [][2]float32) error {
	if len(ids) != len(sizes) {
		return fmt.Errorf("write %s: %d ids for %d sizes", path, len(ids), len(sizes))
	}
	return writeAtomic(path, func(w io.Writer) error {
		for i, id := range ids {
			if strings.ContainsAny(id, " \t\r\n") || id == "" {
				return fmt.Errorf("image id %q is empty or has white space", id)
			}
			if _, err := fmt.Fprintf(w, "%s %g %g\n", id, sizes[i][0], sizes[i][1]); err != nil {
				return err
			}
		}
		return nil
	})
}

// cocoAnnImage is the part of a COCO annotation file's images[] entries
// that gives sizes.
type cocoAnnImage struct {
	ID     *int64   `json:"id"`
	Width  *float64 `json:"width"`
	Height *float64 `json:"height"`
}

// LoadCOCOSizes reads image sizes from COCO annotation files
// (captions_train2014.json, instances_val2014.json, ...): the id, width
// and height of each images[] entry, keyed by the decimal id. The large
// annotations array is skipped.
func LoadCOCOSizes(paths ...string) (map[string][2]float32, error) {
	m := map[string][2]float32{}
	for _, p := range paths {
		if err := readCOCOSizes(p, m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func readCOCOSizes(path string, m map[string][2]float32) error {
	f, err := infile.Open(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, unwrapPathErr(err))
	}
	defer f.Close()
	return decodeCOCOSizes(f, path, m)
}

// decodeCOCOSizes adds the sizes of the COCO annotation file in r to m.
func decodeCOCOSizes(r io.Reader, path string, m map[string][2]float32) error {
	dec, fail := jsonStream(r, path)
	if err := expectDelim(dec, '{'); err != nil {
		return fail("top level", err)
	}
	saw := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fail("top level", err)
		}
		if key, _ := t.(string); key != "images" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fail(strconv.Quote(key), err)
			}
			continue
		}
		saw = true
		if err := expectDelim(dec, '['); err != nil {
			return fail("images", err)
		}
		for i := 0; dec.More(); i++ {
			var im cocoAnnImage
			if err := dec.Decode(&im); err != nil {
				return fail(fmt.Sprintf("images[%d]", i), err)
			}
			if im.ID == nil || im.Width == nil || im.Height == nil || !(*im.Width > 0) || !(*im.Height > 0) ||
				!isFinite32(float32(*im.Width)) || !isFinite32(float32(*im.Height)) {
				return fail(fmt.Sprintf("images[%d]", i), errors.New("want an id and a positive, finite width and height"))
			}
			m[strconv.FormatInt(*im.ID, 10)] = [2]float32{float32(*im.Width), float32(*im.Height)}
		}
		if err := expectDelim(dec, ']'); err != nil {
			return fail("images", err)
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return fail("top level", err)
	}
	if !saw {
		return fmt.Errorf("read %s: no \"images\" array: not a COCO annotation file", path)
	}
	return nil
}

package data

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/internal/infile"
	"github.com/xmr-project/xmr/npy"
	"github.com/xmr-project/xmr/text"
)

// PrecompOptions tunes LoadPrecomp. The zero value (and nil) gives the
// defaults.
type PrecompOptions struct {
	// NoMmap reads the features into memory instead of mapping the file.
	NoMmap bool
	// SkipFiniteCheck skips the scan of the features for NaN and Inf.
	SkipFiniteCheck bool
	// CapsPerImage is the number of captions per image; 0 means 5.
	CapsPerImage int
}

// Precomp file names for a split; see docs/formats.md.
const (
	precompIms      = "_ims.npy"
	precompCaps     = "_caps.txt"
	precompBoxes    = "_boxes.npy"
	precompSizes    = "_sizes.npy"
	precompNRegions = "_nregions.npy"
	precompIDs      = "_ids.txt"
)

// IncompleteMarker is the file a writer of a whole dataset directory (xmr
// synth) creates, durably, before it starts renaming its new files over
// the old ones, and removes once the directory is whole again. Found in a
// directory, it means that a writer was killed half-way: the files may
// come from two different datasets, and LoadPrecomp refuses them.
const IncompleteMarker = ".xmr-incomplete"

// LoadPrecomp loads split (e.g. "test") from a VSE++/SCAN precomp
// directory: {split}_ims.npy, float32 (N,R,D) region or (N,D) global
// features, memory-mapped when possible, and {split}_caps.txt, one caption
// per line, CapsPerImage consecutive lines per image. When the feature file
// has one row per caption (SCAN's duplicated layout), every CapsPerImage-th
// row is kept.
//
// The optional xmr files beside them are read when present:
// {split}_boxes.npy (N,R,4) pixel boxes, normalised on load by
// {split}_sizes.npy (N,2) widths and heights; {split}_nregions.npy (N,)
// valid regions per image; {split}_ids.txt one image id per line.
//
// The features are checked for NaN and Inf unless opt.SkipFiniteCheck.
// Close the returned split to release the mapping.
//
// The load checks ctx between its steps and during the NaN and Inf check;
// once ctx is cancelled it returns an error wrapping ctx's error (the
// reading of the features into memory, with opt.NoMmap or SCAN's layout,
// is not interrupted).
func LoadPrecomp(ctx context.Context, dir, split string, opt *PrecompOptions) (s *Split, err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("load precomp %s: %w", split, err)
	}
	var o PrecompOptions
	if opt != nil {
		o = *opt
	}
	k := o.CapsPerImage
	if k == 0 {
		k = DefaultCapsPerImage
	}
	if k < 0 {
		return nil, fmt.Errorf("load precomp %s: CapsPerImage %d", split, k)
	}
	base := filepath.Join(dir, split)
	capsPath, imsPath := base+precompCaps, base+precompIms
	if ok, err := exists(filepath.Join(dir, IncompleteMarker)); ok || err != nil {
		if err != nil {
			return nil, fmt.Errorf("load precomp %s: %w", split, err)
		}
		return nil, fmt.Errorf("load precomp %s: %s is half replaced: its writer (xmr synth --overwrite) was stopped while renaming its files into place (%s is there), so they may come from two different datasets; run the writer again",
			split, dir, IncompleteMarker)
	}

	caps, err := readCaptionFile(capsPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w; %s", err, splitsIn(dir))
	}
	if err != nil {
		return nil, err
	}
	if len(caps)%k != 0 {
		return nil, fmt.Errorf("read %s: has %d lines, not a multiple of %d captions per image", capsPath, len(caps), k)
	}
	nimg := len(caps) / k

	nf, err := npy.Open(imsPath)
	if err != nil {
		return nil, err
	}
	defer nf.Close()
	h := &nf.Header
	var rows, R, D int
	global := false
	switch len(h.Shape) {
	case 2:
		rows, R, D, global = h.Shape[0], 1, h.Shape[1], true
	case 3:
		rows, R, D = h.Shape[0], h.Shape[1], h.Shape[2]
	default:
		return nil, fmt.Errorf("read %s: shape %s: want (N,R,D) region or (N,D) global features", imsPath, npy.FormatShape(h.Shape))
	}
	if h.DType.Kind != 'f' {
		return nil, fmt.Errorf("read %s: dtype %s (%s): features must be float16, float32 or float64", imsPath, h.DType.Descr(), h.DType)
	}
	if R == 0 || D == 0 {
		what := "regions per image"
		if D == 0 {
			what = "feature dimensions"
		}
		return nil, fmt.Errorf("read %s: shape %s has 0 %s: want at least one", imsPath, npy.FormatShape(h.Shape), what)
	}
	dup := false // SCAN's layout: one (repeated) feature row per caption
	switch {
	case rows == nimg:
	case rows == len(caps) && k > 1:
		dup = true
	default:
		return nil, fmt.Errorf("read %s: %d images need %d captions (%d per image), %s has %d lines",
			imsPath, rows, rows*k, k, filepath.Base(capsPath), len(caps))
	}

	g := &Regions{N: rows, R: R, D: D}
	if o.NoMmap || dup {
		g.Feat, err = nf.ReadFloat32()
	} else {
		var a *npy.Array
		if a, err = nf.Map(); err == nil {
			g.Feat = a.Data
			if a.Mapped() {
				g.m = a
			}
		}
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", imsPath, err)
	}
	feat := g.Feat
	if dup {
		row := R * D
		for j := 1; j < k && row > 0; j++ {
			if !slices.Equal(feat[:row], feat[j*row:(j+1)*row]) {
				return nil, fmt.Errorf("read %s: %d feature rows for %d captions, but rows 0 and %d differ: not SCAN's one-row-per-caption layout", imsPath, rows, len(caps), j)
			}
		}
		g.Feat = everyKth(feat, row, k)
		g.N = nimg
	}

	s = &Split{Name: split, Images: g, Global: global, Captions: caps, CapsPerImage: k}
	// pick keeps one row per image of an extension file whose rows follow
	// the feature file.
	pick := func(path string, n int) (int, error) {
		switch {
		case n == nimg:
			return 1, nil
		case dup && n == rows:
			return k, nil
		}
		return 0, fmt.Errorf("read %s: %d rows for %d images", path, n, nimg)
	}

	if err := loadPrecompIDs(s, base+precompIDs, pick); err != nil {
		return nil, err
	}
	if err := loadPrecompCounts(s, base+precompNRegions, pick); err != nil {
		return nil, err
	}
	if err := loadPrecompSizes(s, base+precompSizes, pick); err != nil {
		return nil, err
	}
	if err := loadPrecompBoxes(s, base+precompBoxes, base+precompSizes, pick); err != nil {
		return nil, err
	}
	if !o.SkipFiniteCheck {
		if err := checkFinite(ctx, g, global); err != nil {
			return nil, fmt.Errorf("read %s: %w", imsPath, err)
		}
	}
	return s, nil
}

// unwrapPathErr drops the *fs.PathError wrapper (which repeats the path).
func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// everyKth returns a copy of rows 0, k, 2k, ... of data, rows of row
// elements each.
func everyKth(data []float32, row, k int) []float32 {
	n := len(data) / row / k
	out := make([]float32, n*row)
	for i := range n {
		copy(out[i*row:(i+1)*row], data[i*k*row:])
	}
	return out
}

// exists reports whether path exists; errors other than not-exist are
// returned.
func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// pickFunc returns the row step that keeps one row per image of an
// extension file with n rows, or an error naming path.
type pickFunc func(path string, n int) (int, error)

func loadPrecompIDs(s *Split, path string, pick pickFunc) error {
	if ok, err := exists(path); !ok {
		return err
	}
	ids, err := readLines(path)
	if err != nil {
		return err
	}
	step, err := pick(path, len(ids))
	if err != nil {
		return err
	}
	s.ImageIDs = make([]string, s.Images.N)
	for i := range s.ImageIDs {
		s.ImageIDs[i] = strings.TrimSpace(ids[i*step])
	}
	return nil
}

func loadPrecompCounts(s *Split, path string, pick pickFunc) error {
	g := s.Images
	g.Count = make([]int, g.N)
	if ok, err := exists(path); !ok {
		for i := range g.Count {
			g.Count[i] = g.R
		}
		return err
	}
	f, err := npy.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	shape := f.Header.Shape
	if len(shape) != 1 {
		return fmt.Errorf("read %s: shape %s: want (N,)", path, npy.FormatShape(shape))
	}
	v, err := f.ReadInts()
	if err != nil {
		return err
	}
	step, err := pick(path, shape[0])
	if err != nil {
		return err
	}
	for i := range g.Count {
		c := v[i*step]
		if c < 0 || c > g.R {
			return fmt.Errorf("read %s: image %d has %d valid regions, outside [0,%d]", path, i, c, g.R)
		}
		if c == 0 {
			return fmt.Errorf("read %s: image %d (id %s) has 0 regions: %w", path, i, s.ID(i), ErrNoRegions)
		}
		g.Count[i] = c
	}
	return nil
}

// ErrNoRegions is wrapped by the errors about an image with no region: it
// has no vector to score, so it would score 0 against every caption, above
// every image of a model whose scores are mostly negative, and it cannot
// be trained on either.
var ErrNoRegions = errors.New("an image without regions has no vector to search or train on: leave it out of the split, or extract its features again")

func loadPrecompSizes(s *Split, path string, pick pickFunc) error {
	if ok, err := exists(path); !ok {
		return err
	}
	a, err := npy.Read(path)
	if err != nil {
		return err
	}
	v, shape := a.Data, a.Shape
	if len(shape) != 2 || shape[1] != 2 {
		return fmt.Errorf("read %s: shape %s: want (N,2) width, height", path, npy.FormatShape(shape))
	}
	step, err := pick(path, shape[0])
	if err != nil {
		return err
	}
	s.Sizes = make([][2]float32, s.Images.N)
	for i := range s.Sizes {
		w, h := v[2*i*step], v[2*i*step+1]
		if !(w > 0 && h > 0) || !isFinite32(w) || !isFinite32(h) {
			return fmt.Errorf("read %s: image %d has size %v x %v", path, i, w, h)
		}
		s.Sizes[i] = [2]float32{w, h}
	}
	return nil
}

// boxSlack is how far, in image sizes, a pixel box may reach beyond its
// image: detectors keep boxes inside the image, so a box further out is
// not one of this image (another image's, swapped sizes, garbage).
const boxSlack = 1

func loadPrecompBoxes(s *Split, path, sizesPath string, pick pickFunc) error {
	if ok, err := exists(path); !ok {
		if err == nil && !s.Global {
			// Said, since it changes results: TERAN's rsum on a synthetic
			// world fell from 79.3 to 71.3 without its boxes file.
			slog.Warn("no boxes file: every region's box is taken as all zeros, so a model that encodes region boxes (TERAN and TERN, image-model pos-encoding concat-and-process) sees no region positions and scores lower than with the boxes",
				"file", path)
		}
		return err
	}
	g := s.Images
	if s.Global {
		return fmt.Errorf("read %s: boxes given for global (N,D) features", path)
	}
	a, err := npy.Read(path)
	if err != nil {
		return err
	}
	v, shape := a.Data, a.Shape
	if len(shape) != 3 || shape[1] != g.R || shape[2] != 4 {
		return fmt.Errorf("read %s: shape %s: want (N,%d,4)", path, npy.FormatShape(shape), g.R)
	}
	step, err := pick(path, shape[0])
	if err != nil {
		return err
	}
	g.Boxes = make([]float32, g.N*g.R*4)
	for i := 0; i < g.N; i++ {
		src := v[i*step*g.R*4:]
		for r := 0; r < g.Count[i]; r++ {
			b := src[r*4 : r*4+4]
			for c, x := range b {
				if !isFinite32(x) {
					return fmt.Errorf("read %s: image %d region %d coordinate %d is %v", path, i, r, c, x)
				}
				if s.Sizes != nil {
					x /= s.Sizes[i][c%2]
					if x < -boxSlack || x > 1+boxSlack {
						return fmt.Errorf("read %s: image %d region %d coordinate %d is %v, %.3g image sizes from the %v x %v image of %s: want a box within %g image size of it",
							path, i, r, c, src[r*4+c], x, s.Sizes[i][0], s.Sizes[i][1], filepath.Base(sizesPath), float64(boxSlack))
					}
				} else if x < 0 || x > 1 {
					return fmt.Errorf("read %s: image %d region %d coordinate %d is %v: pixel boxes need %s to normalise them (or give boxes in [0,1])",
						path, i, r, c, x, filepath.Base(sizesPath))
				}
				g.Boxes[(i*g.R+r)*4+c] = x
			}
		}
	}
	return nil
}

// readCaptionFile reads a caption file (see ReadCaptions).
func readCaptionFile(path string) ([]string, error) {
	f, err := infile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, unwrapPathErr(err))
	}
	defer f.Close()
	return ReadCaptions(f, path)
}

// ReadCaptions reads a caption file, one caption per line, as readLines
// splits it; name names it in errors. A blank line (empty, or only
// white space, control or invisible characters: text.Blank) is an error
// naming the line: it is a caption lost in preparing the file, it would
// shift every later caption to the wrong image, and a caption with no word
// has no vectors, so it would score 0 against every image.
func ReadCaptions(r io.Reader, name string) ([]string, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	lines := splitLines(b)
	var blank []int
	for i, l := range lines {
		if text.Blank(l) {
			blank = append(blank, i+1)
		}
	}
	if len(blank) > 0 {
		more := ""
		if len(blank) > 1 {
			more = fmt.Sprintf(" (and %d more blank lines, the last at line %d)", len(blank)-1, blank[len(blank)-1])
		}
		return nil, fmt.Errorf("read %s: line %d: blank caption%s; every line must hold one caption (a blank line holds nothing but spaces, control or invisible characters such as a byte order mark or zero-width spaces)", name, blank[0], more)
	}
	return lines, nil
}

// splitsIn says which splits a precomp directory has (from its
// {split}_caps.txt files), for the error about a missing one.
func splitsIn(dir string) string {
	matches, _ := filepath.Glob(filepath.Join(dir, "*"+precompCaps))
	var names []string
	for _, m := range matches {
		names = append(names, strings.TrimSuffix(filepath.Base(m), precompCaps))
	}
	if len(names) == 0 {
		return fmt.Sprintf("%s has no split (no *%s file)", dir, precompCaps)
	}
	slices.Sort(names)
	return fmt.Sprintf("the splits in %s are %s", dir, strings.Join(names, ", "))
}

// readLines reads a text file as lines, without their "\n" or "\r\n"; a
// final newline does not start an extra line, and a leading UTF-8 byte
// order mark is dropped.
func readLines(path string) ([]string, error) {
	b, err := infile.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, unwrapPathErr(err))
	}
	return splitLines(b), nil
}

// splitLines splits text into lines as readLines describes.
func splitLines(b []byte) []string {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	if len(b) == 0 {
		return nil
	}
	all := string(b)
	all = strings.TrimSuffix(all, "\n")
	lines := strings.Split(all, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// WritePrecomp writes s to dir in the precomp layout LoadPrecomp reads:
// {name}_ims.npy ((N,R,D) float32, or (N,D) when s.Global),
// {name}_caps.txt, and when s has them {name}_boxes.npy (pixel boxes when
// s.Sizes is set, else the normalised ones), {name}_sizes.npy,
// {name}_nregions.npy (int32, written when some image has fewer than R
// valid regions) and {name}_ids.txt. Optional files s lacks are removed,
// so that stale ones from an earlier write are not read back. Captions and
// ids must not contain line breaks.
//
// The files are written to temporary files and renamed into place together
// at the end, after which the stale ones are removed: a failed or
// cancelled write leaves the split's files as they were. WritePrecomp
// checks ctx before each file and while writing the features; once ctx is
// cancelled it returns an error wrapping ctx's error.
func WritePrecomp(ctx context.Context, dir string, s *Split) (err error) {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write precomp to %s: %w", dir, err)
	}
	if err := s.Validate(); err != nil {
		return fmt.Errorf("write precomp to %s: %w", dir, err)
	}
	if s.Name == "" || strings.ContainsAny(s.Name, `/\`) {
		return fmt.Errorf("write precomp to %s: bad split name %q", dir, s.Name)
	}
	g := s.Images
	base := filepath.Join(dir, s.Name)
	for i, c := range s.Captions {
		if err := CheckCaption(c); err != nil {
			return fmt.Errorf("write %s: caption %d (of image %s) %w", base+precompCaps, i, s.ID(i/max(s.CapsPerImage, 1)), err)
		}
	}
	for i, id := range s.ImageIDs {
		if err := CheckImageID(id); err != nil {
			return fmt.Errorf("write %s: the id %q of image %d %w", base+precompIDs, id, i, err)
		}
	}

	// stage writes one file under a temporary name; optional files s
	// lacks are noted as stale.
	var batch atomicfile.Batch
	var stale []string
	defer func() {
		if err != nil {
			batch.Abort()
		}
	}()
	stage := func(path string, write func(w io.Writer) error) error {
		return batch.Add(ctx, path, write)
	}
	stageLines := func(path string, lines []string) error {
		return stage(path, func(w io.Writer) error { return writeLinesTo(ctx, w, lines) })
	}

	if err := stageLines(base+precompCaps, s.Captions); err != nil {
		return err
	}
	if s.ImageIDs != nil {
		if err := stageLines(base+precompIDs, s.ImageIDs); err != nil {
			return err
		}
	} else {
		stale = append(stale, base+precompIDs)
	}

	if s.Sizes != nil {
		v := make([]float32, 0, 2*g.N)
		for _, wh := range s.Sizes {
			v = append(v, wh[0], wh[1])
		}
		if err := stage(base+precompSizes, npyTo(ctx, []int{g.N, 2}, v)); err != nil {
			return err
		}
	} else {
		stale = append(stale, base+precompSizes)
	}

	padded := false
	for i := 0; i < g.N && g.Count != nil; i++ {
		padded = padded || g.Count[i] != g.R
	}
	if padded {
		v := make([]int32, g.N)
		for i, c := range g.Count {
			v[i] = int32(c)
		}
		if err := stage(base+precompNRegions, npyTo(ctx, []int{g.N}, v)); err != nil {
			return err
		}
	} else {
		stale = append(stale, base+precompNRegions)
	}

	if g.Boxes != nil {
		v := make([]float32, len(g.Boxes))
		for i := 0; i < g.N; i++ {
			for r := 0; r < g.NumRegions(i); r++ {
				for c := range 4 {
					j := (i*g.R+r)*4 + c
					v[j] = g.Boxes[j]
					if s.Sizes != nil {
						v[j] *= s.Sizes[i][c%2]
					}
				}
			}
		}
		if err := stage(base+precompBoxes, npyTo(ctx, []int{g.N, g.R, 4}, v)); err != nil {
			return err
		}
	} else {
		stale = append(stale, base+precompBoxes)
	}

	shape := []int{g.N, g.R, g.D}
	if s.Global {
		shape = []int{g.N, g.D}
	}
	if err := stage(base+precompIms, npyTo(ctx, shape, g.Feat)); err != nil {
		return err
	}

	// Publish: past this point ctx is not checked.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write precomp to %s: %w", dir, err)
	}
	if err := batch.Commit(); err != nil {
		return err
	}
	for _, p := range stale {
		if err := removeIfExists(p); err != nil {
			return err
		}
	}
	return nil
}

// writeLinesTo writes lines to w, each ended by "\n". It checks ctx every
// 64Ki lines and stops with ctx's error once ctx is cancelled.
func writeLinesTo(ctx context.Context, w io.Writer, lines []string) error {
	for i, l := range lines {
		if i%(64<<10) == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if _, err := io.WriteString(w, l); err != nil {
			return err
		}
		if _, err := io.WriteString(w, "\n"); err != nil {
			return err
		}
	}
	return nil
}

// removeIfExists removes path if it exists.
func removeIfExists(path string) error {
	err := os.Remove(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", path, err)
	}
	return nil
}

package data

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Format is the on-disk layout of a dataset.
type Format int

const (
	// FormatAuto asks Source to detect the format from the files.
	FormatAuto Format = iota
	// FormatPrecomp is a VSE++/SCAN precomp directory (LoadPrecomp).
	FormatPrecomp
	// FormatBottomUp is a directory of per-image bottom-up files,
	// bu_att/{id}.npz and bu_box/{id}.npy (LoadBottomUp).
	FormatBottomUp
	// FormatTSV is the bottom-up attention extractor's TSV files (LoadTSV).
	FormatTSV
)

// formatNames are the names ParseFormat accepts, indexed by Format.
var formatNames = [...]string{
	FormatAuto:     "auto",
	FormatPrecomp:  "precomp",
	FormatBottomUp: "bottomup",
	FormatTSV:      "tsv",
}

// ParseFormat parses a format name: "auto" (or ""), "precomp", "bottomup"
// or "tsv", in any case.
func ParseFormat(s string) (Format, error) {
	if s == "" {
		return FormatAuto, nil
	}
	for f, name := range formatNames {
		if strings.EqualFold(s, name) {
			return Format(f), nil
		}
	}
	return FormatAuto, fmt.Errorf("unknown dataset format %q: want %s", s, strings.Join(formatNames[:], ", "))
}

// String returns the name ParseFormat accepts.
func (f Format) String() string {
	if f < 0 || int(f) >= len(formatNames) {
		return fmt.Sprintf("Format(%d)", int(f))
	}
	return formatNames[f]
}

// Errors of Source for data it cannot interpret on its own; the message
// says what was looked for, and callers may add how to say it explicitly
// (a command-line flag, a config key).
var (
	// ErrFormatUnknown reports that FormatAuto found no format, or
	// several, at the source's path.
	ErrFormatUnknown = errors.New("cannot tell the dataset format")
	// ErrKarpathyUnknown reports that no KarpathyFile was given and the
	// dataset directory holds no dataset_*.json file, or several.
	ErrKarpathyUnknown = errors.New("cannot tell which Karpathy split file to use")
)

// Source says where a dataset is and in what format, and loads its splits
// in any format as a *Split. The zero Format detects the format from the
// files at Path:
//
//   - a directory holding {split}_ims.npy files is precomp;
//   - a directory holding a bu_att folder is bottomup;
//   - a .tsv file (or .tsv.N, as the Karpathy-split TSV files are named),
//     a directory holding such files, or a glob pattern matching them, is
//     tsv.
//
// Split names are those of precomp directories: "train", "dev", "test" and
// "testall". For bottomup and tsv they select images of the Karpathy split
// file as Karpathy.SplitIndices does: "dev" is Karpathy's "val" split (the
// first 5000 of it for COCO), "train" includes COCO's "restval" images,
// "test" is the first 1000 COCO test images and "testall" all 5000;
// "val" is accepted as a name of "dev", and "restval" selects COCO's
// restval images alone. The loaded Split is named by the precomp name
// ("dev" for "val"), so that WritePrecomp writes the files the commands
// read.
//
// Load and Grounding resolve the source on every call; Resolve once to
// detect the format and parse the Karpathy file a single time for several
// splits.
type Source struct {
	// Format is the dataset's format; FormatAuto detects it.
	Format Format
	// Path is a directory for precomp and bottomup; for tsv, a TSV file,
	// a directory whose .tsv (and .tsv.N) files are read, or a glob
	// pattern (e.g. "feats/karpathy_*.tsv.*") matching the files.
	Path string
	// KarpathyFile is the Karpathy split file (dataset_coco.json, ...)
	// giving the images and captions of each split of bottomup and tsv
	// data. When empty, the dataset directory (Path, or the directory of
	// the TSV files) must hold exactly one dataset_*.json file.
	KarpathyFile string
	// SizesFile and COCOAnnotations give the image sizes that normalise
	// the pixel boxes of bottomup data (see BottomUpOptions); tsv records
	// carry their own sizes.
	SizesFile       string
	COCOAnnotations []string
	// IDs picks the Karpathy field that names the images' files (bottomup)
	// or TSV records (tsv); see BottomUpOptions.IDs and TSVOptions.IDs.
	IDs IDScheme

	// res is set by Resolve.
	res *resolvedSource
}

// resolvedSource is what Resolve finds: the files and the parsed
// Karpathy file, shared read-only by the copies of a resolved Source.
type resolvedSource struct {
	dir      string    // the dataset directory: Path, or the TSV files' directory
	tsv      []string  // the TSV files, in reading order
	karpathy *Karpathy // bottomup and tsv
}

// Resolve returns a copy of s with the format detected, the TSV files
// listed and the Karpathy file found and parsed, so that loading several
// splits from it parses the Karpathy file once. It checks that the
// options given apply to the format. Resolving a resolved source returns
// it unchanged. The resolved source holds the parsed Karpathy file; drop it
// when the splits are loaded. Set the fields before resolving: a resolved
// source keeps what it found and must not be changed.
//
// Relative KarpathyFile, SizesFile and COCOAnnotations paths that do not
// exist as given are looked up in the dataset directory.
func (s Source) Resolve() (Source, error) {
	if s.res != nil {
		return s, nil
	}
	r := s
	var err error
	r.res = &resolvedSource{}
	if r.Format, r.res.dir, r.res.tsv, err = s.detect(); err != nil {
		return Source{}, err
	}
	if err := r.checkOptions(); err != nil {
		return Source{}, err
	}
	if r.Format == FormatPrecomp {
		return r, nil
	}
	if r.SizesFile, err = auxPath(r.res.dir, "sizes file", r.SizesFile); err != nil {
		return Source{}, err
	}
	if len(r.COCOAnnotations) > 0 {
		r.COCOAnnotations = slices.Clone(r.COCOAnnotations)
		for i, a := range r.COCOAnnotations {
			if r.COCOAnnotations[i], err = auxPath(r.res.dir, "COCO annotation file", a); err != nil {
				return Source{}, err
			}
		}
	}
	if r.KarpathyFile, err = findKarpathy(r.res.dir, r.KarpathyFile); err != nil {
		return Source{}, err
	}
	if r.res.karpathy, err = LoadKarpathy(r.KarpathyFile); err != nil {
		return Source{}, err
	}
	return r, nil
}

// Load loads split ("train", "dev", "test", "testall"; see Source) in the
// source's format. An error for a split the data lacks lists the splits
// it has. The loaders check ctx as they go (see LoadPrecomp, LoadBottomUp
// and LoadTSV); once ctx is cancelled Load returns an error wrapping ctx's
// error.
func (s Source) Load(ctx context.Context, split string) (*Split, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("load %s: %w", split, err)
	}
	r, err := s.Resolve()
	if err != nil {
		return nil, err
	}
	switch r.Format {
	case FormatPrecomp:
		if err := r.checkPrecompSplit(split); err != nil {
			return nil, err
		}
		return LoadPrecomp(ctx, r.Path, split, nil)
	case FormatBottomUp:
		name, err := r.karpathySplit(split)
		if err != nil {
			return nil, err
		}
		return LoadBottomUp(ctx, r.Path, r.KarpathyFile, name, &BottomUpOptions{
			Karpathy:        r.res.karpathy,
			IDs:             r.IDs,
			SizesFile:       r.SizesFile,
			COCOAnnotations: r.COCOAnnotations,
		})
	case FormatTSV:
		name, err := r.karpathySplit(split)
		if err != nil {
			return nil, err
		}
		return LoadTSV(ctx, r.res.tsv, r.KarpathyFile, name, &TSVOptions{Karpathy: r.res.karpathy, IDs: r.IDs})
	}
	return nil, fmt.Errorf("data %s: unknown format %v", r.Path, r.Format)
}

// Grounding returns the word-region ground truth of split (LoadGrounding),
// which only precomp directories written by the synthetic world have; it
// returns nil and no error for other sources.
func (s Source) Grounding(split string) ([]Grounding, error) {
	f := s.Format
	if s.res == nil && f == FormatAuto {
		var err error
		if f, _, _, err = s.detect(); err != nil {
			return nil, err
		}
	}
	if f != FormatPrecomp {
		return nil, nil
	}
	return LoadGrounding(s.Path, split)
}

// String describes the source for logs, e.g.
// "bottomup /data/coco (dataset_coco.json)"; an unresolved source with
// FormatAuto is described as "auto".
func (s Source) String() string {
	var b strings.Builder
	b.WriteString(s.Format.String())
	b.WriteByte(' ')
	b.WriteString(s.Path)
	var notes []string
	if s.res != nil && s.Format == FormatTSV && (len(s.res.tsv) != 1 || s.res.tsv[0] != s.Path) {
		notes = append(notes, fmt.Sprintf("%d TSV %s", len(s.res.tsv), plural(len(s.res.tsv) > 1, "file", "files")))
	}
	dir := s.Path
	if s.res != nil {
		dir = s.res.dir
	}
	rel := func(p string) string {
		if r, err := filepath.Rel(dir, p); err == nil && filepath.IsLocal(r) {
			return r
		}
		return p
	}
	if s.KarpathyFile != "" {
		notes = append(notes, rel(s.KarpathyFile))
	}
	if s.IDs != IDAuto {
		notes = append(notes, "ids "+s.IDs.String())
	}
	if s.SizesFile != "" {
		notes = append(notes, "sizes "+rel(s.SizesFile))
	}
	for _, a := range s.COCOAnnotations {
		notes = append(notes, "sizes "+rel(a))
	}
	if len(notes) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(notes, ", "))
	}
	return b.String()
}

// Marks of each format in a directory, for detection and its errors.
const (
	precompMark  = "*" + precompIms
	bottomUpMark = buAttDir + "/"
	tsvMark      = ".tsv"
)

// detect returns the source's format, its dataset directory and, for tsv,
// its files.
func (s Source) detect() (Format, string, []string, error) {
	if s.Path == "" {
		return 0, "", nil, errors.New("no dataset path given")
	}
	switch s.Format {
	case FormatAuto:
		return s.detectAuto()
	case FormatPrecomp, FormatBottomUp:
		fi, err := os.Stat(s.Path)
		if err != nil {
			return 0, "", nil, fmt.Errorf("%s data %s: %w", s.Format, s.Path, unwrapPathErr(err))
		}
		if !fi.IsDir() {
			return 0, "", nil, fmt.Errorf("%s data %s: not a directory", s.Format, s.Path)
		}
		if s.Format == FormatBottomUp {
			if ok, err := isDir(filepath.Join(s.Path, buAttDir)); err != nil {
				return 0, "", nil, err
			} else if !ok {
				return 0, "", nil, fmt.Errorf("bottomup data %s: no %s folder (want %s/{id}.npz files)", s.Path, buAttDir, buAttDir)
			}
		}
		return s.Format, s.Path, nil, nil
	case FormatTSV:
		files, err := tsvFiles(s.Path, false)
		if err != nil {
			return 0, "", nil, err
		}
		return FormatTSV, tsvDir(s.Path, files), files, nil
	}
	return 0, "", nil, fmt.Errorf("data %s: unknown format %v", s.Path, s.Format)
}

// detectAuto finds the format of the files at s.Path.
func (s Source) detectAuto() (Format, string, []string, error) {
	fi, err := os.Stat(s.Path)
	if errors.Is(err, fs.ErrNotExist) && hasMeta(s.Path) {
		files, err := tsvFiles(s.Path, true)
		if err != nil {
			return 0, "", nil, err
		}
		return FormatTSV, tsvDir(s.Path, files), files, nil
	}
	if err != nil {
		return 0, "", nil, fmt.Errorf("data %s: %w", s.Path, unwrapPathErr(err))
	}
	if !fi.IsDir() {
		if isTSVName(fi.Name()) {
			return FormatTSV, filepath.Dir(s.Path), []string{s.Path}, nil
		}
		return 0, "", nil, fmt.Errorf("data %s: %w: a file, but not a %s file (want a precomp or bottom-up directory, or bottom-up TSV files)", s.Path, ErrFormatUnknown, tsvMark)
	}

	var found []string
	format := FormatAuto
	precomp, err := filepath.Glob(filepath.Join(s.Path, precompMark))
	if err != nil {
		return 0, "", nil, fmt.Errorf("data %s: %w", s.Path, err)
	}
	if len(precomp) > 0 {
		found, format = append(found, fmt.Sprintf("%s (precomp)", filepath.Base(precomp[0]))), FormatPrecomp
	}
	if ok, err := isDir(filepath.Join(s.Path, buAttDir)); err != nil {
		return 0, "", nil, err
	} else if ok {
		found, format = append(found, bottomUpMark+" (bottomup)"), FormatBottomUp
	}
	tsv, err := listTSV(s.Path)
	if err != nil {
		return 0, "", nil, err
	}
	if len(tsv) > 0 {
		found, format = append(found, fmt.Sprintf("%s (tsv)", filepath.Base(tsv[0]))), FormatTSV
	}
	switch len(found) {
	case 0:
		return 0, "", nil, fmt.Errorf("data %s: %w: found no %s files (precomp), no %s folder (bottomup) and no %s files (tsv)",
			s.Path, ErrFormatUnknown, precompMark, bottomUpMark, tsvMark)
	case 1:
		return format, s.Path, tsv, nil
	}
	return 0, "", nil, fmt.Errorf("data %s: %w: it holds files of several formats: %s", s.Path, ErrFormatUnknown, strings.Join(found, ", "))
}

// checkOptions reports options set on a resolved source that its format
// does not use, which are more likely a mistake than something to ignore.
func (s Source) checkOptions() error {
	var extra []string
	why := ""
	switch s.Format {
	case FormatPrecomp:
		if s.KarpathyFile != "" {
			extra = append(extra, "a Karpathy split file")
		}
		if s.IDs != IDAuto {
			extra = append(extra, "an image id scheme")
		}
		why = "precomp directories hold their captions, ids and image sizes"
	case FormatTSV:
		why = "TSV records hold their image sizes"
	}
	if s.Format != FormatBottomUp {
		if s.SizesFile != "" {
			extra = append(extra, "a sizes file")
		}
		if len(s.COCOAnnotations) > 0 {
			extra = append(extra, "COCO annotation files")
		}
	}
	if len(extra) == 0 {
		return nil
	}
	return fmt.Errorf("%s data %s: %s given, which %s not apply: %s", s.Format, s.Path, strings.Join(extra, " and "), plural(len(extra) > 1 || len(s.COCOAnnotations) > 0, "does", "do"), why)
}

// plural returns one or, when many, several.
func plural(many bool, one, several string) string {
	if many {
		return several
	}
	return one
}

// checkPrecompSplit reports a split that a precomp directory lacks, with
// the splits it has.
func (s Source) checkPrecompSplit(split string) error {
	if split == "" || strings.ContainsAny(split, `/\`) {
		return fmt.Errorf("precomp data %s: bad split name %q", s.Path, split)
	}
	ok, err := exists(filepath.Join(s.Path, split+precompIms))
	if err != nil || ok {
		return err
	}
	have, err := filepath.Glob(filepath.Join(s.Path, precompMark))
	if err != nil {
		return fmt.Errorf("precomp data %s: %w", s.Path, err)
	}
	for i, p := range have {
		have[i] = strings.TrimSuffix(filepath.Base(p), precompIms)
	}
	return fmt.Errorf("precomp data %s: no split %q (no %s%s); it has %s", s.Path, split, split, precompIms, strings.Join(have, ", "))
}

// karpathySplit checks that split has images in the resolved Karpathy
// file and returns its precomp name ("dev" for "val").
func (s Source) karpathySplit(split string) (string, error) {
	if split == "val" {
		split = SplitDev
	}
	k := s.res.karpathy
	idx, err := k.SplitIndices(split)
	if err != nil {
		return "", fmt.Errorf("%s: %w", s.KarpathyFile, err)
	}
	if len(idx) > 0 {
		return split, nil
	}
	name := fmt.Sprintf("%q", split)
	switch split {
	case SplitDev:
		name += ` (Karpathy's "val")`
	case SplitTrain:
		name += ` (Karpathy's "train" and "restval")`
	}
	var splits []string
	count := map[string]int{}
	for i := range k.Images {
		sp := k.Images[i].Split
		if count[sp] == 0 {
			splits = append(splits, sp)
		}
		count[sp]++
	}
	if len(splits) == 0 {
		return "", fmt.Errorf("%s: split %s has no images: the file lists none", s.KarpathyFile, name)
	}
	for i, sp := range splits {
		splits[i] = fmt.Sprintf("%q (%d)", sp, count[sp])
	}
	return "", fmt.Errorf("%s: split %s has no images; the file's images are in %s", s.KarpathyFile, name, strings.Join(splits, ", "))
}

// findKarpathy returns the Karpathy split file: given (looked up in dir
// when relative and absent), or the one dataset_*.json file in dir.
func findKarpathy(dir, given string) (string, error) {
	if given != "" {
		return auxPath(dir, "Karpathy split file", given)
	}
	pattern := "dataset_*.json"
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return "", fmt.Errorf("data %s: %w", dir, err)
	}
	switch len(m) {
	case 0:
		return "", fmt.Errorf("data %s: %w: none given and no %s file in the directory", dir, ErrKarpathyUnknown, pattern)
	case 1:
		return m[0], nil
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return "", fmt.Errorf("data %s: %w: none given and several %s files in the directory: %s", dir, ErrKarpathyUnknown, pattern, strings.Join(m, ", "))
}

// auxPath returns the path of an auxiliary file (what, for errors): p as
// given when it exists or is absolute, else p inside dir when that exists.
func auxPath(dir, what, p string) (string, error) {
	if p == "" {
		return "", nil
	}
	ok, err := exists(p)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", what, p, unwrapPathErr(err))
	}
	if ok || filepath.IsAbs(p) {
		return p, nil
	}
	inDir := filepath.Join(dir, p)
	if ok, err := exists(inDir); err != nil {
		return "", fmt.Errorf("%s %s: %w", what, inDir, unwrapPathErr(err))
	} else if ok {
		return inDir, nil
	}
	return "", fmt.Errorf("%s %s: no such file (nor in %s)", what, p, dir)
}

// tsvFiles lists the TSV files at path: the file itself, the .tsv files
// of a directory, or the matches of a glob pattern (only .tsv names when
// strict, as auto-detection requires).
func tsvFiles(path string, strict bool) ([]string, error) {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		files, err := listTSV(path)
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("tsv data %s: no %s files in the directory", path, tsvMark)
		}
		return files, nil
	case err == nil:
		return []string{path}, nil
	case !errors.Is(err, fs.ErrNotExist) || !hasMeta(path):
		return nil, fmt.Errorf("tsv data %s: %w", path, unwrapPathErr(err))
	}
	m, err := filepath.Glob(path)
	if err != nil {
		return nil, fmt.Errorf("data %s: %w", path, err)
	}
	var files []string
	for _, p := range m {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("data %s: %w", p, unwrapPathErr(err))
		}
		if fi.IsDir() {
			continue
		}
		if strict && !isTSVName(p) {
			return nil, fmt.Errorf("data %s: %w: pattern matches %s, not a %s file", path, ErrFormatUnknown, p, tsvMark)
		}
		files = append(files, p)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("data %s: no such file or directory, and no file matches it as a pattern", path)
	}
	return files, nil
}

// listTSV returns the .tsv and .tsv.N files of dir, sorted by name.
func listTSV(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("data %s: %w", dir, unwrapPathErr(err))
	}
	var files []string
	for _, e := range ents {
		if !e.IsDir() && isTSVName(e.Name()) {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	return files, nil
}

// tsvDir returns the dataset directory of TSV files: path itself when a
// directory, else the directory of the first file.
func tsvDir(path string, files []string) string {
	if ok, _ := isDir(path); ok {
		return path
	}
	return filepath.Dir(files[0])
}

// isTSVName reports whether a file name ends in .tsv, or .tsv.N with N
// decimal digits (the Karpathy-split TSV files are split in parts so).
func isTSVName(name string) bool {
	name = filepath.Base(name)
	if i := strings.LastIndexByte(name, '.'); i >= 0 && i+1 < len(name) &&
		strings.Trim(name[i+1:], "0123456789") == "" {
		name = name[:i]
	}
	ext := filepath.Ext(name)
	return strings.EqualFold(ext, tsvMark) && len(name) > len(ext)
}

// hasMeta reports whether path has glob metacharacters.
func hasMeta(path string) bool { return strings.ContainsAny(path, `*?[`) }

// isDir reports whether path is an existing directory.
func isDir(path string) (bool, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("data %s: %w", path, unwrapPathErr(err))
	}
	return fi.IsDir(), nil
}

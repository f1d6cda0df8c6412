package extract

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/internal/infile"
	"github.com/xmr-project/xmr/synth"
	"github.com/xmr-project/xmr/text"
)

// IsImageFile reports whether name has a JPEG or PNG extension.
func IsImageFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".jpg", ".jpeg", ".png":
		return true
	}
	return false
}

// FolderItems lists the JPEG and PNG files under dir (by extension,
// subfolders included, hidden files and folders left out), sorted by path;
// an image's ID is its path relative to dir, with forward slashes, without
// the extension.
func FolderItems(dir string) ([]Item, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("read images %s: %w", dir, unwrapPath(err))
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("read images %s: not a directory", dir)
	}
	var items []Item
	seen := map[string]string{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if p != dir && strings.HasPrefix(name, ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !IsImageFile(name) {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		id := filepath.ToSlash(strings.TrimSuffix(rel, filepath.Ext(rel)))
		if strings.ContainsAny(id, "\r\n") {
			return fmt.Errorf("image file %q has a line break in its name", p)
		}
		if prev, dup := seen[id]; dup {
			return fmt.Errorf("images %s and %s have the same id %q: rename one", prev, p, id)
		}
		seen[id] = p
		items = append(items, Item{Path: p, ID: id})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read images %s: %w", dir, err)
	}
	slices.SortFunc(items, func(a, b Item) int { return strings.Compare(a.ID, b.ID) })
	if len(items) == 0 {
		return nil, fmt.Errorf("read images %s: no JPEG or PNG files (*.jpg, *.jpeg, *.png)", dir)
	}
	return items, nil
}

// maxCaptionLine bounds a line of a captions file (ReadCaptionFile): a
// caption is a sentence; a megabyte is no caption file.
const maxCaptionLine = 1 << 20

// ReadCaptionFile reads a captions file for a folder of images: one
// caption per line as "NAME<TAB>CAPTION", where NAME is the image's file
// name relative to the folder (or its id, without the extension),
// optionally followed by "#k" as in Flickr30k's results_20130124.token.
// Every image of items needs at least data.DefaultCapsPerImage captions;
// the first ones are kept. It returns the captions of each item, in
// order. Errors name the file and line, or the images without enough
// captions. Blank lines are skipped; a caption that is blank (text.Blank:
// nothing but spaces, control or invisible characters) is an error, and so
// is a line longer than 1 MiB.
func ReadCaptionFile(path, dir string, items []Item) ([][]string, error) {
	f, err := infile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read captions %s: %w", path, unwrapPath(err))
	}
	defer f.Close()
	byName := map[string]int{}
	for i, it := range items {
		byName[it.ID] = i
		if rel, err := filepath.Rel(dir, it.Path); err == nil {
			byName[filepath.ToSlash(rel)] = i
		}
	}
	caps := make([][]string, len(items))
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxCaptionLine)
	line := 0
	for sc.Scan() {
		line++
		l := strings.TrimSuffix(sc.Text(), "\r")
		if line == 1 {
			l = strings.TrimPrefix(l, "\xef\xbb\xbf")
		}
		if text.Blank(l) {
			continue
		}
		name, caption, ok := strings.Cut(l, "\t")
		if !ok {
			return nil, fmt.Errorf("read captions %s: line %d: no tab; want NAME<TAB>CAPTION", path, line)
		}
		if k := strings.LastIndexByte(name, '#'); k >= 0 {
			name = name[:k]
		}
		caption = strings.TrimSpace(caption)
		if err := data.CheckCaption(caption); err != nil {
			return nil, fmt.Errorf("read captions %s: line %d: the caption of %s %w", path, line, name, err)
		}
		i, ok := byName[filepath.ToSlash(strings.TrimSpace(name))]
		if !ok {
			return nil, fmt.Errorf("read captions %s: line %d: no image %q in %s", path, line, name, dir)
		}
		caps[i] = append(caps[i], caption)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("read captions %s: line %d is longer than %d MiB: want one caption a line, NAME<TAB>CAPTION (is this a captions file?)", path, line+1, maxCaptionLine>>20)
		}
		return nil, fmt.Errorf("read captions %s: line %d: %w", path, line+1, err)
	}
	k := data.DefaultCapsPerImage
	var short []string
	for i, c := range caps {
		if len(c) < k {
			short = append(short, fmt.Sprintf("%s (%d)", items[i].ID, len(c)))
			continue
		}
		caps[i] = c[:k]
	}
	if len(short) > 0 {
		more := ""
		if len(short) > 5 {
			more = fmt.Sprintf(" and %d more", len(short)-5)
			short = short[:5]
		}
		return nil, fmt.Errorf("read captions %s: every image needs %d captions; %s have fewer%s", path, k, strings.Join(short, ", "), more)
	}
	return caps, nil
}

// WorldSplits lists the splits of a synthetic world in dir (see package
// synth): its images/SPLIT/ID.png files and SPLIT_caps.txt captions. names
// selects splits (nil: every split of the world).
func WorldSplits(dir string, names []string) ([]SplitSpec, error) {
	m, err := synth.LoadManifest(dir)
	if err != nil {
		return nil, err
	}
	if !m.PNG {
		return nil, fmt.Errorf("read world %s: it was generated without images (--no-images): there are no pixels to extract", dir)
	}
	var have []string
	for _, s := range m.Splits {
		have = append(have, s.Name)
	}
	if names == nil {
		names = have
	}
	var out []SplitSpec
	for _, name := range names {
		i := slices.Index(have, name)
		if i < 0 {
			return nil, fmt.Errorf("read world %s: no split %q; it has %s", dir, name, strings.Join(have, ", "))
		}
		s := m.Splits[i]
		capsPath := filepath.Join(dir, s.Name+"_caps.txt")
		cf, err := infile.Open(capsPath)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", capsPath, unwrapPath(err))
		}
		caps, err := data.ReadCaptions(cf, capsPath)
		cf.Close()
		if err != nil {
			return nil, err
		}
		k := m.CaptionsPerImage
		if k != data.DefaultCapsPerImage || len(caps) != s.Len*k {
			return nil, fmt.Errorf("read %s: %d captions for %d images (%d per image); want %d per image", capsPath, len(caps), s.Len, k, data.DefaultCapsPerImage)
		}
		imgDir := filepath.Join(dir, "images", s.Name)
		if s.Of != "" {
			if _, err := os.Stat(imgDir); err != nil {
				imgDir = filepath.Join(dir, "images", s.Of)
			}
		}
		spec := SplitSpec{Name: s.Name}
		for j := range s.Len {
			id := synth.IDOf(s.Start + j)
			spec.Items = append(spec.Items, Item{Path: filepath.Join(imgDir, id+".png"), ID: id})
			spec.Captions = append(spec.Captions, caps[j*k:(j+1)*k])
		}
		out = append(out, spec)
	}
	return out, nil
}

// KarpathySplits lists the splits of a Karpathy split file (dataset_coco.json,
// dataset_flickr30k.json) with their images under root (root/filepath/filename
// or root/filename) and their first data.DefaultCapsPerImage captions.
// names selects splits (nil: those of train, dev and test that have images;
// Karpathy's "val" is named "dev", as the loaders read it); ids says which field
// names the images.
//
// Every photo must be inside root once symbolic links are followed (root's
// own and the photo's): a filepath or filename that leads elsewhere, by
// ".." (which data.ReadKarpathy refuses already), an absolute path or a
// link out of root, is an error naming the image, before anything is
// read. A photo listed in two of the file's splits (say train and test) is
// extracted into both, with a slog.Warn naming it. COCO's restval images
// are part of train (the VSE++ convention); the restval images of any
// other dataset belong to no split xmr reads: they are left out, with a
// slog.Warn.
func KarpathySplits(jsonPath, root string, names []string, ids data.IDScheme) ([]SplitSpec, error) {
	k, err := data.LoadKarpathy(jsonPath)
	if err != nil {
		return nil, err
	}
	realRoot, err := filepath.Abs(root)
	if err == nil {
		realRoot, err = filepath.EvalSymlinks(realRoot)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: the image root %s: %w", jsonPath, root, unwrapPath(err))
	}
	if st, err := os.Stat(realRoot); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%s: the image root %s is not a directory", jsonPath, root)
	}
	warnSplitOverlaps(jsonPath, k)
	all := names == nil
	if all {
		names = []string{data.SplitTrain, data.SplitDev, data.SplitTest}
	}
	var out []SplitSpec
	for _, name := range names {
		if name == "val" {
			name = data.SplitDev // written as the precomp name that train and eval read
		}
		idx, err := k.SplitIndices(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", jsonPath, err)
		}
		if len(idx) == 0 {
			if all {
				continue // Flickr8k copies often lack a split: extract those there are
			}
			return nil, fmt.Errorf("%s: split %s has no images", jsonPath, name)
		}
		idList, err := k.IDs(idx, ids)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", jsonPath, err)
		}
		caps, err := k.Captions(idx, data.DefaultCapsPerImage)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", jsonPath, err)
		}
		spec := SplitSpec{Name: name}
		for j, i := range idx {
			im := &k.Images[i]
			if im.Filename == "" {
				return nil, fmt.Errorf("%s: images[%d] has no filename: there is no photo to extract", jsonPath, i)
			}
			p := filepath.Join(root, im.Filepath, im.Filename)
			if im.Filepath != "" {
				if _, err := os.Stat(p); err != nil {
					if alt := filepath.Join(root, im.Filename); fileExists(alt) {
						p = alt
					}
				}
			}
			if err := insideRoot(p, root, realRoot); err != nil {
				return nil, fmt.Errorf("%s: images[%d] (filepath %q, filename %q): %w", jsonPath, i, im.Filepath, im.Filename, err)
			}
			spec.Items = append(spec.Items, Item{Path: p, ID: idList[j]})
			c := data.DefaultCapsPerImage
			spec.Captions = append(spec.Captions, caps[j*c:(j+1)*c])
		}
		out = append(out, spec)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no image is in split train, val or test", jsonPath)
	}
	return out, nil
}

// insideRoot checks that the photo p, a path under root, stays inside
// root once every symbolic link is followed; realRoot is root made
// absolute with its links followed. A photo that does not exist is checked
// by its deepest existing folder (its extraction then reports it missing).
func insideRoot(p, root, realRoot string) error {
	abs, err := filepath.Abs(p)
	if err != nil {
		return fmt.Errorf("the photo %s: %w", p, err)
	}
	resolved, err := resolveExisting(abs)
	if err != nil {
		return fmt.Errorf("the photo %s: %w", p, unwrapPath(err))
	}
	if !within(resolved, realRoot) {
		return fmt.Errorf("the photo %s is %s once symbolic links are followed, outside the image root %s: refused (photos are read from the image root only)", p, resolved, root)
	}
	return nil
}

// resolveExisting follows the symbolic links of the absolute path p, as
// filepath.EvalSymlinks does; where p does not exist, those of its deepest
// existing ancestor, the rest of p joined to it.
func resolveExisting(p string) (string, error) {
	dir, rest := p, ""
	for {
		r, err := filepath.EvalSymlinks(dir)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return filepath.Clean(p), nil
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// within reports whether path p is dir or below it (both clean).
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// warnSplitOverlaps logs, with slog.Warn, the photos that k lists in two
// splits (by filepath and filename; COCO's restval counts as train, into
// which it is extracted), and the restval images of a file that is not
// COCO's, which no split takes. Both are extracted as listed: a photo in
// train and test is in both, and evaluating on test then measures photos
// the model was trained on.
func warnSplitOverlaps(jsonPath string, k *data.Karpathy) {
	coco := k.IsCOCO()
	type seen struct {
		split string
		index int
	}
	first := map[string]seen{}
	overlaps := map[string][]string{} // "train and test" -> examples
	count := map[string]int{}
	restval := 0
	for i := range k.Images {
		im := &k.Images[i]
		split := im.Split
		if split == "restval" {
			if !coco {
				restval++
				continue
			}
			split = "train"
		}
		key := path.Clean(path.Join(filepath.ToSlash(im.Filepath), filepath.ToSlash(im.Filename)))
		prev, ok := first[key]
		if !ok {
			first[key] = seen{split, i}
			continue
		}
		pair := prev.split + " and " + split
		if prev.split == split {
			pair = split + " twice"
		}
		count[pair]++
		if len(overlaps[pair]) < 3 {
			overlaps[pair] = append(overlaps[pair], fmt.Sprintf("%s (images[%d] and [%d])", key, prev.index, i))
		}
	}
	pairs := make([]string, 0, len(count))
	for p := range count {
		pairs = append(pairs, p)
	}
	slices.Sort(pairs)
	for _, p := range pairs {
		slog.Warn("extract: the Karpathy file lists photos in two splits; each is extracted into both (a model evaluated on a split it was trained on scores too high)",
			"file", jsonPath, "splits", p, "photos", count[p], "e.g.", strings.Join(overlaps[p], ", "))
	}
	if restval > 0 {
		slog.Warn("extract: images of split restval in a file that is not COCO's are left out: only COCO's restval (the rest of val2014) is trained on, as part of train",
			"file", jsonPath, "dataset", k.Dataset, "images", restval)
	}
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

package extract

import (
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/internal/half"
	"github.com/xmr-project/xmr/internal/infile"
	"github.com/xmr-project/xmr/lockfile"
	"github.com/xmr-project/xmr/npy"
	"github.com/xmr-project/xmr/progress"
)

// Item is one image of a collection.
type Item struct {
	// Path is the image file.
	Path string
	// ID names the image in the data set (its file name without the
	// extension, a COCO id, ...).
	ID string
	// Mirror extracts the image mirrored left to right (MirrorSplit).
	Mirror bool
	// Augment, when not 0, extracts a random view of the image drawn from
	// it (AugmentSplit, Picture.Augment).
	Augment uint64
}

// MirrorSuffix ends the id of a mirrored copy (MirrorSplit).
const MirrorSuffix = "~mirror"

// MirrorSplit returns s with a mirrored copy of every image after the
// originals, as more training data: the copy's id is the original's with
// MirrorSuffix, its captions the original's with "left" and "right"
// swapped (the mirror turns one into the other). Horizontal flips are the
// augmentation image-text models train with when they see the pixels;
// with features extracted once, the flipped images are extracted too.
func MirrorSplit(s SplitSpec) SplitSpec {
	out := SplitSpec{Name: s.Name, Items: slices.Clone(s.Items)}
	for _, it := range s.Items {
		out.Items = append(out.Items, Item{Path: it.Path, ID: it.ID + MirrorSuffix, Mirror: !it.Mirror})
	}
	if s.Captions != nil {
		out.Captions = slices.Clone(s.Captions)
		for _, caps := range s.Captions {
			m := make([]string, len(caps))
			for k, c := range caps {
				m[k] = swapLeftRight(c)
			}
			out.Captions = append(out.Captions, m)
		}
	}
	return out
}

// sideSwap maps each word that names a side of the picture to the word of
// the other side.
var sideSwap = map[string]string{
	"left": "right", "right": "left",
	"leftmost": "rightmost", "rightmost": "leftmost",
	"leftward": "rightward", "rightward": "leftward",
	"leftwards": "rightwards", "rightwards": "leftwards",
}

// Hyphenated compounds that name a side: "left" or "right" before one of
// sideHeads (left-hand, right-facing) or after one of sideModifiers
// (top-left, lower-right). Other compounds do not (right-angled,
// right-wing, far-left, right-of-way).
var (
	sideHeads     = []string{"hand", "handed", "side", "sided", "facing", "most", "ward", "wards"}
	sideModifiers = []string{"top", "bottom", "upper", "lower", "front", "back", "rear", "centre", "center", "middle", "mid"}
)

// rightDirectly are the words before which "right" means "directly", not a
// side: "right next to", "right behind", "right there".
var rightDirectly = []string{"next", "behind", "beside", "above", "below", "under", "underneath", "beneath",
	"against", "alongside", "near", "between", "outside", "inside", "there", "here", "now", "away"}

// leftLeave are the words before which "left" is the past of "to leave":
// "left behind", "left alone".
var leftLeave = []string{"behind", "alone", "unattended", "untouched", "over"}

// swapLeftRight returns caption c as it describes the picture mirrored
// left to right: every word that names a side becomes the other side's,
// in the same case (left/right, leftmost/rightmost, leftward(s)/
// rightward(s), and the side in left-hand, right-handed, right-side,
// left-facing, top-left, lower-right, ...). A word that does not name a
// side stays: compounds such as right-angled, right-wing, far-left and
// right-of-way; "right" meaning directly or correct (right next to, right
// behind, right in front of, right on top, right in the middle, right
// here, right now, all right, right side up, right angle); "left" meaning
// gone away from (left behind, left alone, left unattended, left over).
// Words are runs of letters, with hyphens between letters; leftover and
// rightly are words of their own and stay.
func swapLeftRight(c string) string {
	pieces := splitWords(c)
	// next returns the lower-cased word k words after piece i, where only
	// white space lies between; "" when there is none.
	next := func(i, k int) string {
		for j := i + 1; j < len(pieces); j++ {
			if !pieces[j].word {
				if strings.TrimSpace(pieces[j].text) != "" {
					return ""
				}
				continue
			}
			if k--; k == 0 {
				return strings.ToLower(pieces[j].text)
			}
		}
		return ""
	}
	prev := func(i int) string {
		for j := i - 1; j >= 0; j-- {
			if !pieces[j].word {
				if strings.TrimSpace(pieces[j].text) != "" {
					return ""
				}
				continue
			}
			return strings.ToLower(pieces[j].text)
		}
		return ""
	}
	var b strings.Builder
	for i, p := range pieces {
		if !p.word {
			b.WriteString(p.text)
			continue
		}
		parts := strings.Split(p.text, "-")
		low := strings.Split(strings.ToLower(p.text), "-")
		switch n := len(parts); {
		case n == 1 && namesSide(low[0], prev(i), next(i, 1), next(i, 2), next(i, 3)):
			parts[0] = matchCase(sideSwap[low[0]], parts[0])
		case n == 2 && (low[0] == "left" || low[0] == "right") && slices.Contains(sideHeads, low[1]):
			// right-hand, left-facing; but not right-side-up, nor
			// right-side up.
			if !(low[1] == "side" && next(i, 1) == "up") {
				parts[0] = matchCase(sideSwap[low[0]], parts[0])
			}
		case n == 2 && (low[1] == "left" || low[1] == "right") && slices.Contains(sideModifiers, low[0]):
			parts[1] = matchCase(sideSwap[low[1]], parts[1])
		}
		b.WriteString(strings.Join(parts, "-"))
	}
	return b.String()
}

// namesSide reports whether the single word w (lower case), between the
// words before and after1, after2, after3, names a side (see
// swapLeftRight).
func namesSide(w, before, after1, after2, after3 string) bool {
	if _, ok := sideSwap[w]; !ok {
		return false
	}
	switch w {
	case "right":
		switch {
		case slices.Contains(rightDirectly, after1),
			before == "all",
			after1 == "side" && after2 == "up",
			after1 == "angle" || after1 == "angles" || after1 == "angled",
			after1 == "in" && after2 == "front",
			after1 == "on" && after2 == "top",
			after1 == "in" && after2 == "the" && (after3 == "middle" || after3 == "center" || after3 == "centre"):
			return false
		}
	case "left":
		if slices.Contains(leftLeave, after1) {
			return false
		}
	}
	return true
}

// wordPiece is a piece of a caption: a word (letters, with hyphens between
// letters) or the text between two words.
type wordPiece struct {
	text string
	word bool
}

// splitWords cuts c into words and the text between them.
func splitWords(c string) []wordPiece {
	var out []wordPiece
	start, inWord := 0, false
	for i := 0; i < len(c); {
		r, n := utf8.DecodeRuneInString(c[i:])
		letter := unicode.IsLetter(r)
		if r == '-' && inWord {
			// A hyphen between two letters joins a compound.
			after, _ := utf8.DecodeRuneInString(c[i+n:])
			letter = unicode.IsLetter(after)
		}
		if letter != inWord {
			if i > start {
				out = append(out, wordPiece{c[start:i], inWord})
			}
			start, inWord = i, letter
		}
		i += n
	}
	if len(c) > start {
		out = append(out, wordPiece{c[start:], inWord})
	}
	return out
}

// matchCase writes w in the case of like: all capitals, a capital first,
// or lower case.
func matchCase(w, like string) string {
	switch {
	case like == strings.ToUpper(like):
		return strings.ToUpper(w)
	case unicode.IsUpper([]rune(like)[0]):
		return strings.ToUpper(w[:1]) + w[1:]
	}
	return w
}

// SplitSpec is one split of a collection to extract: its images and, for
// a data set to train or evaluate on, their captions.
type SplitSpec struct {
	// Name is the split's name (train, dev, test, ...).
	Name  string
	Items []Item
	// Captions holds data.DefaultCapsPerImage captions per item; nil for
	// an index-only collection (images without captions).
	Captions [][]string
}

// BuildOptions tune Build. The zero value gives the defaults.
type BuildOptions struct {
	// Shard and Shards select part Shard (0-based) of Shards: the chunks c
	// with c % Shards == Shard. Shards 0 means 1.
	Shard, Shards int
	// ChunkSize is the number of images per part file (0: 64).
	ChunkSize int
	// Workers is the number of images extracted at once (0: 2).
	Workers int
	// Limits bound each image file.
	Limits Limits
	// JoinOnly extracts nothing: every part must be there already.
	JoinOnly bool
	// Progress shows a progress bar per split.
	Progress bool
}

func (o BuildOptions) shards() int  { return max(o.Shards, 1) }
func (o BuildOptions) chunk() int   { return cmpOr(o.ChunkSize, 64) }
func (o BuildOptions) workers() int { return cmpOr(o.Workers, 2) }

func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// Skip is an image that could not be read.
type Skip struct {
	Split, Path, Err string
}

// Report says what Build did.
type Report struct {
	// Extracted counts the images extracted in this run; Reused those
	// whose parts an earlier run (or another shard) had written.
	Extracted, Reused int
	// Skipped lists every image of the collection that could not be read,
	// in this run or an earlier one.
	Skipped []Skip
	// Joined is true when the data set was written; false for a shard
	// whose collection still lacks other shards' parts.
	Joined bool
	// Missing counts the chunks that are still to be extracted when not
	// Joined.
	Missing int
	// Images counts the images written per split.
	Images map[string]int
}

// PartsDir is the directory, inside a data set being extracted, that holds
// the part files until they are joined.
const PartsDir = "parts"

// partFormat identifies the part files. Parts written before taps were
// (part.Taps, partImage.Tap) have the same format: they decode with no
// taps.
const partFormat = "xmr-extract-part/1"

// part is the content of one part file: the features of ChunkSize
// consecutive images of a split.
type part struct {
	Format   string
	Identity string // Identity.Marshal
	MaxBoxes int
	Split    string
	Chunk    int
	IDs      []string // the chunk's item ids, in order
	Images   []partImage
	// Taps names the cut whose activations the images carry (Extractor.Taps);
	// "" for none.
	Taps string
}

// partImage is one image of a part: its features, or Err when it was
// skipped.
type partImage struct {
	Err     string
	Regions []float32
	Boxes   [][4]float32
	Global  []float32
	Width   int
	Height  int
	// TapShape (H, W, C) and Tap, float16 bits (half.FromFloat32), are the
	// activation at the part's cut (Features.Tap); empty without taps.
	TapShape [3]int
	Tap      []uint16
}

func partPath(out, split string, chunk int) string {
	return filepath.Join(out, PartsDir, fmt.Sprintf("%s-%06d.part", split, chunk))
}

// TapsPath returns the file in which Build, with an extractor that taps
// cut (Options.Taps), caches the detector's activation at that cut for
// every image of split: dataDir/taps-CUT/SPLIT.npy, float16 of shape (N,
// H, W, C), N the split's images in the order of its SPLIT_ids.txt
// (the skipped ones left out), e.g. (N, 16, 16, 120) for cut "s32". A
// model that fine-tunes the detector's upper part from that cut reads it.
func TapsPath(dataDir, cut, split string) string {
	return filepath.Join(TapsDir(dataDir, cut), split+".npy")
}

// TapsDir is the directory of the activations at cut in the data set
// directory dataDir (TapsPath's files).
func TapsDir(dataDir, cut string) string { return filepath.Join(dataDir, "taps-"+cut) }

// Build extracts the images of splits with e into the data set directory
// out, in the precomp layout that package data reads (with boxes, sizes,
// region counts and ids), and a global-feature copy in out/global for the
// models that read one vector per image (SEAM, VSE++); FileName records the
// extractor in both. An index-only split (no captions) is written without
// a caption file: LoadImages reads it.
//
// The images go through in chunks of ChunkSize; each chunk's features are
// written to a part file under out/parts, atomically, when the whole chunk
// is done. A run stopped by ctx (Ctrl-C) or killed loses at most the chunks
// in flight: running Build again reuses every part written. With Shards >
// 1 only this shard's chunks are extracted; once every chunk's part is in
// out/parts (the parts of all shards copied together), the next Build
// (for example with JoinOnly) joins them into the data set and removes
// out/parts.
//
// With an extractor that taps a cut (Options.Taps), each part also holds
// its images' activations at the cut, in float16, and the join writes
// them, a split at a time streamed from the parts, to TapsPath(out, cut,
// split); FileName's Record.Taps names the cut. A part written without
// those taps (an earlier run without Options.Taps, or with another cut) is
// extracted again, as a stale one is. Every split that Build writes loses
// the taps files of other cuts (and, without Options.Taps, all of them),
// so that a taps file always matches its split's images.
//
// Build holds out's lock (package lockfile) while it runs: a second Build
// on the same directory is refused, naming the first one's process.
//
// An image that cannot be read (not a JPEG or PNG, truncated, over the
// limits) is logged, recorded in its part and left out of the data set
// with its captions; Report.Skipped names them all. Errors of the
// detector itself stop the run.
func Build(ctx context.Context, e *Extractor, out string, splits []SplitSpec, o BuildOptions) (*Report, error) {
	if o.Shards < 0 || o.Shard < 0 || o.Shard >= o.shards() {
		return nil, fmt.Errorf("extract: shard %d of %d", o.Shard, o.Shards)
	}
	if err := CheckSplits(splits); err != nil {
		return nil, err
	}
	// One writer per output: a second run on it (other images, or the
	// same) is refused with the first one's pid; two interleaved runs
	// wrote each other's features under their own ids.
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("extract: %w", err)
	}
	lock, err := lockfile.Acquire(out, "extract output")
	if err != nil {
		return nil, fmt.Errorf("extract: %w", err)
	}
	defer lock.Release()
	removeStaleTemps(out)
	if err := checkOut(out, e.Identity()); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(out, PartsDir), 0o755); err != nil {
		return nil, fmt.Errorf("extract: %w", err)
	}
	rep := &Report{Images: map[string]int{}}
	ident := e.Identity().Marshal()
	// First pass: which chunks have valid parts already.
	type todo struct {
		split *SplitSpec
		chunk int
	}
	var work []todo
	for si := range splits {
		s := &splits[si]
		for c := 0; c*o.chunk() < len(s.Items); c++ {
			ok, err := partValid(partPath(out, s.Name, c), ident, e.MaxBoxes(), e.Taps(), s.Name, c, chunkIDs(s, c, o.chunk()))
			if err != nil {
				return nil, err
			}
			switch {
			case ok:
				rep.Reused += len(chunkIDs(s, c, o.chunk()))
			case c%o.shards() == o.Shard && !o.JoinOnly:
				work = append(work, todo{s, c})
			default:
				rep.Missing++
			}
		}
	}
	if o.JoinOnly && rep.Missing > 0 {
		return rep, fmt.Errorf("extract: --join: %d chunks of %d images have no part in %s yet: copy the other shards' part files there, or run without --join to extract them",
			rep.Missing, o.chunk(), filepath.Join(out, PartsDir))
	}
	total := 0
	for _, w := range work {
		total += len(chunkIDs(w.split, w.chunk, o.chunk()))
	}
	var bar *progress.Bar
	if o.Progress && total > 0 {
		bar = progress.New("extract", int64(total), "images")
	}
	for _, w := range work {
		if err := ctx.Err(); err != nil {
			bar.Finish()
			return rep, fmt.Errorf("extract: %w", err)
		}
		n, err := extractChunk(ctx, e, out, w.split, w.chunk, o, bar)
		if err != nil {
			bar.Finish()
			return rep, err
		}
		rep.Extracted += n
	}
	bar.Finish()
	if rep.Missing > 0 {
		// Other shards' chunks are still to come; list this shard's skips.
		for _, s := range splits {
			sk, err := skipsOf(out, &s, o.chunk())
			if err != nil {
				return rep, err
			}
			rep.Skipped = append(rep.Skipped, sk...)
		}
		return rep, nil
	}
	if err := join(ctx, e, out, splits, o, rep); err != nil {
		return rep, err
	}
	rep.Joined = true
	return rep, nil
}

// CheckSplits checks, before any photo is read, what Build would write
// and the later steps refuse: split names (a file name: letters, digits,
// '.', '-' and '_', not starting with '.'; not "TRAIN" for train), image
// ids (data.CheckImageID: not empty, no line break, no white space around;
// unique in their split, a mirrored copy's included), a photo path for
// each image, and data.DefaultCapsPerImage captions per image, none blank
// (data.CheckCaption). Errors name the split, the image's id and file, and
// the caption.
func CheckSplits(splits []SplitSpec) error {
	names := map[string]bool{}
	for _, s := range splits {
		if err := CheckSplitName(s.Name); err != nil {
			return fmt.Errorf("extract: split name %q %w", s.Name, err)
		}
		if names[s.Name] {
			return fmt.Errorf("extract: split %s is listed twice", s.Name)
		}
		names[s.Name] = true
		if s.Captions != nil && len(s.Captions) != len(s.Items) {
			return fmt.Errorf("extract: split %s has %d images and captions for %d", s.Name, len(s.Items), len(s.Captions))
		}
		seen := make(map[string]int, len(s.Items))
		for i, it := range s.Items {
			what := func() string { return describeItem(it) }
			if it.Path == "" {
				return fmt.Errorf("extract: split %s: %s has no file", s.Name, what())
			}
			if err := data.CheckImageID(it.ID); err != nil {
				return fmt.Errorf("extract: split %s: %s: its id %w", s.Name, what(), err)
			}
			if j, dup := seen[it.ID]; dup {
				return fmt.Errorf("extract: split %s: %s and %s have the same id: %s", s.Name, describeItem(s.Items[j]), what(), renameAdvice(s.Items[j], it))
			}
			seen[it.ID] = i
			if s.Captions == nil {
				continue
			}
			if n := len(s.Captions[i]); n != data.DefaultCapsPerImage {
				return fmt.Errorf("extract: split %s: %s has %d captions, want %d", s.Name, what(), n, data.DefaultCapsPerImage)
			}
			for k, c := range s.Captions[i] {
				if err := data.CheckCaption(c); err != nil {
					return fmt.Errorf("extract: split %s: %s: caption %d (%q) %w", s.Name, what(), k+1, c, err)
				}
			}
		}
	}
	return nil
}

// CheckSplitName says what is wrong with name as the name of a split that
// Build writes, or returns nil: it names the data set's files
// ({split}_ims.npy, ...) and is what --split selects, so it is letters,
// digits, '.', '-' and '_', not starting with '.', and not a standard
// split's name in other capitals ("TRAIN": xmr train reads "train"). The
// error reads after the name: "split name %q " + err.
func CheckSplitName(name string) error {
	if name == "" {
		return errors.New("is empty")
	}
	if name[0] == '.' {
		return errors.New("starts with '.': want letters, digits, '.', '-' or '_'")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return fmt.Errorf("holds %q: want letters, digits, '.', '-' or '_' (it names the data set's files)", r)
		}
	}
	for _, std := range []string{data.SplitTrain, data.SplitDev, data.SplitTest, data.SplitTestAll} {
		if name != std && strings.EqualFold(name, std) {
			return fmt.Errorf("differs from %q in case only: split names are case-sensitive, and xmr train, eval and index look for %s", std, std)
		}
	}
	return nil
}

// describeItem names an image in errors: its id and its file, and
// whether it is a mirrored copy.
func describeItem(it Item) string {
	if it.Mirror {
		return fmt.Sprintf("image %q (the mirrored copy of %q, made by --flip)", it.ID, it.Path)
	}
	if it.Augment != 0 {
		return fmt.Sprintf("image %q (an augmented copy of %q, made by --augment)", it.ID, it.Path)
	}
	return fmt.Sprintf("image %q (file %q)", it.ID, it.Path)
}

// renameAdvice says how to part two images of the same id.
func renameAdvice(a, b Item) string {
	for _, it := range []Item{a, b} {
		if !it.Mirror {
			continue
		}
		other := a
		if it == a {
			other = b
		}
		return fmt.Sprintf("the ids of mirrored copies end in %s; rename %s, or extract without --flip", MirrorSuffix, other.Path)
	}
	return "rename one of the files"
}

// outputPatterns are the names of the files an extract writes in its
// output, its global/ folder and its parts folder.
var outputPatterns = []string{"*_ims.npy", "*_boxes.npy", "*_ids.txt", "*_nregions.npy", "*_sizes.npy", "*_caps.txt", FileName, "*.part"}

// removeStaleTemps removes the temporary files that a killed run left
// beside the files it writes (a kill during the join left a
// .test_ims.npy.tmp-* of the features' size): with the output locked, no
// writer of them is alive. Other files are left alone.
func removeStaleTemps(out string) {
	for _, dir := range []string{out, filepath.Join(out, "global"), filepath.Join(out, PartsDir)} {
		for _, pat := range outputPatterns {
			atomicfile.RemoveTemporaries(filepath.Join(dir, pat))
		}
	}
	atomicfile.RemoveTemporaries(TapsPath(out, "*", "*"))
}

// checkOut refuses an output directory that holds features of another
// extractor, or precomp features of unknown provenance.
func checkOut(out string, id Identity) error {
	have, err := ReadIdentity(out)
	if err != nil {
		return err
	}
	if have != nil {
		if !have.Equal(id) {
			return fmt.Errorf("extract: %s holds features of %s, not of %s: choose another --out, or remove it first", out, have, id)
		}
		return nil
	}
	ims, _ := filepath.Glob(filepath.Join(out, "*_ims.npy"))
	if len(ims) > 0 && joinCutShort(out, id) {
		slog.Info("extract: a join was cut short; joining again", "out", out)
		return nil
	}
	if len(ims) > 0 {
		return fmt.Errorf("extract: %s holds features that no %s describes (%s): choose another --out", out, FileName, filepath.Base(ims[0]))
	}
	return nil
}

// joinCutShort reports whether out holds the parts of extractor id beside
// its data files: a join killed before it wrote FileName (which it writes
// last, before it removes the parts). Joining again rewrites every file.
func joinCutShort(out string, id Identity) bool {
	parts, _ := filepath.Glob(filepath.Join(out, PartsDir, "*.part"))
	if len(parts) == 0 {
		return false
	}
	p, err := readPart(parts[0])
	return err == nil && p != nil && p.Identity == id.Marshal()
}

// chunkIDs returns the ids of chunk c of s.
func chunkIDs(s *SplitSpec, c, size int) []string {
	lo, hi := c*size, min((c+1)*size, len(s.Items))
	ids := make([]string, 0, hi-lo)
	for _, it := range s.Items[lo:hi] {
		ids = append(ids, it.ID)
	}
	return ids
}

// readPart reads a part file; a missing one is (nil, nil).
func readPart(path string) (*part, error) {
	f, err := infile.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read part %s: %w", path, unwrapPath(err))
	}
	defer f.Close()
	var p part
	if err := gob.NewDecoder(f).Decode(&p); err != nil {
		return nil, fmt.Errorf("read part %s: %w (remove the file to extract its images again)", path, err)
	}
	if p.Format != partFormat {
		return nil, fmt.Errorf("read part %s: format %q, want %q (remove the file to extract its images again)", path, p.Format, partFormat)
	}
	return &p, nil
}

// partValid reports whether path holds the part of chunk c of split with
// these ids, made by the extractor ident, with the taps of cut taps ("":
// none wanted; a part with taps is then as good). A part of another
// extractor is an error; one of other images (the collection changed), or
// without the taps wanted, is stale and is extracted again.
func partValid(path, ident string, maxBoxes int, taps string, split string, c int, ids []string) (bool, error) {
	p, err := readPart(path)
	if p == nil || err != nil {
		return false, err
	}
	if p.Identity != ident || p.MaxBoxes != maxBoxes {
		return false, fmt.Errorf("extract: part %s was made by another extractor or with another number of boxes (%s, %d boxes): remove %s to start again",
			path, p.Identity, p.MaxBoxes, filepath.Dir(path))
	}
	if p.Split != split || p.Chunk != c || !slices.Equal(p.IDs, ids) || len(p.Images) != len(ids) {
		slog.Warn("extract: a part holds other images than the collection now lists (the folder changed); extracting them again", "part", path)
		return false, nil
	}
	if taps != "" && p.Taps != taps {
		slog.Warn("extract: a part holds no taps at the cut wanted (a run without them, or of another cut, wrote it); extracting its images again",
			"part", path, "cut", taps, "part_taps", p.Taps)
		return false, nil
	}
	D := 0
	if id, err := ParseIdentity(p.Identity); err == nil {
		D = id.Width
	}
	for i, im := range p.Images {
		if im.Err != "" {
			continue
		}
		if len(im.Regions) != len(im.Boxes)*D || len(im.Boxes) > maxBoxes || len(im.Global) != D || im.Width <= 0 || im.Height <= 0 ||
			taps != "" && !tapShapeOK(im) {
			return false, fmt.Errorf("extract: part %s image %d (%s) is inconsistent: remove the file to extract its images again", path, i, ids[i])
		}
	}
	return true, nil
}

// tapShapeOK reports whether im's tap has a shape and the values it holds.
func tapShapeOK(im partImage) bool {
	h, w, c := im.TapShape[0], im.TapShape[1], im.TapShape[2]
	return h > 0 && w > 0 && c > 0 && len(im.Tap) == h*w*c
}

// extractChunk extracts chunk c of s with o.Workers goroutines and writes
// its part; it returns the number of images done.
func extractChunk(ctx context.Context, e *Extractor, out string, s *SplitSpec, c int, o BuildOptions, bar *progress.Bar) (int, error) {
	size := o.chunk()
	lo, hi := c*size, min((c+1)*size, len(s.Items))
	feats, skipped, err := extractEach(ctx, e, s.Items[lo:hi], o.workers(), o.Limits, bar)
	if err != nil {
		return 0, err
	}
	imgs := make([]partImage, hi-lo)
	for i, f := range feats {
		if f == nil {
			imgs[i] = partImage{Err: skipped[i]}
			continue
		}
		imgs[i] = partImage{Regions: f.Regions, Boxes: f.Boxes, Global: f.Global, Width: f.Width, Height: f.Height}
		if e.Taps() != "" {
			if f.Tap == nil {
				return 0, fmt.Errorf("extract %s: the extractor returned no tap at cut %s", s.Items[lo+i].Path, e.Taps())
			}
			imgs[i].TapShape = [3]int{f.Tap.H, f.Tap.W, f.Tap.C}
			imgs[i].Tap = make([]uint16, len(f.Tap.Data))
			for k, v := range f.Tap.Data {
				imgs[i].Tap[k] = half.FromFloat32(v)
			}
		}
	}
	p := &part{Format: partFormat, Identity: e.Identity().Marshal(), MaxBoxes: e.MaxBoxes(), Split: s.Name, Chunk: c, IDs: chunkIDs(s, c, size), Images: imgs, Taps: e.Taps()}
	path := partPath(out, s.Name, c)
	if err := atomicfile.Write(path, func(w io.Writer) error { return gob.NewEncoder(w).Encode(p) }); err != nil {
		return 0, fmt.Errorf("extract: %w", err)
	}
	return hi - lo, nil
}

// skipsOf lists the skipped images of the parts of s that exist.
func skipsOf(out string, s *SplitSpec, size int) ([]Skip, error) {
	var sk []Skip
	for c := 0; c*size < len(s.Items); c++ {
		p, err := readPart(partPath(out, s.Name, c))
		if err != nil {
			return nil, err
		}
		if p == nil {
			continue
		}
		for i, im := range p.Images {
			if im.Err != "" {
				sk = append(sk, Skip{Split: s.Name, Path: s.Items[c*size+i].Path, Err: im.Err})
			}
		}
	}
	return sk, nil
}

// join assembles every split from its parts, writes the data set and
// removes the parts.
func join(ctx context.Context, e *Extractor, out string, splits []SplitSpec, o BuildOptions, rep *Report) error {
	rec := &Record{Extractor: e.Identity(), Kind: KindRegions, MaxBoxes: e.MaxBoxes(), MinScore: e.opt.minScore(),
		Fill: "whole image, 2x2 grid, 3x3 grid", Splits: map[string]SplitRecord{}, Taps: e.Taps()}
	if e.opt.NoFill {
		rec.Fill = "none"
	}
	grec := &Record{Extractor: e.Identity(), Kind: KindGlobal, Splits: map[string]SplitRecord{}}
	gdir := filepath.Join(out, "global")
	if err := os.MkdirAll(gdir, 0o755); err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	for si := range splits {
		s := &splits[si]
		reg, glob, skips, err := assemble(out, s, e, o.chunk())
		if err != nil {
			return err
		}
		rep.Skipped = append(rep.Skipped, skips...)
		rep.Images[s.Name] = reg.NumImages()
		if s.Captions != nil {
			if err := data.WritePrecomp(ctx, out, reg); err != nil {
				return err
			}
			if err := data.WritePrecomp(ctx, gdir, glob); err != nil {
				return err
			}
		} else {
			if err := writeImages(ctx, out, reg); err != nil {
				return err
			}
			if err := writeImages(ctx, gdir, glob); err != nil {
				return err
			}
		}
		sr := SplitRecord{Images: reg.NumImages(), Captions: s.Captions != nil, Skipped: len(skips)}
		rec.Splits[s.Name] = sr
		grec.Splits[s.Name] = sr
	}
	// The taps, after the features: a split at a time, streamed from the
	// parts read again (a split's taps are too large to hold: 61 KB an
	// image at cut s32).
	for si := range splits {
		s := &splits[si]
		if err := writeTaps(ctx, out, s, e.Taps(), rep.Images[s.Name], o.chunk()); err != nil {
			return err
		}
	}
	// Splits written by an earlier run with other splits stay listed.
	if old, err := ReadRecord(out); err == nil && old != nil {
		for k, v := range old.Splits {
			if _, ok := rec.Splits[k]; !ok {
				rec.Splits[k] = v
				grec.Splits[k] = v
			}
		}
	}
	if err := WriteRecord(gdir, grec); err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	if err := WriteRecord(out, rec); err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	for _, s := range splits {
		for c := 0; c*o.chunk() < len(s.Items); c++ {
			if err := os.Remove(partPath(out, s.Name, c)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("extract: %w", err)
			}
		}
	}
	// Temporary files of parts whose writing a kill cut short.
	if tmps, _ := filepath.Glob(filepath.Join(out, PartsDir, ".*.part.tmp-*")); len(tmps) > 0 {
		for _, p := range tmps {
			os.Remove(p)
		}
	}
	os.Remove(filepath.Join(out, PartsDir)) // only when empty
	return nil
}

// writeTaps writes the activations at cut of the kept images of s, n of
// them, from its parts to TapsPath(out, cut, s.Name), and removes the
// taps files of s at other cuts (all of them when cut is ""): they were
// made of an earlier run's images of s.
func writeTaps(ctx context.Context, out string, s *SplitSpec, cut string, n, size int) error {
	stale, _ := filepath.Glob(TapsPath(out, "*", s.Name))
	for _, p := range stale {
		if cut != "" && p == TapsPath(out, cut, s.Name) {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("extract: remove the taps of an earlier run: %w", err)
		}
		slog.Info("extract: removed the taps of an earlier run of the split", "file", p)
		os.Remove(filepath.Dir(p)) // only when empty
	}
	if cut == "" {
		return nil
	}
	path := TapsPath(out, cut, s.Name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	var w *npy.Writer
	defer func() {
		if w != nil {
			w.Abort()
		}
	}()
	var shape [3]int
	for c := 0; c*size < len(s.Items); c++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("extract: %w", err)
		}
		pp := partPath(out, s.Name, c)
		p, err := readPart(pp)
		if err != nil {
			return err
		}
		if p == nil {
			return fmt.Errorf("extract: part %s is missing", pp)
		}
		if p.Taps != cut {
			return fmt.Errorf("extract: part %s holds no taps at cut %s: remove it to extract its images again", pp, cut)
		}
		for i, im := range p.Images {
			if im.Err != "" {
				continue
			}
			switch {
			case !tapShapeOK(im):
				return fmt.Errorf("extract: part %s image %d (%s): its tap is %dx%dx%d with %d values: remove the part to extract its images again",
					pp, i, s.Items[c*size+i].ID, im.TapShape[0], im.TapShape[1], im.TapShape[2], len(im.Tap))
			case w != nil && im.TapShape != shape:
				return fmt.Errorf("extract: part %s image %d (%s): its tap is %dx%dx%d, the split's first image's %dx%dx%d: remove the part to extract its images again",
					pp, i, s.Items[c*size+i].ID, im.TapShape[0], im.TapShape[1], im.TapShape[2], shape[0], shape[1], shape[2])
			}
			if w == nil {
				shape = im.TapShape
				if w, err = npy.Create(path, npy.Float16, []int{n, shape[0], shape[1], shape[2]}); err != nil {
					return fmt.Errorf("extract: %w", err)
				}
			}
			if err := w.WriteFloat16Bits(im.Tap); err != nil {
				return fmt.Errorf("extract: %w", err)
			}
		}
	}
	if w == nil {
		// No image kept: no taps, and none of an earlier run.
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("extract: remove the taps of an earlier run: %w", err)
		}
		return nil
	}
	err := w.Close()
	w = nil
	if err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	return nil
}

// assemble reads the parts of s into a region split and a global one,
// leaving out the skipped images and their captions.
func assemble(out string, s *SplitSpec, e *Extractor, size int) (reg, glob *data.Split, skips []Skip, err error) {
	R, D := e.MaxBoxes(), e.Width()
	k := data.DefaultCapsPerImage
	var keep []partImage
	var ids []string
	var caps []string
	for c := 0; c*size < len(s.Items); c++ {
		p, err := readPart(partPath(out, s.Name, c))
		if err != nil {
			return nil, nil, nil, err
		}
		if p == nil {
			return nil, nil, nil, fmt.Errorf("extract: part %s is missing", partPath(out, s.Name, c))
		}
		for i, im := range p.Images {
			j := c*size + i
			if im.Err != "" {
				skips = append(skips, Skip{Split: s.Name, Path: s.Items[j].Path, Err: im.Err})
				continue
			}
			im.Tap = nil // writeTaps reads the parts again: a split's taps are not held
			keep = append(keep, im)
			ids = append(ids, s.Items[j].ID)
			if s.Captions != nil {
				if len(s.Captions[j]) != k {
					return nil, nil, nil, fmt.Errorf("extract: image %s has %d captions, want %d", s.Items[j].ID, len(s.Captions[j]), k)
				}
				caps = append(caps, s.Captions[j]...)
			}
		}
	}
	n := len(keep)
	g := &data.Regions{N: n, R: R, D: D, Feat: make([]float32, n*R*D), Boxes: make([]float32, n*R*4), Count: make([]int, n)}
	gl := &data.Regions{N: n, R: 1, D: D, Feat: make([]float32, n*D), Count: make([]int, n)}
	sizes := make([][2]float32, n)
	for i, im := range keep {
		copy(g.Feat[i*R*D:], im.Regions)
		copy(gl.Feat[i*D:], im.Global)
		g.Count[i] = len(im.Boxes)
		gl.Count[i] = 1
		w, h := float32(im.Width), float32(im.Height)
		sizes[i] = [2]float32{w, h}
		for r, b := range im.Boxes {
			o := (i*R + r) * 4
			g.Boxes[o], g.Boxes[o+1], g.Boxes[o+2], g.Boxes[o+3] = b[0]/w, b[1]/h, b[2]/w, b[3]/h
		}
	}
	reg = &data.Split{Name: s.Name, Images: g, Captions: caps, CapsPerImage: k, ImageIDs: ids, Sizes: sizes}
	glob = &data.Split{Name: s.Name, Images: gl, Global: true, Captions: caps, CapsPerImage: k, ImageIDs: ids, Sizes: sizes}
	return reg, glob, skips, nil
}

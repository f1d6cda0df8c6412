package data

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/xmr-project/xmr/internal/infile"
)

// Karpathy is a Karpathy split file (dataset_coco.json,
// dataset_flickr30k.json, dataset_flickr8k.json): every image of a dataset
// with its split and its sentences.
type Karpathy struct {
	// Dataset is the file's "dataset" field: "coco", "flickr30k", ...
	Dataset string
	// Images lists the images in file order.
	Images []KarpathyImage
}

// KarpathyImage is one entry of a Karpathy split file's images array.
type KarpathyImage struct {
	// Split is "train", "val", "test" or "restval" (COCO only).
	Split string
	// Filepath is the image's folder ("val2014", COCO only) and Filename
	// its file name.
	Filepath, Filename string
	// ImgID is the "imgid" field, the image's index in the file (the index
	// itself when the field is absent).
	ImgID int64
	// CocoID is the COCO image id when HasCocoID.
	CocoID    int64
	HasCocoID bool
	// Sentences are the captions in file order.
	Sentences []KarpathySentence
}

// KarpathySentence is a caption: the raw text and Karpathy's tokens
// (lower-cased, punctuation removed).
type KarpathySentence struct {
	Raw    string
	Tokens []string
}

// The JSON shapes decoded.
type kImageJSON struct {
	Split     string          `json:"split"`
	Filepath  string          `json:"filepath"`
	Filename  string          `json:"filename"`
	ImgID     *int64          `json:"imgid"`
	CocoID    *int64          `json:"cocoid"`
	Sentences []kSentenceJSON `json:"sentences"`
}

type kSentenceJSON struct {
	Raw    string   `json:"raw"`
	Tokens []string `json:"tokens"`
}

// LoadKarpathy reads the Karpathy split file at path.
func LoadKarpathy(path string) (*Karpathy, error) {
	f, err := infile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, unwrapPathErr(err))
	}
	defer f.Close()
	return ReadKarpathy(f, path)
}

// ReadKarpathy decodes a Karpathy split file from r as a stream, one image
// at a time; name is used in errors.
func ReadKarpathy(r io.Reader, name string) (*Karpathy, error) {
	dec, fail := jsonStream(r, name)
	if err := expectDelim(dec, '{'); err != nil {
		return nil, fail("top level", err)
	}
	k := &Karpathy{}
	sawImages := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fail("top level", err)
		}
		key, _ := t.(string)
		switch key {
		case "images":
			if sawImages {
				return nil, fail("images", errors.New("second images array"))
			}
			sawImages = true
			if err := expectDelim(dec, '['); err != nil {
				return nil, fail("images", err)
			}
			for i := 0; dec.More(); i++ {
				var im kImageJSON
				if err := dec.Decode(&im); err != nil {
					return nil, fail(fmt.Sprintf("images[%d]", i), err)
				}
				img, err := im.image(i)
				if err != nil {
					return nil, fmt.Errorf("read %s: images[%d] (near byte %d): %w", name, i, dec.InputOffset(), err)
				}
				k.Images = append(k.Images, img)
			}
			if err := expectDelim(dec, ']'); err != nil {
				return nil, fail("images", err)
			}
		case "dataset":
			if err := dec.Decode(&k.Dataset); err != nil {
				return nil, fail("dataset", err)
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, fail(strconv.Quote(key), err)
			}
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return nil, fail("top level", err)
	}
	if !sawImages {
		return nil, fmt.Errorf("read %s: no \"images\" array: not a Karpathy split file", name)
	}
	return k, nil
}

// jsonStream returns a buffered token decoder of r and the error wrapper of
// its readers: fail names the file (name), the part being read and the
// byte offset, and turns a bare EOF into io.ErrUnexpectedEOF.
func jsonStream(r io.Reader, name string) (dec *json.Decoder, fail func(what string, err error) error) {
	// A large buffer saves system calls on files of hundreds of megabytes;
	// data already in memory needs none (a megabyte to zero on every call
	// made the fuzzer crawl).
	if _, inMemory := r.(interface{ Len() int }); !inMemory {
		r = bufio.NewReaderSize(r, 1<<20)
	}
	dec = json.NewDecoder(r)
	return dec, func(what string, err error) error {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("read %s: %s (near byte %d): %w", name, what, dec.InputOffset(), err)
	}
}

// expectDelim reads the next token and checks that it is delimiter d.
func expectDelim(dec *json.Decoder, d json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if got, ok := t.(json.Delim); !ok || got != d {
		return fmt.Errorf("found %v where %q was expected", t, string(d))
	}
	return nil
}

// KarpathySplitNames are the values of a Karpathy image's "split" field:
// the only ones a Karpathy split file holds ("restval", the rest of
// COCO's val2014, only in dataset_coco.json).
var KarpathySplitNames = []string{"train", "val", "test", "restval"}

// image checks the decoded entry i and returns it. Its split must be one of
// KarpathySplitNames, exactly (an image of split "TRAIN" or "train " would
// be in no split, left out without a word); its filepath and filename must
// be relative paths that stay below the image root (no "..", not absolute)
// and hold no control character.
func (im *kImageJSON) image(i int) (KarpathyImage, error) {
	if !slices.Contains(KarpathySplitNames, im.Split) {
		return KarpathyImage{}, fmt.Errorf("%s: split %q: want one of %s (Karpathy's names, in lower case)",
			quoteName(im.Filename), im.Split, strings.Join(KarpathySplitNames, ", "))
	}
	for _, f := range []struct{ field, v string }{{"filepath", im.Filepath}, {"filename", im.Filename}} {
		if err := checkRelPath(f.v); err != nil {
			return KarpathyImage{}, fmt.Errorf("%s %q %w", f.field, f.v, err)
		}
	}
	out := KarpathyImage{Split: im.Split, Filepath: im.Filepath, Filename: im.Filename, ImgID: int64(i)}
	if im.ImgID != nil {
		out.ImgID = *im.ImgID
	}
	if im.CocoID != nil {
		out.CocoID, out.HasCocoID = *im.CocoID, true
	}
	out.Sentences = make([]KarpathySentence, len(im.Sentences))
	for j, s := range im.Sentences {
		out.Sentences[j] = KarpathySentence(s)
	}
	return out, nil
}

// checkRelPath says what is wrong with p as a Karpathy file's filepath or
// filename: a path below the image root, with forward slashes. An absolute
// path, a ".." element or a control character (a line break) is refused:
// photos are read from the image root only.
func checkRelPath(p string) error {
	if p == "" {
		return nil
	}
	if path.IsAbs(p) || filepath.IsAbs(p) {
		return errors.New("is an absolute path: want a path relative to the image root")
	}
	for _, e := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if e == ".." {
			return errors.New(`has a ".." element: want a path that stays inside the image root`)
		}
	}
	for j, r := range p {
		if unicode.IsControl(r) {
			return fmt.Errorf("holds the control character %U at byte %d: want a file name", r, j)
		}
	}
	return nil
}

// quoteName names an image by its file name in errors, or says it has none.
func quoteName(filename string) string {
	if filename == "" {
		return "(no filename)"
	}
	return strconv.Quote(filename)
}

// IsCOCO reports whether k describes MS-COCO (its dataset field says so,
// or its images carry COCO ids), whose splits follow the VSE++ convention.
func (k *Karpathy) IsCOCO() bool {
	if k.Dataset != "" {
		return strings.EqualFold(k.Dataset, "coco")
	}
	return len(k.Images) > 0 && k.Images[0].HasCocoID
}

// Split names accepted by SplitIndices and the loaders.
const (
	SplitTrain   = "train"
	SplitDev     = "dev"
	SplitTest    = "test"
	SplitTestAll = "testall"
)

// SplitIndices returns the indices into k.Images of split, in file order,
// following the VSE++ convention: "train" is the train images, plus the
// restval images for COCO; "dev" (or "val") is the val images, the first
// 5000 for COCO; "test" is the test images, the first 1000 for COCO;
// "testall" is every test image (the COCO 5K test set); "restval" is
// COCO's restval images alone.
func (k *Karpathy) SplitIndices(split string) ([]int, error) {
	coco := k.IsCOCO()
	var want func(s string) bool
	limit := -1
	switch split {
	case SplitTrain:
		want = func(s string) bool { return s == "train" || (coco && s == "restval") }
	case SplitDev, "val":
		want = func(s string) bool { return s == "val" }
		if coco {
			limit = 5000
		}
	case SplitTest:
		want = func(s string) bool { return s == "test" }
		if coco {
			limit = 1000
		}
	case SplitTestAll:
		want = func(s string) bool { return s == "test" }
	case "restval":
		want = func(s string) bool { return s == "restval" }
	default:
		return nil, fmt.Errorf("unknown split %q: want train, dev, test, testall or restval", split)
	}
	var idx []int
	for i := range k.Images {
		if limit >= 0 && len(idx) == limit {
			break
		}
		if want(k.Images[i].Split) {
			idx = append(idx, i)
		}
	}
	return idx, nil
}

// IDScheme says which field of a Karpathy image names its feature files
// or TSV records.
type IDScheme int

const (
	// IDAuto picks the convention of the format read: the COCO id for
	// COCO; for other datasets the imgid for bottom-up files (as TERAN
	// does) and the file name without extension for TSV files (as the
	// bottom-up attention extractor does).
	IDAuto IDScheme = iota
	// IDCocoID is the "cocoid" field.
	IDCocoID
	// IDImgID is the "imgid" field, the image's index in the file.
	IDImgID
	// IDFilename is the file name without its extension.
	IDFilename
)

// ParseIDScheme parses "auto", "cocoid", "imgid" or "filename".
func ParseIDScheme(s string) (IDScheme, error) {
	switch s {
	case "", "auto":
		return IDAuto, nil
	case "cocoid":
		return IDCocoID, nil
	case "imgid":
		return IDImgID, nil
	case "filename":
		return IDFilename, nil
	}
	return IDAuto, fmt.Errorf("unknown image id scheme %q: want auto, cocoid, imgid or filename", s)
}

// String returns the name ParseIDScheme accepts.
func (s IDScheme) String() string {
	switch s {
	case IDCocoID:
		return "cocoid"
	case IDImgID:
		return "imgid"
	case IDFilename:
		return "filename"
	}
	return "auto"
}

// ID returns the id of image i under scheme (IDAuto is resolved as for
// bottom-up files).
func (k *Karpathy) ID(i int, scheme IDScheme) (string, error) {
	im := &k.Images[i]
	if scheme == IDAuto {
		scheme = IDImgID
		if k.IsCOCO() {
			scheme = IDCocoID
		}
	}
	switch scheme {
	case IDCocoID:
		if !im.HasCocoID {
			return "", fmt.Errorf("image %d (%s) has no cocoid", i, im.Filename)
		}
		return strconv.FormatInt(im.CocoID, 10), nil
	case IDFilename:
		if im.Filename == "" {
			return "", fmt.Errorf("image %d has no filename", i)
		}
		id := strings.TrimSuffix(im.Filename, path.Ext(im.Filename))
		if err := CheckImageID(id); err != nil {
			return "", fmt.Errorf("image %d: filename %q gives the id %q (the file name without its extension), which %w; rename the file, or name the images by cocoid or imgid", i, im.Filename, id, err)
		}
		return id, nil
	}
	return strconv.FormatInt(im.ImgID, 10), nil
}

// IDs returns the ids of the images idx under scheme.
func (k *Karpathy) IDs(idx []int, scheme IDScheme) ([]string, error) {
	ids := make([]string, len(idx))
	seen := make(map[string]int, len(idx))
	for j, i := range idx {
		id, err := k.ID(i, scheme)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[id]; dup {
			return nil, fmt.Errorf("images %d and %d have the same %s id %q", prev, i, scheme, id)
		}
		seen[id] = i
		ids[j] = id
	}
	return ids, nil
}

// Captions returns the first perImage raw captions of each image in idx,
// consecutively. COCO has some images with 6 or 7 captions; the extra ones
// are dropped so that every image owns exactly perImage captions. An image
// with fewer is an error. Line breaks inside a caption (a few COCO captions
// have them) become spaces.
func (k *Karpathy) Captions(idx []int, perImage int) ([]string, error) {
	out := make([]string, 0, len(idx)*perImage)
	for _, i := range idx {
		im := &k.Images[i]
		if len(im.Sentences) < perImage {
			return nil, fmt.Errorf("image %d (%s) has %d sentences, need %d", i, im.Filename, len(im.Sentences), perImage)
		}
		for j, s := range im.Sentences[:perImage] {
			c := flattenBreaks(s.Raw)
			if err := CheckCaption(c); err != nil {
				return nil, fmt.Errorf("image %d (%s): sentence %d (raw %q) %w", i, im.Filename, j, s.Raw, err)
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// flattenBreaks replaces line breaks by spaces.
func flattenBreaks(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s)
}

// karpathySplit resolves the Karpathy file, the split's image indices,
// captions and ids shared by the bottom-up loaders.
func karpathySplit(k *Karpathy, karpathyJSON, split string, perImage int, scheme IDScheme) (*Karpathy, []int, []string, []string, error) {
	name := karpathyJSON
	if k == nil {
		var err error
		if k, err = LoadKarpathy(karpathyJSON); err != nil {
			return nil, nil, nil, nil, err
		}
	} else if name == "" {
		name = "the Karpathy split file"
	}
	idx, err := k.SplitIndices(split)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(idx) == 0 {
		return nil, nil, nil, nil, fmt.Errorf("%s: split %q has no images", name, split)
	}
	caps, err := k.Captions(idx, perImage)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("%s: split %s: %w", name, split, err)
	}
	ids, err := k.IDs(idx, scheme)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("%s: split %s: %w", name, split, err)
	}
	return k, idx, caps, ids, nil
}

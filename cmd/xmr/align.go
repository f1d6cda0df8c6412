package main

import (
	"context"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"math"
	"strconv"
	"strings"

	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/npy"
	"github.com/xmr-project/xmr/outpath"
	"github.com/xmr-project/xmr/text"
	"github.com/xmr-project/xmr/viz"
)

var alignFlags struct {
	checkpoint, features, boxes, image, size, text, out string
	scale                                               int
	allWords                                            bool
	models                                              string
	maxPixels                                           int64
}

func init() {
	register(&command{
		name:    "align",
		summary: "draw which region of an image each word of a caption aligns with, for your own image and model",
		usage:   "--checkpoint CKPT (--features FEAT.npy --boxes BOXES.npy (--image IMG | --size WxH) | --image PHOTO) --text CAPTION --out FILE.png",
		examples: `  # The bottom-up features and boxes of one image (bu_att/ID.npz's "feat"
  # saved as .npy, bu_box/ID.npy), drawn on the image itself:
  xmr align --checkpoint teran.safetensors --features 391895.npy --boxes bu_box/391895.npy \
      --image val2014/COCO_val2014_000000391895.jpg --text "a man riding a motorcycle on a dirt road" --out align.png
  # Without the picture, on a blank canvas of the image's size:
  xmr align --checkpoint runs/teran --features f.npy --boxes b.npy --size 640x480 --text "two dogs" --out align.png
  # A photo alone, with a model trained on xmr extract's features: the
  # regions and their features are extracted from it now (docs/extract.md):
  xmr align --checkpoint runs/teran-px --image photo.jpg --text "a dog on a sofa" --out align.png

FEAT.npy is (R, D) float32 region features (D = the model's feat-dim),
BOXES.npy is (R, 4) boxes x1, y1, x2, y2 in the image's pixels; both may
have a leading dimension of 1. Each caption word (stop words and
punctuation left out, unless --all-words) is boxed on its best region in
its colour, with the cosine; the words, regions, cosines and the model's
score of the pair are printed too.`,
		setFlags: func(fs *flag.FlagSet) {
			fs.StringVar(&alignFlags.checkpoint, "checkpoint", "", "model checkpoint `CKPT` (TERAN or TERN), or a training run directory")
			fs.StringVar(&alignFlags.features, "features", "", "region features `FILE.npy`, (R, D) float32")
			fs.StringVar(&alignFlags.boxes, "boxes", "", "region boxes `FILE.npy`, (R, 4) x1, y1, x2, y2 in pixels")
			fs.StringVar(&alignFlags.image, "image", "", "the image (PNG or JPEG) to draw on; its size normalises the boxes")
			fs.StringVar(&alignFlags.size, "size", "", "the image's size `WxH` when no --image is given")
			fs.StringVar(&alignFlags.text, "text", "", "the caption")
			fs.StringVar(&alignFlags.out, "out", "", "PNG file to write")
			fs.IntVar(&alignFlags.scale, "scale", 0, "magnify the image this many times (0: up to about 512 pixels wide)")
			fs.BoolVar(&alignFlags.allWords, "all-words", false, "draw stop words and punctuation too")
			fs.StringVar(&alignFlags.models, "models", "", "with --image and no --features: `DIR` caching the detector's weights (default $XMR_MODELS, else ~/.cache/xmr)")
			addMaxPixels(fs, &alignFlags.maxPixels)
		},
		run: runAlign,
	})
}

// arrayImages are images given as arrays: features (N, R, D), the first
// count[i] slots of image i real, with their box codes.
type arrayImages struct {
	feat  []float32
	box5  [][5]float32 // N*R
	count []int
	r, d  int
}

func (a *arrayImages) Len() int                 { return len(a.count) }
func (a *arrayImages) Dims() (int, int)         { return a.r, a.d }
func (a *arrayImages) Image(i int) []float32    { return a.feat[i*a.r*a.d : (i+1)*a.r*a.d] }
func (a *arrayImages) NumRegions(i int) int     { return a.count[i] }
func (a *arrayImages) Box5(i, r int) [5]float32 { return a.box5[i*a.r+r] }

// boxCode is TERAN's spatial code of a box given in pixels of a w x h
// image: the corners normalised to [0, 1] and the normalised area.
func boxCode(b [4]float32, w, h float32) [5]float32 {
	x1, y1, x2, y2 := b[0]/w, b[1]/h, b[2]/w, b[3]/h
	return [5]float32{x1, y1, x2, y2, (x2 - x1) * (y2 - y1)}
}

// readRegions reads one image's features and pixel boxes.
func readRegions(featPath, boxPath string) (feat []float32, boxes [][4]float32, d int, err error) {
	fa, err := npy.Read(featPath)
	if err != nil {
		return nil, nil, 0, err
	}
	ba, err := npy.Read(boxPath)
	if err != nil {
		return nil, nil, 0, err
	}
	fs, bs := squeeze(fa.Shape), squeeze(ba.Shape)
	if len(fs) != 2 || fs[0] == 0 || fs[1] == 0 {
		return nil, nil, 0, fmt.Errorf("%s: shape %v, want (R, D) region features", featPath, fa.Shape)
	}
	if len(bs) != 2 || bs[1] != 4 || bs[0] != fs[0] {
		return nil, nil, 0, fmt.Errorf("%s: shape %v, want (%d, 4) boxes, one per region of %s", boxPath, ba.Shape, fs[0], featPath)
	}
	for i, v := range fa.Data {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, nil, 0, fmt.Errorf("%s: element %d is %v", featPath, i, v)
		}
	}
	boxes = make([][4]float32, bs[0])
	for r := range boxes {
		copy(boxes[r][:], ba.Data[r*4:])
		b := boxes[r]
		if !(b[0] <= b[2] && b[1] <= b[3]) || math.IsNaN(float64(b[0]+b[1]+b[2]+b[3])) {
			return nil, nil, 0, fmt.Errorf("%s: box %d is %v, want x1 <= x2 and y1 <= y2", boxPath, r, b)
		}
	}
	return fa.Data, boxes, fs[1], nil
}

// boxSlack is how far, in image sizes, a box may reach beyond its image:
// detectors keep boxes inside it, so anything further is not a pixel box of
// this image (normalised boxes, another image's, garbage).
const boxSlack = 1

// checkBoxes refuses boxes with a non-finite coordinate or one further than
// boxSlack image sizes outside the w x h image.
func checkBoxes(path string, boxes [][4]float32, w, h float32) error {
	for r, b := range boxes {
		for c, v := range b {
			size := w
			if c%2 == 1 {
				size = h
			}
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || v < -boxSlack*size || v > (1+boxSlack)*size {
				return fmt.Errorf("%s: box %d is %v: coordinate %d (%v) is not a pixel of the %vx%v image (want finite, within [%v, %v])",
					path, r, b, c, v, w, h, -boxSlack*size, (1+boxSlack)*size)
			}
		}
	}
	return nil
}

// maxCanvasPixels bounds the drawing of xmr align (8192 x 8192): the
// image magnified --scale times. The image itself is decoded by package
// extract, as xmr extract and the server's uploads decode theirs: the same
// bomb limit (--max-pixels) and EXIF orientation.
const maxCanvasPixels = 1 << 26

// maxPixelsUsage is the help of --max-pixels, the decompression-bomb
// limit (extract.Limits.MaxPixels) of every command that decodes a photo.
const maxPixelsUsage = "refuse images whose header declares more pixels than this (before decoding them)"

// addMaxPixels declares --max-pixels on fs, defaulting to
// extract.DefaultMaxPixels.
func addMaxPixels(fs *flag.FlagSet, p *int64) {
	fs.Int64Var(p, "max-pixels", extract.DefaultMaxPixels, maxPixelsUsage)
}

// squeeze drops a leading dimension of 1.
func squeeze(shape []int) []int {
	if len(shape) == 3 && shape[0] == 1 {
		return shape[1:]
	}
	return shape
}

// parseSize reads "WxH".
func parseSize(s string) (int, int, error) {
	ws, hs, ok := strings.Cut(strings.ToLower(s), "x")
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	if !ok || err1 != nil || err2 != nil || w <= 0 || h <= 0 || w > 1<<15 || h > 1<<15 {
		return 0, 0, fmt.Errorf("--size %q: want WIDTHxHEIGHT in pixels, e.g. 640x480", s)
	}
	return w, h, nil
}

func runAlign(ctx context.Context, args []string) error {
	f := alignFlags
	switch {
	case len(args) > 0:
		return usageErrorf("unexpected arguments %q", args)
	case f.checkpoint == "" || f.out == "":
		return usageErrorf("--checkpoint and --out are required")
	case (f.features == "") != (f.boxes == ""):
		return usageErrorf("give --features and --boxes together, or neither (with --image: the features are extracted from it)")
	case f.features == "" && f.image == "":
		return usageErrorf("without --features and --boxes, give --image: the regions and their features are extracted from it")
	case text.Blank(f.text):
		return usageErrorf("--text is required: the caption to align (%s)", blankText(f.text))
	case (f.image == "") == (f.size == ""):
		return usageErrorf("give --image (the picture) or --size WxH (its size), one of them")
	case f.scale < 0 || f.scale > 16:
		return usageErrorf("--scale %d: want 0 (automatic) to 16", f.scale)
	case f.maxPixels <= 0:
		return usageErrorf("--max-pixels %d: want a positive number", f.maxPixels)
	}
	lim := extract.Limits{MaxPixels: f.maxPixels}
	if err := checkOutputs(append(checkpointInputs(f.checkpoint),
		outpath.Input{Flag: "--features", Path: f.features}, outpath.Input{Flag: "--boxes", Path: f.boxes}, outpath.Input{Flag: "--image", Path: f.image}),
		[]outpath.Output{{Flag: "--out", Path: f.out, Kind: outpath.Stream}}); err != nil {
		return err
	}
	var img image.Image
	var extracted *alignInput
	if f.features == "" {
		var err error
		if extracted, err = extractForAlign(ctx, f.checkpoint, f.image, f.models, lim); err != nil {
			return err
		}
		img = extracted.img
	} else if f.image != "" {
		var err error
		if img, err = extract.LoadUpright(f.image, lim); err != nil {
			return err
		}
	} else {
		w, h, err := parseSize(f.size)
		if err != nil {
			return usageErrorf("%v", err)
		}
		blank := image.NewRGBA(image.Rect(0, 0, w, h))
		draw.Draw(blank, blank.Bounds(), &image.Uniform{color.RGBA{235, 235, 235, 255}}, image.Point{}, draw.Src)
		img = blank
	}
	b := img.Bounds()
	w, h := float32(b.Dx()), float32(b.Dy())
	var feat []float32
	var boxes [][4]float32
	var d int
	if extracted != nil {
		feat, boxes, d = extracted.feat, extracted.boxes, extracted.d
	} else {
		var err error
		if feat, boxes, d, err = readRegions(f.features, f.boxes); err != nil {
			return err
		}
		if err := checkBoxes(f.boxes, boxes, w, h); err != nil {
			return err
		}
	}
	m, cf, err := model.Load(f.checkpoint)
	if err != nil {
		return err
	}
	cf.Close()
	src := &arrayImages{feat: feat, count: []int{len(boxes)}, r: len(boxes), d: d}
	for _, bx := range boxes {
		src.box5 = append(src.box5, boxCode(bx, w, h))
	}
	res, err := alignOne(ctx, m, src, f.text)
	if err != nil {
		return err
	}
	fields := strings.Fields(f.text)
	var words []viz.WordRegion
	fmt.Fprintf(stdout, "%s score of the pair: %.4f (%s)\n", m.Name(), res.score, res.scoring)
	for _, mw := range res.matches {
		word := fields[mw.Word]
		skip := !f.allWords && (text.IsStopWord(word) || !hasLetter(word))
		mark := ""
		if skip {
			mark = "  (not drawn)"
		}
		bx := boxes[mw.Region]
		fmt.Fprintf(stdout, "  %-14s region %-3d cos %.3f  box %.0f,%.0f-%.0f,%.0f%s\n", word, mw.Region, mw.Cosine, bx[0], bx[1], bx[2], bx[3], mark)
		if !skip {
			words = append(words, viz.WordRegion{Word: word, Box: bx, Score: mw.Cosine})
		}
	}
	scale := f.scale
	if scale == 0 {
		scale = max(1, 512/max(b.Dx(), b.Dy()))
	}
	if c := int64(b.Dx()) * int64(b.Dy()) * int64(scale) * int64(scale); c > maxCanvasPixels {
		return usageErrorf("an image of %dx%d magnified %d times is %d pixels; at most %d (lower --scale)", b.Dx(), b.Dy(), scale, c, int64(maxCanvasPixels))
	}
	overlay, err := viz.AlignmentOverlayContext(ctx, img, f.text, words, scale)
	if err != nil {
		return err
	}
	if err := viz.SavePNGContext(ctx, f.out, overlay); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", f.out)
	return nil
}

// alignment is what alignOne finds for one image and one caption.
type alignment struct {
	matches []model.WordMatch
	score   float32
	scoring model.Scoring
}

// alignOne encodes image 0 of src and the caption and returns each word's
// best region and the model's score of the pair.
func alignOne(ctx context.Context, m model.Model, src model.ImageSource, caption string) (*alignment, error) {
	imgs, err := model.EncodeImages(ctx, m, src, nil)
	if err != nil {
		return nil, err
	}
	txts, err := model.EncodeTexts(ctx, m, []string{caption}, nil)
	if err != nil {
		return nil, err
	}
	if len(imgs.Vecs) == 0 || len(txts.Vecs) == 0 {
		return nil, fmt.Errorf("the %s model keeps no region and word vectors: it has no word-region alignment to draw", m.Name())
	}
	s := m.Scoring()
	sims, err := model.ScoreMatrix(ctx, imgs, txts, s)
	if err != nil {
		return nil, err
	}
	return &alignment{matches: model.MatchWords(imgs, 0, txts, 0), score: sims[0], scoring: s}, nil
}

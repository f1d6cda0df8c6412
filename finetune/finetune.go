// Package finetune trains the upper part of the detector with an
// image-text model: the region features' columns that a cut of the
// detector computes (detect.Cuts) are recomputed on the tape from the
// activation at the cut, cached once per photo by `xmr extract --taps`,
// and pooled over each region's box by ROI-Align, so that the model's
// matching loss reaches the detector's weights. A checkpoint carries the
// part's weights beside the model's (Prefix, MetaKey), and Tuned turns
// them back into a detector for the images a trained model is given.
//
// docs/photos.md measures what it gives on Flickr8k.
package finetune

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"slices"
	"strings"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/internal/half"
	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/npy"
	"github.com/xmr-project/xmr/tensor"
)

// Prefix starts the names of the part's weights among a model's
// parameters and in checkpoints: the optimiser trains them in a group of
// their own (train.VisionPrefix, the same string).
const Prefix = "vision."

// MetaKey is the checkpoint metadata key naming the cut whose part the
// checkpoint's weights named with Prefix replace.
const MetaKey = "vision_cut"

// Part is the upper part of the detector at a cut, trainable, and where
// the maps it computes sit in a region's feature vector.
type Part struct {
	cut    detect.Cut
	net    *detect.Net
	params []nn.Named
	cols   [][2]int // the feature columns of each map the part computes
	stride []int    // and the map's stride
}

// NewPart returns the part of det at cut, with the detector's weights,
// for features that pool maps (extract.Identity.Maps) in that order. Every
// map the part computes must be among them.
func NewPart(det *detect.Detector, cut detect.Cut, maps []string) (*Part, error) {
	p := &Part{cut: cut}
	for _, name := range cut.Maps {
		at, found := 0, false
		for _, m := range maps {
			s, ok := detect.MapNamed(m)
			if !ok {
				return nil, fmt.Errorf("finetune: the features pool an unknown map %q", m)
			}
			if m == name {
				p.cols = append(p.cols, [2]int{at, at + s.C})
				p.stride = append(p.stride, s.Stride)
				found = true
			}
			at += s.C
		}
		if !found {
			return nil, fmt.Errorf("finetune: the features pool maps %v, not %s, which cut %s computes: extract them with every map (the default)", maps, name, cut.Name)
		}
	}
	net, err := det.CutNet(cut)
	if err != nil {
		return nil, err
	}
	p.net = net
	for _, q := range net.Params() {
		p.params = append(p.params, nn.Named{Name: Prefix + q.Name, T: q.T})
	}
	return p, nil
}

// Cut returns the cut the part starts at.
func (p *Part) Cut() detect.Cut { return p.cut }

// Params returns the part's weights, named with Prefix.
func (p *Part) Params() []nn.Named { return slices.Clone(p.params) }

// InShape returns the shape of one image's activation at the cut (H, W, C).
func (p *Part) InShape() []int { return p.net.InShape() }

// Features returns feat, (B, R, D) region features of B images, with the
// columns of the maps the part computes replaced by the part's maps run
// on x (the images' activations at the cut, (B, H, W, C)) and pooled by
// ROI-Align over boxes (each image's regions, in the detector's input
// pixels; slots past them are zero), recorded on tp (nil: no gradients).
func (p *Part) Features(tp *tensor.Tape, x *tensor.Tensor, boxes [][][4]float32, feat *tensor.Tensor) *tensor.Tensor {
	R, D := feat.Shape[1], feat.Shape[2]
	ys := p.net.Forward(tp, x)
	var parts []*tensor.Tensor
	at := 0
	for j, y := range ys {
		lo, hi := p.cols[j][0], p.cols[j][1]
		if lo > at {
			parts = append(parts, tp.Narrow(feat, 2, at, lo-at))
		}
		parts = append(parts, tp.ROIAlign(y, p.stride[j], boxes, R))
		at = hi
	}
	if at < D {
		parts = append(parts, tp.Narrow(feat, 2, at, D-at))
	}
	return tp.Concat(2, parts...)
}

// Taps are a split's cached activations at a cut (`xmr extract --taps`)
// and its regions' boxes in the detector's input pixels. Float16
// activations stay float16 in memory (0.7 GB for Flickr8k's 12,000
// training photos at s32, against 1.5 GB), converted a batch at a time.
type Taps struct {
	f32   *npy.Array // float32 activations, or nil
	f16   []uint16   // float16 activations' bits, or nil
	per   int        // values per image
	shape []int      // per image
	boxes [][][4]float32
}

// OpenTaps reads the activations at path for the images of reg, in
// order; their shape must be want (H, W, C).
func OpenTaps(path string, reg *data.Regions, want []int) (*Taps, error) {
	f, err := npy.Open(path)
	if err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	defer f.Close()
	shape := f.Header.Shape
	if len(shape) != 4 || shape[0] != reg.N || !slices.Equal(shape[1:], want) {
		return nil, fmt.Errorf("finetune: %s: shape %v, want (%d, %d, %d, %d), the activations of the split's %d images: extract the data set again with --taps", path, shape, reg.N, want[0], want[1], want[2], reg.N)
	}
	if reg.Boxes == nil {
		return nil, fmt.Errorf("finetune: %s: the split has no region boxes to pool the recomputed maps over", path)
	}
	t := &Taps{per: want[0] * want[1] * want[2], shape: slices.Clone(want), boxes: make([][][4]float32, reg.N)}
	if d := f.Header.DType; d.Kind == 'f' && d.Size == 2 {
		t.f16, err = f.ReadFloat16Bits()
	} else {
		t.f32, err = f.Map()
	}
	if err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	const S = detect.InputSize
	for i := range reg.N {
		for r := range reg.NumRegions(i) {
			b := reg.Boxes[(i*reg.R+r)*4:]
			t.boxes[i] = append(t.boxes[i], [4]float32{b[0] * S, b[1] * S, b[2] * S, b[3] * S})
		}
	}
	return t, nil
}

// Close releases the activations.
func (t *Taps) Close() error {
	t.f16 = nil
	if t.f32 != nil {
		return t.f32.Close()
	}
	return nil
}

// Len returns the number of images.
func (t *Taps) Len() int { return len(t.boxes) }

// batch returns images idx's activations, (len(idx), H, W, C), and boxes.
func (t *Taps) batch(idx []int) (*tensor.Tensor, [][][4]float32) {
	x := tensor.New(append([]int{len(idx)}, t.shape...)...)
	boxes := make([][][4]float32, len(idx))
	for k, i := range idx {
		dst := x.Data[k*t.per : (k+1)*t.per]
		if t.f16 != nil {
			for j, h := range t.f16[i*t.per : (i+1)*t.per] {
				dst[j] = half.ToFloat32(h)
			}
		} else {
			copy(dst, t.f32.Data[i*t.per:(i+1)*t.per])
		}
		boxes[k] = t.boxes[i]
	}
	return x, boxes
}

// Data is a Part with the cached activations of a data set's train and
// dev splits: what a training run needs to recompute its batches'
// features (train.Vision) and its validations'.
type Data struct {
	*Part
	train, dev *Taps
}

// OpenData returns the part of det at cut for the data set in dir, which
// xmr extract made with --taps for that cut, with the activations of its
// train and dev splits (whose regions are train and dev). With check,
// it first makes sure that the part, with the detector's weights still,
// gives back the extracted features from the activations (Check).
func OpenData(dir string, det *detect.Detector, cut detect.Cut, train, dev *data.Regions, check bool) (*Data, error) {
	rec, err := extract.ReadRecord(dir)
	if err != nil {
		return nil, err
	}
	if rec == nil || rec.Kind != extract.KindRegions {
		return nil, fmt.Errorf("finetune: %s is not a data set of region features that xmr extract made (its %s): fine-tuning the detector needs one, extracted with --taps %s", dir, extract.FileName, cut.Name)
	}
	if rec.Extractor.Tuned != "" {
		return nil, fmt.Errorf("finetune: %s holds features of a fine-tuned detector (%s); extract the photos again with the published one", dir, rec.Extractor)
	}
	p, err := NewPart(det, cut, rec.Extractor.Maps)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	d := &Data{Part: p}
	open := func(split string, reg *data.Regions) (*Taps, error) {
		path := extract.TapsPath(dir, cut.Name, split)
		t, err := OpenTaps(path, reg, p.InShape())
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("finetune: %s has no activations of its %s split at cut %s (%s): extract the data set again with --taps %s", dir, split, cut.Name, path, cut.Name)
		}
		return t, err
	}
	if d.train, err = open(data.SplitTrain, train); err != nil {
		return nil, err
	}
	if d.dev, err = open(data.SplitDev, dev); err != nil {
		d.train.Close()
		return nil, err
	}
	if check {
		if err := p.Check(d.train, train); err != nil {
			d.Close()
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
	}
	return d, nil
}

// Close releases the activations.
func (d *Data) Close() error {
	return errors.Join(d.train.Close(), d.dev.Close())
}

// Features returns feat, the features of the train split's images items
// (B, R, D), with the part's columns recomputed on tp (Part.Features).
func (d *Data) Features(tp *tensor.Tape, items []int, feat *tensor.Tensor) *tensor.Tensor {
	x, boxes := d.train.batch(items)
	return d.Part.Features(tp, x, boxes, feat)
}

// Dev returns a copy of reg, the regions of the first reg.N images of the
// dev split, with the part's columns recomputed by its current weights.
func (d *Data) Dev(reg *data.Regions) (*data.Regions, error) {
	return d.Refeature(d.dev, reg)
}

// Refeature returns a copy of reg, the regions of taps' first reg.N
// images, with the part's columns recomputed by its current weights.
func (p *Part) Refeature(taps *Taps, reg *data.Regions) (*data.Regions, error) {
	if reg.N > taps.Len() {
		return nil, fmt.Errorf("finetune: %d images, but activations of %d", reg.N, taps.Len())
	}
	out := &data.Regions{N: reg.N, R: reg.R, D: reg.D, Feat: slices.Clone(reg.Feat[:reg.N*reg.R*reg.D]), Boxes: reg.Boxes, Count: reg.Count}
	n := reg.R * reg.D
	const batch = 32
	err := tensor.Try(func() {
		for lo := 0; lo < reg.N; lo += batch {
			hi := min(lo+batch, reg.N)
			idx := make([]int, 0, hi-lo)
			for i := lo; i < hi; i++ {
				idx = append(idx, i)
			}
			x, boxes := taps.batch(idx)
			f := p.Features(nil, x, boxes, tensor.FromData(out.Feat[lo*n:hi*n], hi-lo, reg.R, reg.D))
			copy(out.Feat[lo*n:hi*n], f.Data)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	return out, nil
}

// Check checks, on three images, that the part with the detector's
// weights recomputes reg's features from taps: the activations and the
// data set describe the same images in the same order.
func (p *Part) Check(taps *Taps, reg *data.Regions) error {
	idx := []int{0, reg.N / 2, reg.N - 1}
	n := reg.R * reg.D
	feat := tensor.New(len(idx), reg.R, reg.D)
	for k, i := range idx {
		copy(feat.Data[k*n:], reg.Image(i))
	}
	var got *tensor.Tensor
	if err := tensor.Try(func() {
		x, boxes := taps.batch(idx)
		got = p.Features(nil, x, boxes, feat)
	}); err != nil {
		return fmt.Errorf("finetune: %w", err)
	}
	var maxErr, maxAbs float64
	for k, i := range idx {
		for r := range reg.NumRegions(i) {
			for _, c := range p.cols {
				for j := c[0]; j < c[1]; j++ {
					want := float64(feat.Data[k*n+r*reg.D+j])
					maxErr = max(maxErr, math.Abs(float64(got.Data[k*n+r*reg.D+j])-want))
					maxAbs = max(maxAbs, math.Abs(want))
				}
			}
		}
	}
	// Float16 activations round by 1e-3 of a value (measured: 2.4e-4 of
	// 3.07 on Flickr8k); other images differ by the values themselves.
	if !(maxErr <= 1e-2*max(maxAbs, 1)) {
		return fmt.Errorf("finetune: the cached activations do not give the extracted features (largest difference %.3g of values up to %.3g): extract the data set again with --taps", maxErr, maxAbs)
	}
	slog.Info("cached activations checked against the extracted features", "cut", p.cut.Name, "max_difference", fmt.Sprintf("%.3g", maxErr), "max_value", fmt.Sprintf("%.3g", maxAbs))
	return nil
}

// Cut returns the cut whose part a checkpoint's metadata says its weights
// replace (MetaKey), and false when it has none.
func CutOf(md map[string]string) (detect.Cut, bool, error) {
	name, ok := md[MetaKey]
	if !ok || name == "" {
		return detect.Cut{}, false, nil
	}
	c, err := detect.CutNamed(name)
	if err != nil {
		return detect.Cut{}, false, fmt.Errorf("checkpoint metadata %s: %w", MetaKey, err)
	}
	return c, true, nil
}

// Tuned returns det with the part that checkpoint f carries (Prefix,
// MetaKey), or nil when f carries none.
func Tuned(f *checkpoint.File, det *detect.Detector) (*detect.Tuned, error) {
	cut, ok, err := CutOf(f.Metadata())
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("%s: %w", f.Path(), err)
		}
		return nil, err
	}
	t, err := det.Tune(cut, func(p detect.Param) error {
		return f.LoadInto([]checkpoint.Entry{{Name: Prefix + p.Name, Shape: p.T.Shape, Data: p.T.Data}}, checkpoint.LoadOptions{AllowUnexpected: true})
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path(), err)
	}
	return t, nil
}

// Carried returns the part's weights (named with Prefix) and metadata
// (MetaKey) that checkpoint f carries, to store beside a copy of its
// model (an index's: index.Attachment); nil when f carries none.
func Carried(f *checkpoint.File) ([]nn.Named, map[string]string, error) {
	cut, ok, err := CutOf(f.Metadata())
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("%s: %w", f.Path(), err)
		}
		return nil, nil, err
	}
	var ts []nn.Named
	for _, name := range f.Names() {
		if !strings.HasPrefix(name, Prefix) {
			continue
		}
		d, shape, err := f.Tensor(name)
		if err != nil {
			return nil, nil, err
		}
		ts = append(ts, nn.Named{Name: name, T: tensor.FromData(d, shape...)})
	}
	if len(ts) == 0 {
		return nil, nil, fmt.Errorf("%s: its metadata says it fine-tuned the detector from cut %s, but it has no weights named %s*", f.Path(), cut.Name, Prefix)
	}
	return ts, map[string]string{MetaKey: cut.Name}, nil
}

// LoadPart returns the part that checkpoint f carries (Prefix, MetaKey)
// as a Part of det for features that pool maps, to recompute a data set's
// features as the model was trained to read them (Part.Refeature); nil
// when f carries none.
func LoadPart(f *checkpoint.File, det *detect.Detector, maps []string) (*Part, error) {
	cut, ok, err := CutOf(f.Metadata())
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("%s: %w", f.Path(), err)
		}
		return nil, err
	}
	p, err := NewPart(det, cut, maps)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path(), err)
	}
	want := make([]checkpoint.Entry, len(p.params))
	for i, q := range p.params {
		want[i] = checkpoint.Entry{Name: q.Name, Shape: q.T.Shape, Data: q.T.Data}
	}
	if err := f.LoadInto(want, checkpoint.LoadOptions{AllowUnexpected: true}); err != nil {
		return nil, err
	}
	return p, nil
}

// RefeatureSplit returns reg, the regions of split of the data set in
// dir, as the model of checkpoint f reads them: for a model that
// fine-tuned the detector, a copy whose part's columns are recomputed by
// f's weights (of det's part) from the split's cached activations
// (TapsPath); reg itself for other models.
func RefeatureSplit(f *checkpoint.File, det *detect.Detector, dir, split string, reg *data.Regions) (*data.Regions, error) {
	if _, ok, err := CutOf(f.Metadata()); err != nil || !ok {
		return reg, err
	}
	rec, err := extract.ReadRecord(dir)
	if err != nil {
		return nil, err
	}
	if rec == nil || rec.Kind != extract.KindRegions {
		return nil, fmt.Errorf("%s fine-tuned the detector: it reads region features that xmr extract made, not those of %s", f.Path(), dir)
	}
	p, err := LoadPart(f, det, rec.Extractor.Maps)
	if err != nil {
		return nil, err
	}
	taps, err := OpenTaps(extract.TapsPath(dir, p.Cut().Name, split), reg, p.InShape())
	if err != nil {
		return nil, err
	}
	defer taps.Close()
	return p.Refeature(taps, reg)
}

package detect

import (
	"context"
	"fmt"
	"slices"

	"github.com/xmr-project/xmr/tensor"
)

// Tuned is the detector with the feature maps of a Cut computed by its
// part with fine-tuned weights (a model trained them with its matching
// loss, package finetune). Everything else is the published detector's:
// the boxes, and the maps the part does not compute, exactly as Run gives
// them, so that a model sees at search time the features it was trained
// on. Like Detector, it is safe for concurrent use.
type Tuned struct {
	det *Detector // the detector, tapped at the cut's node
	net *Net
	cut Cut
	tap int // the cut node's index in det's taps
}

// Tune returns d with the maps of cut c computed by c's part (CutNet)
// with the weights that load gives: load is called once for every
// parameter of the part, whose tensor it fills in place (it has the
// parameter's shape, and the detector's weights until then).
func (d *Detector) Tune(c Cut, load func(Param) error) (*Tuned, error) {
	net, err := d.CutNet(c)
	if err != nil {
		return nil, err
	}
	for _, p := range net.Params() {
		if err := load(p); err != nil {
			return nil, fmt.Errorf("detect: cut %s: weight %s: %w", c.Name, p.Name, err)
		}
	}
	tapped, err := d.WithTaps(c.Node)
	if err != nil {
		return nil, err
	}
	return &Tuned{det: tapped, net: net, cut: c, tap: len(tapped.taps) - 1}, nil
}

// Tuning names the cut whose part is fine-tuned (extract.Tuning).
func (t *Tuned) Tuning() string { return t.cut.Name }

// Cut returns the cut whose part is fine-tuned.
func (t *Tuned) Cut() Cut { return t.cut }

// MapInfo describes the maps Run returns, as Detector.MapInfo.
func (t *Tuned) MapInfo() []MapSpec { return t.det.MapInfo() }

// Run detects objects in one image as Detector.Run does, with the cut's
// maps (those of them that opt asks for) computed by the fine-tuned part
// from the activation at the cut's node. Output.Taps ends with that
// activation, after the taps of the detector Tune was called on.
func (t *Tuned) Run(ctx context.Context, rgb []float32, opt RunOptions) (*Output, error) {
	o, err := t.det.Run(ctx, rgb, opt)
	if err != nil {
		return nil, err
	}
	tap := o.Taps[t.tap]
	var ys []*tensor.Tensor
	err = tensor.Try(func() {
		ys = t.net.Forward(nil, tensor.FromData(tap.Data, 1, tap.H, tap.W, tap.C))
	})
	if err != nil {
		o.Release()
		return nil, fmt.Errorf("detect: cut %s: %w", t.cut.Name, err)
	}
	for j, name := range t.cut.Maps {
		i := slices.IndexFunc(o.Maps, func(m FeatureMap) bool { return m.Name == name })
		if i < 0 {
			continue // not asked for
		}
		if m := &o.Maps[i]; len(ys[j].Data) != len(m.Data) {
			o.Release()
			return nil, fmt.Errorf("detect: cut %s computes %d values of map %s, the detector %d", t.cut.Name, len(ys[j].Data), name, len(m.Data))
		}
		if opt.KeepUntuned {
			u := o.Maps[i]
			u.Data = slices.Clone(u.Data)
			o.Untuned = append(o.Untuned, u)
		}
		copy(o.Maps[i].Data, ys[j].Data)
	}
	return o, nil
}

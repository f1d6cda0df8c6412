package train

import (
	"fmt"

	"github.com/xmr-project/xmr/internal/sysmem"
)

// MemoryEstimate is the memory a training run needs, estimated from its
// config and the data's region count before anything is allocated, so that
// a config that cannot fit is refused with numbers instead of killed by the
// kernel. It counts the weights, their gradients and Adam's two moments
// (and the weights' moving average with training.ema-decay),
// and the activations the tape keeps for the backward pass of one batch;
// the features of the data are memory-mapped and not counted.
type MemoryEstimate struct {
	// Params is the number of model parameters (model.Config.NumParams).
	Params float64
	// Weights, Optimizer, Activations, Headroom and Base are bytes: the
	// weights; their gradients and Adam's moments; what one step's forward
	// and backward passes hold; the garbage collector's headroom over
	// these three (the heap grows past the live data between collections,
	// by gcPercent while training); and what a run holds whatever the
	// model (the Go runtime, the text tables, the validation set and its
	// relevance matrices).
	Weights, Optimizer, Activations, Headroom, Base float64
	// Banks is MEMBER's memory banks in bytes (SetBanks; 0 for the other
	// models): per stored image and caption its self-embedding and
	// self-features.
	Banks float64
	// Average is the weights' moving average in bytes (training.ema-decay;
	// 0 without).
	Average float64
	// BatchSize, Regions and Tokens are the batch's shape the activations
	// are estimated for.
	BatchSize, Regions, Tokens int
}

// Total returns the estimate in bytes.
func (e MemoryEstimate) Total() float64 {
	return e.Weights + e.Optimizer + e.Activations + e.Headroom + e.Base + e.Banks + e.Average
}

// SetBanks adds MEMBER's memory banks for a training set of images images
// of regions region slots and captions captions (nothing for the other
// models): usage-ratio of them, each a key of embed-size floats and a value
// of embed-size + 1 floats per region or caption token.
func (e *MemoryEstimate) SetBanks(c Config, images, regions, captions int) {
	if c.Model.Name != "member" {
		return
	}
	f := func(v int) float64 { return float64(v) }
	d, ratio := f(c.Model.EmbedSize), float64(c.Model.UsageRatio)
	perImage := d + f(max(regions, 1))*(d+1)
	perCaption := d + f(max(c.Dataset.MaxCaptionTokens, 2))*(d+1)
	e.Banks = 4 * ratio * (f(images)*perImage + f(captions)*perCaption)
}

// String words the estimate and its parts.
func (e MemoryEstimate) String() string {
	extra := ""
	if e.Average > 0 {
		extra += "; moving average of the weights " + bytesString(e.Average)
	}
	if e.Banks > 0 {
		extra += "; memory banks " + bytesString(e.Banks)
	}
	return fmt.Sprintf("about %s (%.3g parameters: weights %s, gradients and Adam moments %s; activations of a batch of %d with %d regions and %d tokens %s; garbage collector's headroom %s; runtime and validation %s%s)",
		bytesString(e.Total()), e.Params, bytesString(e.Weights), bytesString(e.Optimizer), e.BatchSize, e.Regions, e.Tokens,
		bytesString(e.Activations), bytesString(e.Headroom), bytesString(e.Base), extra)
}

// EstimateMemory estimates the memory of training c on images of regions
// region slots. The parameter count is exact; the activations are an upper
// estimate of what the tape keeps per layer (inputs, attention maps,
// feed-forward hidden values, and for the alignment loss TERAN's
// region-word similarities of every image-caption pair of the batch), and
// half as much again for the gradients in flight (the backward pass hands
// each op's buffers on to the gradients of the ops before it), plus the
// garbage collector's headroom over all that (gcPercent), plus a fixed
// base. Checked against the peak RSS of teran-mrsw-small on a 2,000-image
// world of 8 regions and 256-d features (60 iterations and a validation of
// 400 images): batch 32 and 128 measured 504 and 1173 MiB, estimated 567
// and 1265 MiB; the paper's TERAN MrSw (batch 40, 36 regions) peaks at
// 4.6-4.9 GiB in its training steps, estimated 8.3 GiB. Nonsense sizes
// give huge numbers, never an overflow.
func EstimateMemory(c Config, regions int) MemoryEstimate {
	f := func(v int) float64 { return float64(v) }
	mc := c.ModelConfig()
	p := mc.NumParams()
	b, r, t := f(c.Training.BatchSize), f(max(regions, 1)), f(max(c.Dataset.MaxCaptionTokens, 2))
	// layer is what a transformer layer keeps for n sequences of length l
	// and width d: its input and the outputs of the projections, norms and
	// residuals (about 14 d per position), the feed-forward hidden values
	// before and after the activation and dropout (3 ff), and the attention
	// scores, probabilities and dropout mask (3 per head and pair).
	layer := func(n, l, d, ff, heads float64) float64 { return n * l * (14*d + 3*ff + 3*heads*l) }
	im, tm, jm := mc.ImageModel, mc.TextModel, mc.Model
	h, e := f(im.Hidden), f(jm.EmbedSize)
	var acts float64
	if jm.Name == "member" {
		// MEMBER: the region projection (below: the text encoder, and the
		// projections and E^s over both modalities as the final layers);
		// here E^c once per memory response
		// (late fusion; early fusion needs less) and the decoder twice
		// (self- and cross-features), with its logits over the vocabulary.
		n, lyr := f(jm.Responses), f(jm.Layers)
		acts = b * r * (f(im.FeatDim) + e)
		acts += n * lyr * (layer(b, r, e, f(jm.FF), f(jm.Heads)) + layer(b, t, e, f(jm.FF), f(jm.Heads)))
		acts += 2 * lyr * 2 * layer(b, t, e, f(jm.FF), f(jm.Heads))
		acts += 2 * 3 * b * t * f(tm.VocabSize)
	} else {
		// The visual pipeline: box code and features in, the two-layer map,
		// the transformer layers over regions plus a CLS slot, the projection.
		acts = b * r * (f(im.FeatDim) + 5 + 3*h)
		acts += f(im.TransformerLayers) * layer(b, r+1, h, f(im.FF), f(im.Heads))
	}
	// The textual pipeline.
	switch tm.Name {
	case "bert":
		d := f(tm.WordDim)
		acts += 4*b*t*d + f(tm.ExtractionHiddenLayer)*layer(b, t, d, f(tm.FF), f(tm.Heads))
	case "gru", "lstm":
		g, dr := tm.Recurrent()
		gates, dirs := f(g), f(dr)
		acts += b * t * (f(tm.EmbedDim) + f(max(tm.Layers, 1))*dirs*(3*gates*f(tm.Hidden)))
	default:
		d := f(tm.EmbedDim)
		acts += 2*b*t*d + f(max(tm.Layers, 1))*layer(b, t, d, f(max(tm.FF, 1)), f(max(tm.Heads, 1)))
	}
	// Projections into the common space and the final layers of both.
	acts += 2 * b * (r + 1 + t) * e
	acts += f(jm.Layers) * (layer(b, r+1, e, f(jm.FF), f(jm.Heads)) + layer(b, t, e, f(jm.FF), f(jm.Heads)))
	// The loss: every image against every caption of the batch.
	if c.Training.LossType != LossMatching {
		acts += 3 * b * b * r * t
	}
	acts += 4 * b * b * e
	est := MemoryEstimate{
		Params:      p,
		Weights:     4 * p,
		Optimizer:   12 * p, // a gradient and Adam's two moments per weight
		Activations: 1.5 * 4 * acts,
		Base:        baseMemory,
		BatchSize:   c.Training.BatchSize,
		Regions:     regions,
		Tokens:      int(t),
	}
	if c.Training.EMADecay > 0 {
		est.Average = 4 * p
	}
	est.Headroom = gcPercent / 100.0 * (est.Weights + est.Optimizer + est.Activations)
	return est
}

// baseMemory is what a training run holds whatever its model: the Go
// runtime and binary, the text tables, the validation set with its
// relevance matrices (measured: about 250 MiB on the small configs).
const baseMemory = 320 << 20

// Memory is what the machine can give a run, in bytes.
type Memory = sysmem.Memory

// systemMemory reads the machine's memory; ok is false where it cannot be
// known (not Linux). Tests replace it.
var systemMemory = sysmem.Read

// checkMemory refuses a run whose estimate exceeds the memory available.
func checkMemory(est MemoryEstimate) error {
	mem, ok := systemMemory()
	if !ok {
		return nil
	}
	if est.Total() > mem.Available {
		return fmt.Errorf("the config needs %s, but this machine has %s available (%s in all): lower training.bs, the widths or the layer counts", est, bytesString(mem.Available), bytesString(mem.Total))
	}
	return nil
}

// bytesString writes a byte count in GiB or MiB.
func bytesString(b float64) string { return sysmem.Format(b) }

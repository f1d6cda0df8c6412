package model

import (
	"fmt"
	"math"

	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/tensor"
)

// Feature normalisation (image-model.feature-norm): features made by a
// detector's maps (xmr extract) differ in scale by orders of magnitude
// from one channel to the next, and a model learns from them far better
// when each channel is standardised first (docs/photos.md).
// "standardize" keeps a per-channel mean and inverse standard deviation,
// computed from the training split when a run starts (SetFeatureStats)
// and stored in the checkpoint like a weight (not trained), and maps every
// region feature x to (x - mean) * inv before the model reads it: at
// training, evaluation, indexing and query time alike, so the model's
// input is always the raw features the data holds.

// FeatureNorms lists the valid image-model.feature-norm values; "" means
// none.
var FeatureNorms = []string{"", "none", "standardize"}

// featNorm is the standardisation of the region features; nil when the
// config asks for none.
type featNorm struct {
	Mean, Inv *tensor.Tensor // (D): per-channel mean and 1/std
}

// featNormName prefixes the statistics' names in checkpoints.
const featNormName = "img_feat_norm"

// newFeatNorm returns the identity standardisation for d channels when
// image-model.feature-norm is "standardize", else nil.
func newFeatNorm(im ImageConfig) *featNorm {
	if im.FeatureNorm != "standardize" {
		return nil
	}
	return &featNorm{Mean: tensor.New(im.FeatDim), Inv: tensor.Full(1, im.FeatDim)}
}

// params lists the statistics (never trained) for checkpoints.
func (n *featNorm) params() []nn.Named {
	if n == nil {
		return nil
	}
	return []nn.Named{{Name: featNormName + ".mean", T: n.Mean}, {Name: featNormName + ".inv_std", T: n.Inv}}
}

// apply returns im with its features standardised; im itself when n is
// nil. Padding regions change too, but every model masks them.
func (n *featNorm) apply(tp *tensor.Tape, im Images) Images {
	if n == nil {
		return im
	}
	d := n.Mean.Numel()
	if im.Feat.Shape[im.Feat.Dims()-1] != d {
		panic(&tensor.ShapeError{Op: "feature-norm", Msg: fmt.Sprintf("features of width %d, statistics of %d", im.Feat.Shape[im.Feat.Dims()-1], d)})
	}
	out := im
	out.Feat = tp.Mul(tp.Sub(im.Feat, n.Mean), n.Inv)
	return out
}

// FeatureNormalizer is a model whose region features are standardised
// (image-model.feature-norm: standardize); training sets the statistics
// from its training split before the first step.
type FeatureNormalizer interface {
	// NormalizesFeatures reports whether the config asks for it.
	NormalizesFeatures() bool
	// SetFeatureStats sets the per-channel mean and standard deviation
	// (channels of zero deviation are left unscaled).
	SetFeatureStats(mean, std []float32) error
}

// set stores the statistics.
func (n *featNorm) set(mean, std []float32) error {
	if n == nil {
		return fmt.Errorf("feature-norm: the model does not standardise its features")
	}
	if len(mean) != n.Mean.Numel() || len(std) != n.Mean.Numel() {
		return fmt.Errorf("feature-norm: %d means and %d deviations for %d channels", len(mean), len(std), n.Mean.Numel())
	}
	for i := range mean {
		m, s := float64(mean[i]), float64(std[i])
		if math.IsNaN(m) || math.IsInf(m, 0) || math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
			return fmt.Errorf("feature-norm: channel %d has mean %v and deviation %v", i, mean[i], std[i])
		}
		n.Mean.Data[i] = mean[i]
		n.Inv.Data[i] = 1
		if s > 1e-12 {
			n.Inv.Data[i] = float32(1 / s)
		}
	}
	return nil
}

// FeatureStats returns the per-channel mean and standard deviation of the
// real regions of every image of images (padding slots left out), summed
// in float64: what SetFeatureStats takes.
func FeatureStats(images ImageSource) (mean, std []float32, err error) {
	n := images.Len()
	_, d := images.Dims()
	sum, sq := make([]float64, d), make([]float64, d)
	count := 0
	for i := 0; i < n; i++ {
		feat := images.Image(i)
		for r := 0; r < images.NumRegions(i); r++ {
			count++
			for k, v := range feat[r*d : (r+1)*d] {
				sum[k] += float64(v)
				sq[k] += float64(v) * float64(v)
			}
		}
	}
	if count == 0 {
		return nil, nil, fmt.Errorf("feature-norm: no region to compute the statistics from (%d images)", n)
	}
	mean, std = make([]float32, d), make([]float32, d)
	for k := range sum {
		m := sum[k] / float64(count)
		v := max(sq[k]/float64(count)-m*m, 0)
		mean[k], std[k] = float32(m), float32(math.Sqrt(v))
	}
	return mean, std, nil
}

// featNormed gives a model the FeatureNormalizer methods over its
// standardisation (nil when its config asks for none).
type featNormed struct{ norm *featNorm }

// NormalizesFeatures reports whether the model standardises its features.
func (f featNormed) NormalizesFeatures() bool { return f.norm != nil }

// SetFeatureStats sets the standardisation's statistics.
func (f featNormed) SetFeatureStats(mean, std []float32) error { return f.norm.set(mean, std) }

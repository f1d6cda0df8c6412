package train

import (
	"slices"
	"testing"

	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/tensor"
)

// withVision is a model with one more parameter, named for the vision
// group, that scales the image features: a stand-in for an image network
// trained with the model.
type withVision struct {
	model.Model
	scale *tensor.Tensor
}

func (m *withVision) Params() []nn.Named {
	return append(m.Model.Params(), nn.Named{Name: VisionPrefix + "scale", T: m.scale})
}

func (m *withVision) EncodeImages(tp *tensor.Tape, im model.Images) *model.Encoded {
	im.Feat = tp.Mul(im.Feat, m.scale)
	return m.Model.EncodeImages(tp, im)
}

// TestStepperVisionGroup checks that parameters named with VisionPrefix
// train in a group of their own at training.vision-lr (the model's lr when
// it is 0), and that a step updates them.
func TestStepperVisionGroup(t *testing.T) {
	names, split := smallConfigs(t)
	cfg := tinyConfig(t, names[0])
	cfg.ImageModel.FeatDim = split.Images.D
	for _, c := range []struct{ visionLR, want float64 }{{0, cfg.Training.LR}, {1e-5, 1e-5}} {
		m := &withVision{Model: smallModel(t, cfg, split), scale: tensor.Full(1, split.Images.D).SetRequiresGrad(true)}
		tc := cfg.Training
		tc.VisionLR = c.visionLR
		s, err := NewStepper(m, tc, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		lr := map[string]float64{}
		for _, g := range s.opt.Groups() {
			got = append(got, g.Name)
			lr[g.Name] = g.LR
		}
		if !slices.Contains(got, "vision") || lr["vision"] != c.want || lr["model"] != tc.LR {
			t.Fatalf("vision-lr %v: groups %v with learning rates %v, want a vision group at %v", c.visionLR, got, lr, c.want)
		}
		before := slices.Clone(m.scale.Data)
		if _, err := s.Step(BatchOf(m, split, []int{0, 7, 14, 21, 28, 35}), 0); err != nil {
			t.Fatal(err)
		}
		if slices.Equal(before, m.scale.Data) {
			t.Fatalf("vision-lr %v: a step left the vision parameter as it was", c.visionLR)
		}
	}
}

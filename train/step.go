package train

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/finetune"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/optim"
	"github.com/xmr-project/xmr/tensor"
)

// Batch is B matching pairs: image i goes with caption i.
type Batch struct {
	Images model.Images
	Texts  model.Texts
	// Photos, when set, are the training split's photos that the images
	// are views of (training.augment-draw): the loss takes two captions of
	// one photo as matches whichever views they came with. Nil: each
	// image is its own photo (Images.Items).
	Photos []int
}

// VisionPrefix starts the names of the parameters of an image network
// that a model trains (a part of the detector): Stepper gives them a group
// of their own, at training.vision-lr.
const VisionPrefix = finetune.Prefix

// Stepper takes optimisation steps of a model: the objective of the
// training config, Adam with a BERT group (and a vision group, see
// VisionPrefix) and the configured schedule, gradient clipping. Run drives one; so does the train-step benchmark.
type Stepper struct {
	m      model.Model
	vision Vision // nil: the features as they come
	obj    *objective
	opt    *optim.Adam
	params []*tensor.Tensor
	avg    *average // nil without training.ema-decay
	tp     *tensor.Tape
	tc     TrainingConfig
}

// Vision is an image network trained with the model: the part of the
// detector whose maps package finetune recomputes a batch's region
// features with (finetune.Data).
type Vision interface {
	// Params returns its weights, named with VisionPrefix.
	Params() []nn.Named
	// Features returns feat, the features of the training split's images
	// items (B, R, D), with what the network computes recomputed on tp.
	Features(tp *tensor.Tape, items []int, feat *tensor.Tensor) *tensor.Tensor
}

// NewStepper prepares training m with tc; itersPerEpoch converts the
// schedule's epochs into iterations.
func NewStepper(m model.Model, tc TrainingConfig, itersPerEpoch int) (*Stepper, error) {
	return NewVisionStepper(m, nil, tc, itersPerEpoch)
}

// NewVisionStepper is NewStepper for a model trained with an image
// network v (nil: none) that recomputes every batch's features from the
// training split's images (Batch.Images.Items): its weights train in the
// vision group and are stored with the objective's (Tensors).
func NewVisionStepper(m model.Model, v Vision, tc TrainingConfig, itersPerEpoch int) (*Stepper, error) {
	s := &Stepper{m: m, vision: v, obj: newObjective(tc, m), tp: tensor.NewTape(), tc: tc}
	var bert, vision, rest []optim.NamedParam
	var names []string // of s.params
	for _, p := range slices.Concat(m.Params(), s.obj.Params(), s.visionParams()) {
		if !p.T.RequiresGrad() {
			continue
		}
		s.params = append(s.params, p.T)
		names = append(names, p.Name)
		np := optim.NamedParam{Name: p.Name, T: p.T}
		switch {
		case model.IsBERTParam(p.Name):
			bert = append(bert, np)
		case strings.HasPrefix(p.Name, VisionPrefix):
			vision = append(vision, np)
		default:
			rest = append(rest, np)
		}
	}
	lrOr := func(lr float64) float64 {
		if lr == 0 {
			return tc.LR
		}
		return lr
	}
	groups := []optim.Group{{Name: "model", Params: optim.Tensors(rest), LR: tc.LR}}
	if len(bert) > 0 {
		groups = append(groups, optim.Group{Name: "bert", Params: optim.Tensors(bert), LR: lrOr(tc.BERTLR)})
	}
	if len(vision) > 0 {
		groups = append(groups, optim.Group{Name: "vision", Params: optim.Tensors(vision), LR: lrOr(tc.VisionLR)})
	}
	var sched optim.Product
	if tc.Scheduler == "steplr" && tc.StepSize > 0 {
		decay := optim.StepDecay{Every: tc.StepSize, Gamma: tc.Gamma}
		if tc.StepUnit == "iterations" {
			sched = append(sched, decay)
		} else {
			sched = append(sched, optim.Epochs{Iters: itersPerEpoch, Schedule: decay})
		}
	}
	if tc.WarmupPeriod > 0 {
		sched = append(sched, optim.Warmup{Iters: tc.WarmupPeriod})
	}
	opt, err := optim.NewAdam(groups, optim.Config{Beta1: tc.Beta1, Schedule: sched})
	if err != nil {
		return nil, err
	}
	if err := opt.SetNames(slices.Concat(rest, bert, vision)); err != nil {
		return nil, err
	}
	s.opt = opt
	if tc.EMADecay > 0 {
		s.avg = newAverage(names, s.params, tc.EMADecay)
	}
	return s, nil
}

// Step runs one optimisation step on b (forward, backward, clipping, Adam)
// at iteration iter, which seeds dropout and picks the loss's warm-up
// phase, and returns the loss.
func (s *Stepper) Step(b Batch, iter int) (loss float64, err error) {
	s.tp.Seed(s.tc.Seed, uint64(iter))
	err = tensor.Try(func() {
		if s.vision != nil && b.Images.Items == nil {
			panic(errors.New("a batch without its images' indices: the image network cannot recompute their features"))
		}
		img, txt := encode(s.tp, s.m, s.vision, b)
		photos := b.Images.Items
		if b.Photos != nil {
			photos = b.Photos
		}
		l := s.obj.Loss(s.tp, img, txt, b.Texts, photos, iter)
		loss = float64(l.Item())
		s.tp.BackwardAndReset(l)
	})
	s.tp.Reset() // after a panic, BackwardAndReset has not reset
	if mem, ok := s.m.(model.Memorizer); ok {
		mem.EndStep(err == nil) // the banks' writes, once both encoders have run
	}
	if err != nil {
		s.opt.ZeroGrad()
		return 0, err
	}
	// Clipping as ClipGradNorm, applied by Adam as it reads the gradients:
	// one pass over them fewer, the same update.
	scale := float32(1)
	if s.tc.GradClip > 0 {
		scale, _ = optim.ClipScale(s.params, s.tc.GradClip)
	}
	s.opt.StepAndZeroGradScaled(scale)
	if s.avg != nil {
		s.avg.update(s.params, iter+1)
	}
	return loss, nil
}

// encode encodes b's images and captions on tp: side by side
// (tensor.Tape.Both), since a model's encoders share nothing until the
// loss (MEMBER's read each other's memory bank, which changes only when
// the step ends: Memorizer.EndStep).
func encode(tp *tensor.Tape, m model.Model, v Vision, b Batch) (img, txt *model.Encoded) {
	tp.Both(func(tp *tensor.Tape) {
		im := b.Images
		if v != nil {
			im.Feat = v.Features(tp, im.Items, im.Feat)
		}
		img = m.EncodeImages(tp, im)
	},
		func(tp *tensor.Tape) { txt = m.EncodeTexts(tp, b.Texts) })
	return img, txt
}

// visionParams returns the image network's weights, nil without one.
func (s *Stepper) visionParams() []nn.Named {
	if s.vision == nil {
		return nil
	}
	return s.vision.Params()
}

// LR returns the current learning rate of the model group.
func (s *Stepper) LR() float64 { return s.opt.LR(0) }

// NumParams returns the number of trained scalars.
func (s *Stepper) NumParams() int {
	n := 0
	for _, p := range s.params {
		n += p.Numel()
	}
	return n
}

// optimPrefix names the optimiser state in checkpoints.
const optimPrefix = "optim."

// Tensors returns what a checkpoint stores beside the model's weights: the
// objective's parameters, the image network's weights (Vision) and,
// withOptimizer, the optimiser state and the
// averaged weights (training.ema-decay).
func (s *Stepper) Tensors(withOptimizer bool) []nn.Named {
	out := append(s.obj.Params(), s.visionParams()...)
	if !withOptimizer {
		return out
	}
	st := s.opt.State()
	keys := make([]string, 0, len(st))
	for k := range st {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, nn.Named{Name: optimPrefix + k, T: st[k]})
	}
	if s.avg != nil {
		out = append(out, s.avg.avg...)
	}
	return out
}

// Load restores what Tensors(true) stored.
func (s *Stepper) Load(f *checkpoint.File) error {
	if err := model.LoadTensors(f, append(s.obj.Params(), s.visionParams()...)); err != nil {
		return err
	}
	st := map[string]*tensor.Tensor{}
	for _, name := range f.Names() {
		if !strings.HasPrefix(name, optimPrefix) {
			continue
		}
		d, shape, err := f.Tensor(name)
		if err != nil {
			return err
		}
		st[strings.TrimPrefix(name, optimPrefix)] = tensor.FromData(d, shape...)
	}
	if len(st) == 0 {
		return errors.New("no optimiser state (optim.*) in the checkpoint")
	}
	if s.avg != nil {
		if err := model.LoadTensors(f, s.avg.avg); err != nil {
			return fmt.Errorf("averaged weights (training.ema-decay): %w", err)
		}
	}
	return s.opt.LoadState(st)
}

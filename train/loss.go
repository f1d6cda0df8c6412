package train

import (
	"fmt"

	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/tensor"
)

// ContrastiveLoss is the VSE++ hinge triplet loss on a square similarity
// matrix s (N, N) whose diagonal holds the matching pairs (s[i, j] = image
// i, caption j). For every positive pair it sums [margin + s(negative) -
// s(positive)]+ over the negatives in the batch, in both directions; with
// maxViolation only the hardest negative of each direction counts (TERAN
// eq. 5-6).
func ContrastiveLoss(tp *tensor.Tape, s *tensor.Tensor, margin float32, maxViolation bool) *tensor.Tensor {
	n := s.Shape[0]
	if s.Dims() != 2 || s.Shape[1] != n {
		panic(&tensor.ShapeError{Op: "ContrastiveLoss", Msg: fmt.Sprintf("similarities must be square (N, N), have %v", s.Shape)})
	}
	eye := tensor.New(n, n)
	for i := 0; i < n; i++ {
		eye.Data[i*n+i] = 1
	}
	diag := tp.Sum(tp.Mul(s, eye), true, 1)                                                           // (N, 1): s[i, i]
	costC := tp.MaskedFill(tp.Hinge(tp.AddScalar(tp.Sub(s, diag), margin)), eye, 0)                   // image i vs captions j
	costI := tp.MaskedFill(tp.Hinge(tp.AddScalar(tp.Sub(s, tp.Reshape(diag, 1, n)), margin)), eye, 0) // caption j vs images i
	if maxViolation {
		hc, _ := tp.Max(costC, 1, false, nil) // (N): hardest caption per image
		hi, _ := tp.Max(costI, 0, false, nil) // (N): hardest image per caption
		return tp.Add(tp.SumAll(hc), tp.SumAll(hi))
	}
	return tp.Add(tp.SumAll(costC), tp.SumAll(costI))
}

// InfoNCELoss is the symmetric cross-entropy of contrastive learning
// (InfoNCE; CLIP's loss) on a square similarity matrix s (N, N) whose
// diagonal holds the matching pairs: each image's softmax over the
// batch's captions, and each caption's over its images, at temperature
// t, should pick its match; the loss is the mean negative log-likelihood
// of the two directions. same (N, N), when not nil, marks pairs of the
// same image off the diagonal (several captions of one image in a batch),
// which are left out of the softmaxes instead of counted as negatives.
// Every negative pulls by its softmax weight, so unlike the hinge it
// keeps teaching once the margin is met and does not collapse from
// random weights as the hardest negative does.
func InfoNCELoss(tp *tensor.Tape, s *tensor.Tensor, t float32, same *tensor.Tensor) *tensor.Tensor {
	n := s.Shape[0]
	if s.Dims() != 2 || s.Shape[1] != n {
		panic(&tensor.ShapeError{Op: "InfoNCELoss", Msg: fmt.Sprintf("similarities must be square (N, N), have %v", s.Shape)})
	}
	z := tp.Scale(s, 1/t)
	if same != nil {
		z = tp.MaskedFill(z, same, -1e9) // exp underflows to exactly 0
	}
	targets := make([]int32, n)
	for i := range targets {
		targets[i] = int32(i)
	}
	rows := tp.CrossEntropy(z, targets, -1)                     // image i over the captions
	cols := tp.CrossEntropy(tp.Transpose(z, 0, 1), targets, -1) // caption j over the images
	return tp.Scale(tp.Add(rows, cols), 0.5)
}

// sameImage returns the (N, N) mask of the off-diagonal pairs of a batch
// whose images are the same training image (items[i] == items[j]), or nil
// when there is none or items is nil.
func sameImage(items []int) *tensor.Tensor {
	n := len(items)
	var m *tensor.Tensor
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i != j && items[i] == items[j] {
				if m == nil {
					m = tensor.New(n, n)
				}
				m.Data[i*n+j] = 1
			}
		}
	}
	return m
}

// UncertaintyWeighted combines losses with learned homoscedastic
// uncertainty (Kendall, Gal and Cipolla 2018): sum_k exp(-s_k) L_k / 2 +
// s_k / 2, where s_k = logVars[k] is the log-variance of task k.
func UncertaintyWeighted(tp *tensor.Tape, logVars *tensor.Tensor, losses ...*tensor.Tensor) *tensor.Tensor {
	if logVars.Numel() != len(losses) {
		panic(&tensor.ShapeError{Op: "UncertaintyWeighted", Msg: "one log-variance per loss"})
	}
	var total *tensor.Tensor
	for k, l := range losses {
		s := tp.Narrow(logVars, 0, k, 1)                                              // (1)
		term := tp.Scale(tp.Add(tp.Mul(tp.Exp(tp.Neg(s)), tp.Reshape(l, 1)), s), 0.5) // (1)
		if total == nil {
			total = term
		} else {
			total = tp.Add(total, term)
		}
	}
	return tp.Reshape(total)
}

// objective is the training loss that a config asks for, with its own
// parameters (TERN w. Align's log-variances), which are trained and saved
// beside the model's. The encoders' penalties (Encoded.Penalty: SEAM's
// attention penalty) and the model's loss over the matching pairs
// (model.PairLosser: MEMBER's caption generation) are added to it. An
// encoding with several embedding spaces (Encoded.Spaces: MEMBER's self
// and cross) trains each with the matching hinge, on their cosine.
type objective struct {
	loss         LossType
	pooling      model.Scoring // the alignment loss's pooling
	scoring      model.Scoring // the model's own scoring: the matching loss's
	margin       float32
	infoNCE      bool    // training.contrastive: infonce (else the hinge)
	temperature  float32 // InfoNCE's
	maxViolation bool
	warmup       int              // sum over negatives before this iteration
	logVars      *tensor.Tensor   // (2): matching, alignment; nil unless matching+alignment
	pair         model.PairLosser // the model's loss over matching pairs (MEMBER's generation); nil for most
}

// logVarsName is the checkpoint name of the uncertainty weights (as in
// checkpoints of the first format, where the model held them).
const logVarsName = "loss.log_vars"

// newObjective returns the objective of t for model m: the matching loss
// uses its scoring (Model.Scoring), and a model.PairLosser's term is added.
func newObjective(t TrainingConfig, m model.Model) *objective {
	o := &objective{loss: t.LossType, pooling: t.AlignmentMode, scoring: m.Scoring(), margin: t.Margin, maxViolation: t.MaxViolation, warmup: t.MaxViolationAfter,
		infoNCE: t.Contrastive == ContrastiveInfoNCE, temperature: float32(t.Temperature)}
	o.pair, _ = m.(model.PairLosser)
	if o.loss == LossMatchingAlignment {
		o.logVars = tensor.New(2).SetRequiresGrad(true)
	}
	return o
}

// Params returns the objective's trainable parameters.
func (o *objective) Params() []nn.Named {
	if o.logVars == nil {
		return nil
	}
	return []nn.Named{{Name: logVarsName, T: o.logVars}}
}

// Loss is the objective for a batch of B matching (image, caption) pairs:
// image i matches caption i, tx are the captions (for a PairLosser's term).
// imgItems are the images' indices in the training split (InfoNCE leaves
// pairs of the same image out of its softmaxes; nil: all distinct). iter
// is the training iteration (for the max-violation warm-up).
func (o *objective) Loss(tp *tensor.Tape, img, txt *model.Encoded, tx model.Texts, imgItems []int, iter int) *tensor.Tensor {
	mv := o.maxViolation && iter >= o.warmup
	var same *tensor.Tensor
	if o.infoNCE {
		same = sameImage(imgItems)
	}
	contrast := func(s *tensor.Tensor) *tensor.Tensor {
		if o.infoNCE {
			return InfoNCELoss(tp, s, o.temperature, same)
		}
		return ContrastiveLoss(tp, s, o.margin, mv)
	}
	hinge := func(s model.Scoring) *tensor.Tensor {
		return contrast(model.Similarity(tp, img, txt, s))
	}
	var loss *tensor.Tensor
	switch {
	case o.loss == LossMatching && img.Spaces != nil:
		if len(img.Spaces) != len(txt.Spaces) {
			panic(&tensor.ShapeError{Op: "objective", Msg: fmt.Sprintf("%d image spaces, %d caption spaces", len(img.Spaces), len(txt.Spaces))})
		}
		for k, is := range img.Spaces {
			l := contrast(tp.MatMul(is, txt.Spaces[k], false, true))
			if loss == nil {
				loss = l
			} else {
				loss = tp.Add(loss, l)
			}
		}
	case o.loss == LossMatching:
		loss = hinge(o.scoring)
	case o.loss == LossMatchingAlignment:
		loss = UncertaintyWeighted(tp, o.logVars, hinge(o.scoring), hinge(o.pooling))
	default:
		loss = hinge(o.pooling)
	}
	if o.pair != nil {
		if p := o.pair.PairLoss(tp, img, tx); p != nil {
			loss = tp.Add(loss, tp.Reshape(p))
		}
	}
	for _, p := range []*tensor.Tensor{img.Penalty, txt.Penalty} {
		if p != nil {
			loss = tp.Add(loss, tp.Reshape(p))
		}
	}
	return loss
}

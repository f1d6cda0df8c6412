package train

import (
	"fmt"
	"math"
)

// A model collapses when its encoders map every input to (nearly) the same
// embedding: every similarity is then alike, each hinge of the loss equals
// the margin, and recall sits at chance. It happens from random weights
// under the hardest-negative loss, and whenever the learning rate is too
// high, or decays to nothing before the encoders have learnt to tell their
// inputs apart. The guard below notices it at validation time and says so
// in the log; it does not stop the run.

// collapseCosine is the mean cosine between different items' global
// vectors above which the embeddings count as alike. The collapsed TERN of
// the real-data issue measured 0.990 between its captions; the same model
// learning measured below 0.9 within its first 100 iterations.
const collapseCosine = 0.95

// chanceRSum returns the expected rsum of a random ranking of n images
// with c captions each: R@K is the chance that one of an image's c
// captions is among the first K of the n c captions (image to text), and
// K / n (text to image), for K = 1, 5, 10, in percent.
func chanceRSum(n, c int) float64 {
	total := 0.0
	for _, k := range []int{1, 5, 10} {
		miss := 1.0 // no caption of the image among the first k
		for j := 0; j < k && j < n*c; j++ {
			miss *= math.Max(0, float64(n*c-c-j)) / float64(n*c-j)
		}
		total += 1 - miss + math.Min(1, float64(k)/float64(n))
	}
	return 100 * total
}

// collapseLoss is the loss of a collapsed model on a batch of b pairs: every
// one of the 2 b (b-1) hinges (both directions, the sum over negatives) or
// the 2 b hardest ones equals the margin.
func collapseLoss(b int, margin float32, hardest bool) float64 {
	if hardest {
		return 2 * float64(b) * float64(margin)
	}
	return 2 * float64(b) * float64(b-1) * float64(margin)
}

// meanCosine returns the mean cosine between the n unit vectors of width
// dim in v, over all pairs of different vectors: (|sum v|^2 - n) / (n (n-1)).
// It is NaN for fewer than two vectors.
func meanCosine(v []float32, dim int) float64 {
	n := len(v) / max(dim, 1)
	if n < 2 {
		return math.NaN()
	}
	sum := make([]float64, dim)
	self := 0.0
	for i := 0; i < n; i++ {
		for j, x := range v[i*dim : (i+1)*dim] {
			sum[j] += float64(x)
			self += float64(x) * float64(x)
		}
	}
	total := 0.0
	for _, s := range sum {
		total += s * s
	}
	return (total - self) / float64(n*(n-1))
}

// collapseWarning returns, when the validation r shows a model that has
// collapsed or never left its start (recall below 1.5 times chance, and
// its embeddings alike or its loss stuck at the collapse value), a sentence
// that says what was measured and what to try; "" otherwise. chance is the
// validation set's chance rsum (chanceRSum); stuckLoss is the training
// loss of a collapsed model when the loss has stayed there (stuckLoss), 0
// otherwise.
func collapseWarning(r Record, chance, stuckLoss float64) string {
	if r.RSum >= 1.5*chance {
		if stuckLoss > 0 {
			// Recall above chance, yet the training batches' matches score
			// no higher than their negatives: every score has gathered
			// within the margin of one value (a hardest-negative hinge on
			// extracted photo features put 1,000 images' scores within
			// 0.004 of each other), which ranks by noise.
			return fmt.Sprintf("the training loss %.4g is stuck near %.4g, its value when every score is the same: the scores have collapsed onto one value "+
				"(rsum %.1f, chance %.1f) and rank by noise. Train with training.contrastive: infonce (configs/teran-photos.yaml), "+
				"or lengthen training.max-violation-after", r.Loss, stuckLoss, r.RSum, chance)
		}
		return ""
	}
	var why string
	switch {
	case r.ImgCos > collapseCosine && r.TxtCos > collapseCosine:
		why = fmt.Sprintf("the image and caption embeddings are all alike (mean cosine between different items: images %.3f, captions %.3f)", r.ImgCos, r.TxtCos)
	case r.ImgCos > collapseCosine:
		why = fmt.Sprintf("the image embeddings are all alike (mean cosine between different images %.3f)", r.ImgCos)
	case r.TxtCos > collapseCosine:
		why = fmt.Sprintf("the caption embeddings are all alike (mean cosine between different captions %.3f)", r.TxtCos)
	case stuckLoss > 0:
		why = fmt.Sprintf("the training loss %.4g is stuck near %.4g, its value when every score is the same", r.Loss, stuckLoss)
	default:
		return ""
	}
	return why + fmt.Sprintf(" and recall is at chance (rsum %.1f, chance %.1f). Check that the learning rate (now %.3g) has not decayed to nothing "+
		"(training.step-unit: iterations for small data sets), lower training.lr, or lengthen training.max-violation-after", r.RSum, chance, r.LR)
}

// stuckLoss returns the training loss of a collapsed model (collapseLoss)
// when the mean loss of the last three validation periods in history
// (which ends with the validation at iter) has been between 95% of it and
// stuckAbove times it,
// so that a model that starts there and learns is not flagged; 0 otherwise,
// and for losses whose value at a collapse is not a fixed number (the
// uncertainty-weighted matching+alignment loss).
func stuckLoss(cfg Config, iter, bs int, history []Record) float64 {
	t := cfg.Training
	if t.LossType == LossMatchingAlignment || len(history) < 3 {
		return 0
	}
	want := collapseLoss(bs, t.Margin, t.MaxViolation && iter > t.MaxViolationAfter)
	if t.Contrastive == ContrastiveInfoNCE {
		want = math.Log(float64(bs)) // every softmax uniform over the batch
	}
	for _, r := range history[len(history)-3:] {
		// Near it: a loss far above it is not this loss alone (MEMBER
		// adds its caption generation's, hundreds where InfoNCE's
		// collapse is log(batch)), and says nothing of a collapse.
		if r.Loss < 0.95*want || r.Loss > stuckAbove*want {
			return 0
		}
	}
	return want
}

// stuckAbove bounds the losses that count as stuck at a collapse: at most
// this many times its value (a model at its random start sits near it,
// within a few percent).
const stuckAbove = 1.25

// collapseCheck returns the collapse warning of the last validation in
// history when the last three validations all show one (collapseWarning)
// and the first of them came after the lr warm-up: a model at its start
// looks collapsed too (alike embeddings, recall at chance) until the lr
// has risen and it has had a few validation periods to learn.
func collapseCheck(history []Record, chance, stuckLoss float64, warmup int) string {
	if len(history) < 3 || history[len(history)-3].Iter < warmup {
		return ""
	}
	var msg string
	for _, r := range history[len(history)-3:] {
		if msg = collapseWarning(r, chance, stuckLoss); msg == "" {
			return ""
		}
	}
	return msg
}

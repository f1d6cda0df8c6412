package optim

import (
	"math"

	"github.com/xmr-project/xmr/tensor"
)

// GradNorm returns the L2 norm of all the parameters' gradients taken as one
// vector, accumulated in float64. Parameters without a gradient are skipped.
func GradNorm(params []*tensor.Tensor) float64 {
	var jobs []job
	for i, p := range params {
		jobs = appendChunks(jobs, i, len(p.Grad))
	}
	sums := make([]float64, len(jobs))
	runJobs(len(jobs), func(k int) {
		j := jobs[k]
		var s float64
		for _, g := range params[j.p].Grad[j.lo:j.hi] {
			s += float64(g) * float64(g)
		}
		sums[k] = s
	})
	var total float64
	for _, s := range sums {
		total += s
	}
	return math.Sqrt(total)
}

// ClipGradNorm scales the gradients of params so that their joint L2 norm is
// at most maxNorm, as torch.nn.utils.clip_grad_norm_: when the norm exceeds
// maxNorm every gradient is multiplied by maxNorm/(norm+1e-6). It returns the
// norm before clipping. A non-finite norm, or maxNorm <= 0, leaves the
// gradients unchanged (the caller decides what to do with a NaN).
func ClipGradNorm(params []*tensor.Tensor, maxNorm float64) (totalNorm float64) {
	c, totalNorm := ClipScale(params, maxNorm)
	if c == 1 {
		return totalNorm
	}
	var jobs []job
	for i, p := range params {
		jobs = appendChunks(jobs, i, len(p.Grad))
	}
	runJobs(len(jobs), func(k int) {
		j := jobs[k]
		g := params[j.p].Grad[j.lo:j.hi]
		for i := range g {
			g[i] *= c
		}
	})
	return totalNorm
}

// ClipScale returns the factor by which ClipGradNorm(params, maxNorm) would
// multiply every gradient (1 when it would leave them unchanged), and the
// gradients' norm, without changing them. Adam.StepAndZeroGradScaled takes
// the factor and applies it in its own pass over the gradients, which
// saves ClipGradNorm's pass over them with the same result.
func ClipScale(params []*tensor.Tensor, maxNorm float64) (scale float32, totalNorm float64) {
	totalNorm = GradNorm(params)
	if !(maxNorm > 0) || math.IsNaN(totalNorm) || math.IsInf(totalNorm, 0) {
		return 1, totalNorm
	}
	coef := maxNorm / (totalNorm + 1e-6)
	if coef >= 1 {
		return 1, totalNorm
	}
	return float32(coef), totalNorm
}

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
		sums[k] = sumSquares(params[j.p].Grad[j.lo:j.hi])
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

// sumSquares returns the sum of the squares of g: float32 sums over blocks
// of 1024 elements in eight independent lanes (a float64 sum one element
// after another waits on each addition: 8% of the non-GEMM time of a
// paper-size step), added up in float64; a block whose float32
// sum overflows is summed again in float64.
func sumSquares(g []float32) float64 {
	var total float64
	for len(g) > 0 {
		blk := g[:min(len(g), 1024)]
		g0 := blk
		g = g[len(blk):]
		var s0, s1, s2, s3, s4, s5, s6, s7 float32
		for len(blk) >= 8 {
			b := blk[:8:8]
			s0 += b[0] * b[0]
			s1 += b[1] * b[1]
			s2 += b[2] * b[2]
			s3 += b[3] * b[3]
			s4 += b[4] * b[4]
			s5 += b[5] * b[5]
			s6 += b[6] * b[6]
			s7 += b[7] * b[7]
			blk = blk[8:]
		}
		for _, v := range blk {
			s0 += v * v
		}
		s := (s0 + s1) + (s2 + s3) + (s4 + s5) + (s6 + s7)
		if math.IsInf(float64(s), 0) { // squares beyond float32's range
			var s64 float64
			for _, v := range g0 {
				s64 += float64(v) * float64(v)
			}
			total += s64
			continue
		}
		total += float64(s)
	}
	return total
}

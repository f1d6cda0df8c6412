package tensor

import "math"

// OrderViolation returns the order violation of every row of a (M, K)
// against every row of b (N, K), shape (M, N):
//
//	out[i, j] = sum over k of max(0, a[i, k] - b[j, k])^2
//
// the squared norm of the part of a[i] that does not lie below b[j]; minus
// it is the order-embedding similarity of Vendrov et al. that SEAM scores
// with (model.Order, a = images, b = captions). Rows run in parallel; the
// kernel is OrderViolations.
func (tp *Tape) OrderViolation(a, b *Tensor) *Tensor {
	if a.Dims() != 2 || b.Dims() != 2 || a.Shape[1] != b.Shape[1] {
		panic(shapeErr("OrderViolation", "want (M, K) and (N, K), have %v and %v", a.Shape, b.Shape))
	}
	m, n, k := a.Shape[0], b.Shape[0], a.Shape[1]
	out := tp.newTensor([]int{m, n})
	parallelFor(m, n*k, func(lo, hi int) {
		OrderViolations(out.Data[lo*n:], n, a.Data[lo*k:hi*k], hi-lo, b.Data, n, k)
	})
	if !tp.needs(a, b) {
		return out
	}
	tp.record(out, func(g []float32) {
		// With r = max(0, a[i, k] - b[j, k]): d out[i, j] / d a[i, k] = 2r
		// and d / d b[j, k] = -2r. Rows of a, then rows of b, in parallel.
		if a.requiresGrad {
			ga := tp.grad(a)
			parallelFor(m, n*k, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					orderGradRow(ga[i*k:(i+1)*k], a.Data[i*k:(i+1)*k], b.Data, g[i*n:], 1, 1)
				}
			})
		}
		if b.requiresGrad {
			gb := tp.grad(b)
			parallelFor(n, m*k, func(lo, hi int) {
				for j := lo; j < hi; j++ {
					orderGradRow(gb[j*k:(j+1)*k], b.Data[j*k:(j+1)*k], a.Data, g[j:], n, -1)
				}
			})
		}
	})
	return out
}

// orderGradRow adds to dst the gradient of the violations of one row x
// against every row y_r of others (rows as long as x), weighted by
// g[r*gStride]: sign 1 for a row x of a, sum over r of g_r * 2 max(0, x -
// y_r); sign -1 for a row x of b, minus the sum of g_r * 2 max(0, y_r - x).
func orderGradRow(dst, x, others, g []float32, gStride int, sign float32) {
	k := len(x)
	for r := 0; r*k < len(others); r++ {
		w := sign * g[r*gStride]
		if w == 0 {
			continue
		}
		y := others[r*k : (r+1)*k]
		y = y[:k]
		for d, xv := range x {
			dst[d] += w * twiceRelu(sign*(xv-y[d]))
		}
	}
}

// OrderViolations is the kernel of OrderViolation on flat row-major arrays:
// it writes the violations of rows a (m x k) against rows b (n x k) to dst
// (m rows of stride ldDst), on the calling goroutine. Four rows of a share
// each pass over a row of b, and max(0, x)^2 is computed without a branch
// as (x + |x|)^2 / 4.
func OrderViolations(dst []float32, ldDst int, a []float32, m int, b []float32, n, k int) {
	i := 0
	for ; i+4 <= m; i += 4 {
		a0, a1, a2, a3 := a[i*k:(i+1)*k], a[(i+1)*k:(i+2)*k], a[(i+2)*k:(i+3)*k], a[(i+3)*k:(i+4)*k]
		for j := 0; j < n; j++ {
			s0, s1, s2, s3 := violations4(a0, a1, a2, a3, b[j*k:(j+1)*k])
			dst[i*ldDst+j], dst[(i+1)*ldDst+j], dst[(i+2)*ldDst+j], dst[(i+3)*ldDst+j] = s0, s1, s2, s3
		}
	}
	for ; i < m; i++ {
		x := a[i*k : (i+1)*k]
		for j := 0; j < n; j++ {
			y := b[j*k : (j+1)*k]
			var s float32
			for d, xv := range x {
				v := twiceRelu(xv - y[d])
				s += v * v
			}
			dst[i*ldDst+j] = s / 4
		}
	}
}

// violations4 returns the violations of rows x0..x3 against y.
func violations4(x0, x1, x2, x3, y []float32) (s0, s1, s2, s3 float32) {
	k := len(y)
	x0, x1, x2, x3 = x0[:k], x1[:k], x2[:k], x3[:k]
	for d, yv := range y {
		v0 := twiceRelu(x0[d] - yv)
		v1 := twiceRelu(x1[d] - yv)
		v2 := twiceRelu(x2[d] - yv)
		v3 := twiceRelu(x3[d] - yv)
		s0 += v0 * v0
		s1 += v1 * v1
		s2 += v2 * v2
		s3 += v3 * v3
	}
	return s0 / 4, s1 / 4, s2 / 4, s3 / 4
}

// twiceRelu returns 2 max(0, v) as v + |v|, clearing the sign bit instead
// of branching (twice as fast as the max builtin on random signs).
func twiceRelu(v float32) float32 {
	return v + math.Float32frombits(math.Float32bits(v)&^(1<<31))
}

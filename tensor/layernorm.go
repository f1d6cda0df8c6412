package tensor

import "math"

// LayerNorm normalises a over its last dimension to zero mean and unit
// variance (biased variance, as PyTorch), then applies gamma and beta
// (shape (D,); either may be nil).
func (tp *Tape) LayerNorm(a, gamma, beta *Tensor, eps float32) *Tensor {
	d := a.Shape[a.Dims()-1]
	if gamma != nil && (gamma.Numel() != d) || beta != nil && beta.Numel() != d {
		panic(shapeErr("LayerNorm", "input %v needs gamma and beta of %d elements", a.Shape, d))
	}
	rows := len(a.Data) / max(d, 1)
	out := tp.newTensor(a.Shape)
	xhat := tp.alloc(len(a.Data))
	rstd := make([]float32, rows)
	parallelFor(rows, d*4, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			x := a.Data[r*d : (r+1)*d]
			m := sumLanes(x) / float32(d)
			vr := float64(sumSqDev(x, m)) / float64(d)
			rs := float32(1 / math.Sqrt(vr+float64(eps)))
			rstd[r] = rs
			xh := xhat[r*d : (r+1)*d]
			y := out.Data[r*d : (r+1)*d]
			for i, v := range x {
				h := (v - m) * rs
				xh[i] = h
				if gamma != nil {
					h *= gamma.Data[i]
				}
				if beta != nil {
					h += beta.Data[i]
				}
				y[i] = h
			}
		}
	})
	if !tp.needs(a, gamma, beta) {
		if tp != nil {
			tp.put(xhat)
		}
		return out
	}
	tp.record(out, func(g []float32) {
		if gamma != nil && gamma.requiresGrad || beta != nil && beta.requiresGrad {
			var gg, gb []float32
			if gamma != nil && gamma.requiresGrad {
				gg = tp.grad(gamma)
			}
			if beta != nil && beta.requiresGrad {
				gb = tp.grad(beta)
			}
			// Parallel over columns so that writes do not race.
			parallelFor(d, rows*2, func(lo, hi int) {
				for r := 0; r < rows; r++ {
					gr := g[r*d : (r+1)*d]
					xh := xhat[r*d : (r+1)*d]
					for i := lo; i < hi; i++ {
						if gg != nil {
							gg[i] += gr[i] * xh[i]
						}
						if gb != nil {
							gb[i] += gr[i]
						}
					}
				}
			})
		}
		if !a.requiresGrad {
			return
		}
		ga := tp.grad(a)
		parallelFor(rows, d*6, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				gr := g[r*d : (r+1)*d]
				xh := xhat[r*d : (r+1)*d]
				// dxhat = g * gamma; dx = rstd * (dxhat - mean(dxhat) - xhat*mean(dxhat*xhat))
				s1, s2 := gradSums(gr, xh, gamma)
				s1 /= float32(d)
				s2 /= float32(d)
				rs := rstd[r]
				dst := ga[r*d : (r+1)*d]
				for i := range gr {
					dh := gr[i]
					if gamma != nil {
						dh *= gamma.Data[i]
					}
					dst[i] += rs * (dh - s1 - xh[i]*s2)
				}
			}
		})
	})
	// xhat lives until Reset: register it as a tape buffer.
	tp.live = append(tp.live, &Tensor{Data: xhat, Shape: []int{len(xhat)}})
	return out
}

// sumLanes returns the sum of x in eight independent float32 lanes: one
// running sum waits on each addition, which made LayerNorm's statistics
// latency-bound.
func sumLanes(x []float32) float32 {
	var s [8]float32
	for len(x) >= 8 {
		b := x[:8:8]
		s[0] += b[0]
		s[1] += b[1]
		s[2] += b[2]
		s[3] += b[3]
		s[4] += b[4]
		s[5] += b[5]
		s[6] += b[6]
		s[7] += b[7]
		x = x[8:]
	}
	for _, v := range x {
		s[0] += v
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

// sumSqDev returns the sum of (x - m)^2, in eight lanes as sumLanes.
func sumSqDev(x []float32, m float32) float32 {
	var s [8]float32
	for len(x) >= 8 {
		b := x[:8:8]
		d0, d1, d2, d3 := b[0]-m, b[1]-m, b[2]-m, b[3]-m
		d4, d5, d6, d7 := b[4]-m, b[5]-m, b[6]-m, b[7]-m
		s[0] += d0 * d0
		s[1] += d1 * d1
		s[2] += d2 * d2
		s[3] += d3 * d3
		s[4] += d4 * d4
		s[5] += d5 * d5
		s[6] += d6 * d6
		s[7] += d7 * d7
		x = x[8:]
	}
	for _, v := range x {
		s[0] += (v - m) * (v - m)
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

// gradSums returns sum(dh) and sum(dh * xh) for dh = g * gamma (g when
// gamma is nil), in four lanes each.
func gradSums(g, xh []float32, gamma *Tensor) (s1, s2 float32) {
	var a, b [4]float32
	xh = xh[:len(g)]
	var gm []float32
	if gamma != nil {
		gm = gamma.Data[:len(g)]
	}
	i := 0
	for ; i+4 <= len(g); i += 4 {
		d0, d1, d2, d3 := g[i], g[i+1], g[i+2], g[i+3]
		if gm != nil {
			d0, d1, d2, d3 = d0*gm[i], d1*gm[i+1], d2*gm[i+2], d3*gm[i+3]
		}
		a[0] += d0
		a[1] += d1
		a[2] += d2
		a[3] += d3
		b[0] += d0 * xh[i]
		b[1] += d1 * xh[i+1]
		b[2] += d2 * xh[i+2]
		b[3] += d3 * xh[i+3]
	}
	for ; i < len(g); i++ {
		dh := g[i]
		if gm != nil {
			dh *= gm[i]
		}
		a[0] += dh
		b[0] += dh * xh[i]
	}
	return (a[0] + a[1]) + (a[2] + a[3]), (b[0] + b[1]) + (b[2] + b[3])
}

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
			var mean, vr float64
			for _, v := range x {
				mean += float64(v)
			}
			mean /= float64(d)
			for _, v := range x {
				dv := float64(v) - mean
				vr += dv * dv
			}
			vr /= float64(d)
			rs := float32(1 / math.Sqrt(vr+float64(eps)))
			rstd[r] = rs
			xh := xhat[r*d : (r+1)*d]
			y := out.Data[r*d : (r+1)*d]
			m := float32(mean)
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
				var s1, s2 float32
				for i := range gr {
					dh := gr[i]
					if gamma != nil {
						dh *= gamma.Data[i]
					}
					s1 += dh
					s2 += dh * xh[i]
				}
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

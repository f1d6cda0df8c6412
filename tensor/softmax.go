package tensor

import (
	"math"
)

// Softmax normalises exp(a) over axis. With a mask (broadcastable to a, 0 =
// excluded) excluded entries get probability 0; a slice with no allowed entry
// is all zeros.
func (tp *Tape) Softmax(a *Tensor, axis int, mask *Tensor) *Tensor {
	return tp.softmax("Softmax", a, axis, mask, false)
}

// LogSoftmax returns log(Softmax(a)); masked entries are -Inf (and pass no
// gradient).
func (tp *Tape) LogSoftmax(a *Tensor, axis int, mask *Tensor) *Tensor {
	return tp.softmax("LogSoftmax", a, axis, mask, true)
}

func (tp *Tape) softmax(op string, a *Tensor, axis int, mask *Tensor, logOut bool) *Tensor {
	axis = normAxis(op, axis, a.Dims())
	outer, n, inner := splitAxis(a.Shape, axis)
	var md []float32
	if mask != nil {
		md = expandMask(op, mask, a.Shape)
	}
	out := tp.newTensor(a.Shape)
	negInf := float32(math.Inf(-1))
	parallelFor(outer*inner, n*8, func(lo, hi int) {
		for q := lo; q < hi; q++ {
			o, j := q/inner, q%inner
			base := o*n*inner + j
			mx := negInf
			for k := 0; k < n; k++ {
				idx := base + k*inner
				if md != nil && md[idx] == 0 {
					continue
				}
				mx = max(mx, a.Data[idx])
			}
			var sum float64
			for k := 0; k < n; k++ {
				idx := base + k*inner
				if (md != nil && md[idx] == 0) || mx == negInf {
					out.Data[idx] = 0
					continue
				}
				e := math.Exp(float64(a.Data[idx] - mx))
				out.Data[idx] = float32(e)
				sum += e
			}
			if sum == 0 {
				if logOut {
					for k := 0; k < n; k++ {
						out.Data[base+k*inner] = negInf
					}
				}
				continue
			}
			if logOut {
				ls := float32(math.Log(sum))
				for k := 0; k < n; k++ {
					idx := base + k*inner
					if md != nil && md[idx] == 0 {
						out.Data[idx] = negInf
					} else {
						out.Data[idx] = a.Data[idx] - mx - ls
					}
				}
			} else {
				inv := float32(1 / sum)
				for k := 0; k < n; k++ {
					out.Data[base+k*inner] *= inv
				}
			}
		}
	})
	if tp.needs(a) {
		tp.record(out, func(g []float32) {
			ga := tp.grad(a)
			parallelFor(outer*inner, n*4, func(lo, hi int) {
				for q := lo; q < hi; q++ {
					o, j := q/inner, q%inner
					base := o*n*inner + j
					if logOut {
						// dx = g - softmax * sum(g)
						var sg float32
						for k := 0; k < n; k++ {
							idx := base + k*inner
							if md == nil || md[idx] != 0 {
								sg += g[idx]
							}
						}
						for k := 0; k < n; k++ {
							idx := base + k*inner
							if (md != nil && md[idx] == 0) || math.IsInf(float64(out.Data[idx]), -1) {
								continue
							}
							ga[idx] += g[idx] - float32(math.Exp(float64(out.Data[idx])))*sg
						}
						continue
					}
					// dx = y * (g - sum(g*y))
					var dot float32
					for k := 0; k < n; k++ {
						idx := base + k*inner
						dot += g[idx] * out.Data[idx]
					}
					for k := 0; k < n; k++ {
						idx := base + k*inner
						ga[idx] += out.Data[idx] * (g[idx] - dot)
					}
				}
			})
		})
	}
	return out
}

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
			tp.pool[len(xhat)] = append(tp.pool[len(xhat)], xhat)
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

// CrossEntropy returns the mean negative log-likelihood of targets under
// softmax(logits) for logits (N, C) and N class indices; targets equal to
// ignoreIndex do not count. With no counted target the loss is 0.
func (tp *Tape) CrossEntropy(logits *Tensor, targets []int32, ignoreIndex int32) *Tensor {
	if logits.Dims() != 2 || logits.Shape[0] != len(targets) {
		panic(shapeErr("CrossEntropy", "logits %v need shape (N, C) with N = %d targets", logits.Shape, len(targets)))
	}
	n, c := logits.Shape[0], logits.Shape[1]
	for i, t := range targets {
		if t != ignoreIndex && (t < 0 || int(t) >= c) {
			panic(shapeErr("CrossEntropy", "target %d of row %d outside [0, %d)", t, i, c))
		}
	}
	lsm := tp.LogSoftmax(logits, 1, nil)
	out := tp.newTensor([]int{})
	var loss float64
	cnt := 0
	for i, t := range targets {
		if t == ignoreIndex {
			continue
		}
		loss -= float64(lsm.Data[i*c+int(t)])
		cnt++
	}
	if cnt > 0 {
		loss /= float64(cnt)
	}
	out.Data[0] = float32(loss)
	if tp.needs(lsm) {
		tp.record(out, func(g []float32) {
			gl := tp.grad(lsm)
			for i, t := range targets {
				if t != ignoreIndex {
					gl[i*c+int(t)] -= g[0] / float32(cnt)
				}
			}
		})
	}
	_ = n
	return out
}

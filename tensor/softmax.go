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
	am := newAxisMask(op, mask, a.Shape, axis)
	out := tp.newTensor(a.Shape)
	negInf := float32(math.Inf(-1))
	parallelFor(outer*inner, n*8, func(lo, hi int) {
		for q := lo; q < hi; q++ {
			o, j := q/inner, q%inner
			base, mb := o*n*inner+j, am.base(o, j)
			mx := negInf
			for k := 0; k < n; k++ {
				idx := base + k*inner
				if am.masked(mb, k) {
					continue
				}
				mx = max(mx, a.Data[idx])
			}
			var sum float64
			for k := 0; k < n; k++ {
				idx := base + k*inner
				if am.masked(mb, k) || mx == negInf {
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
					if am.masked(mb, k) {
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
					base, mb := o*n*inner+j, am.base(o, j)
					if logOut {
						// dx = g - softmax * sum(g)
						var sg float32
						for k := 0; k < n; k++ {
							idx := base + k*inner
							if !am.masked(mb, k) {
								sg += g[idx]
							}
						}
						for k := 0; k < n; k++ {
							idx := base + k*inner
							if am.masked(mb, k) || math.IsInf(float64(out.Data[idx]), -1) {
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

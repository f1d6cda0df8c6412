package tensor

import (
	"math"
)

// Fused kernels for the layers that dominate training time: an affine map
// with its bias (and activation) around one GEMM, residual additions with
// dropout, and a dropout with a bit mask drawn in parallel. Each op writes
// its forward and backward side by side, with no per-element closures and no
// branches on data.

// actKind selects the activation applied by linearAct.
type actKind int

const (
	actNone actKind = iota
	actReLU
	actGELU
)

// Linear returns x w^T + b for x (..., In), w (Out, In) as PyTorch stores it
// and b (Out) or nil: (..., Out). The bias is loaded into the output before
// one GEMM accumulates onto it.
func (tp *Tape) Linear(x, w, b *Tensor) *Tensor { return tp.linearAct("Linear", x, w, b, actNone) }

// LinearReLU returns max(0, x w^T + b), fused (see Linear).
func (tp *Tape) LinearReLU(x, w, b *Tensor) *Tensor {
	return tp.linearAct("LinearReLU", x, w, b, actReLU)
}

// LinearGELU returns GELU(x w^T + b) with the exact normal CDF, fused (see
// Linear).
func (tp *Tape) LinearGELU(x, w, b *Tensor) *Tensor {
	return tp.linearAct("LinearGELU", x, w, b, actGELU)
}

func (tp *Tape) linearAct(op string, x, w, b *Tensor, act actKind) *Tensor {
	if w.Dims() != 2 {
		panic(shapeErr(op, "weight %v must be (Out, In) for input %v", w.Shape, x.Shape))
	}
	if x.Dims() < 1 || x.Shape[x.Dims()-1] != w.Shape[1] {
		panic(shapeErr(op, "input %v does not fit weight %v (want (..., %d))", x.Shape, w.Shape, w.Shape[1]))
	}
	nOut, nIn := w.Shape[0], w.Shape[1]
	if b != nil && b.Numel() != nOut {
		panic(shapeErr(op, "bias %v does not fit weight %v", b.Shape, w.Shape))
	}
	rows := prod(x.Shape[:x.Dims()-1])
	outShape := append(append([]int(nil), x.Shape[:x.Dims()-1]...), nOut)
	out := tp.newTensor(outShape)
	beta := float32(0)
	if b != nil {
		parallelFor(rows, nOut, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				copy(out.Data[r*nOut:(r+1)*nOut], b.Data)
			}
		})
		beta = 1
	}
	gemm(false, true, rows, nOut, nIn, 1, x.Data, nIn, w.Data, nIn, beta, out.Data, nOut)
	// pre keeps the pre-activation for GELU's backward (ReLU reads out).
	var pre []float32
	switch act {
	case actReLU:
		reluInPlace(out.Data)
	case actGELU:
		if tp.needs(x, w, b) {
			pre = tp.alloc(len(out.Data))
			copy(pre, out.Data)
			tp.keepBuf(pre)
		}
		od := out.Data
		parallelFor(len(od), 16, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				od[i] = geluF(od[i])
			}
		})
	}
	if !tp.needs(x, w, b) {
		return out
	}
	tp.record(out, func(g []float32) {
		if act != actNone {
			// dz = g * act'(z), in a scratch buffer returned on Reset.
			dz := tp.alloc(len(g))
			defer tp.free(dz)
			od := out.Data
			parallelFor(len(g), 4, func(lo, hi int) {
				if act == actReLU {
					for i := lo; i < hi; i++ {
						dz[i] = math.Float32frombits(math.Float32bits(g[i]) & positiveMask(od[i]))
					}
					return
				}
				for i := lo; i < hi; i++ {
					dz[i] = g[i] * geluGrad(pre[i])
				}
			})
			g = dz
		}
		// The weight's gradient first: it may go to the worker while this
		// goroutine computes the input's (async.go).
		if w.requiresGrad {
			tp.deferGEMM(w, true, false, nOut, nIn, rows, g, nOut, x.Data, nIn, tp.grad(w), nIn)
		}
		if x.requiresGrad {
			gemm(false, false, rows, nIn, nOut, 1, g, nOut, w.Data, nIn, 1, tp.grad(x), nIn)
		}
		if b != nil && b.requiresGrad {
			colSumInto(tp.grad(b), g, rows, nOut)
		}
	})
	return out
}

// reluInPlace sets negative entries of x to +0, without branches (the signs
// of pre-activations are random, which defeats branch prediction).
func reluInPlace(x []float32) {
	parallelFor(len(x), 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			u := math.Float32bits(x[i])
			x[i] = math.Float32frombits(u &^ uint32(int32(u)>>31))
		}
	})
}

// positiveMask returns all ones when a ReLU output y (>= +0) is positive
// and 0 when it is +0: the ReLU derivative as a bit mask.
func positiveMask(y float32) uint32 {
	u := math.Float32bits(y)
	return uint32(int32(u|-u) >> 31)
}

// colSumInto adds the column sums of g (rows, n) into dst (n).
func colSumInto(dst, g []float32, rows, n int) {
	parallelFor(n, rows, func(lo, hi int) {
		d := dst[lo:hi]
		for r := 0; r < rows; r++ {
			src := g[r*n+lo : r*n+hi]
			for j, v := range src {
				d[j] += v
			}
		}
	})
}

// ReLU returns max(a, 0), without per-element closures.
func (tp *Tape) ReLU(a *Tensor) *Tensor {
	out := tp.newTensor(a.Shape)
	od := out.Data
	copy(od, a.Data)
	reluInPlace(od)
	if tp.needs(a) {
		tp.record(out, func(g []float32) {
			ga := tp.grad(a)
			parallelFor(len(g), 1, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					ga[i] += math.Float32frombits(math.Float32bits(g[i]) & positiveMask(od[i]))
				}
			})
		})
	}
	return out
}

// dropMask is a keep/drop decision per element, one bit each.
type dropMask []uint64

// newDropMask draws n keep decisions with drop probability p (resolved to
// 1/65536). It takes one seed from the tape's generator and expands it with
// a counter-based splitmix64, four 16-bit decisions per 64-bit draw, so that
// words are filled in parallel and the mask depends only on the seed.
func (tp *Tape) newDropMask(n int, p float32) dropMask {
	m := make(dropMask, (n+63)/64)
	thr := uint64(math.Round(float64(p) * 65536))
	seed := tp.Rand.Uint64()
	// keep = u >= thr for each 16-bit lane u of a draw, all four at once:
	// lanes 0 and 2 (then 1 and 3) sit in the low halves of two 32-bit
	// lanes, where u + (65536 - thr) carries into bit 16 exactly when
	// u >= thr, and never out of the 32-bit lane.
	const lanes = 0x0000ffff0000ffff
	const carry = 0x0000000100000001
	c := (65536 - thr) * carry
	parallelFor(len(m), 32, func(lo, hi int) {
		for w := lo; w < hi; w++ {
			var bits uint64
			ctr := seed + uint64(w*16)*0x9e3779b97f4a7c15
			for q := 0; q < 16; q++ {
				r := splitmix64(ctr)
				ctr += 0x9e3779b97f4a7c15
				even := ((r&lanes + c) >> 16) & carry      // u0 at bit 0, u2 at 32
				odd := (((r>>16)&lanes + c) >> 16) & carry // u1 at bit 0, u3 at 32
				v := even | odd<<1
				bits |= ((v | v>>30) & 0xf) << (4 * q)
			}
			m[w] = bits
		}
	})
	return m
}

// splitmix64 is the output function of the SplitMix64 generator.
func splitmix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	return z ^ z>>31
}

// dropping reports whether dropout with probability p is active on tp.
func (tp *Tape) dropping(p float32) bool { return tp != nil && tp.Training && p > 0 }

// Dropout zeroes each element with probability p and scales the rest by
// 1/(1-p), drawing the decisions from the tape's Rand (a bit mask, four
// decisions per random word). It is the identity on a nil or non-training
// tape, or when p is 0.
func (tp *Tape) Dropout(a *Tensor, p float32) *Tensor {
	if !tp.dropping(p) {
		return a
	}
	if p >= 1 {
		return tp.Scale(a, 0)
	}
	m := tp.newDropMask(len(a.Data), p)
	scale := 1 / (1 - p)
	out := tp.newTensor(a.Shape)
	ad, od := a.Data, out.Data
	sc := [2]float32{0, scale}
	parallelFor(len(od), 2, func(lo, hi int) {
		m.mulTo(od[lo:hi], ad[lo:hi], lo, sc)
	})
	if tp.needs(a) {
		tp.record(out, func(g []float32) {
			ga := tp.grad(a)
			parallelFor(len(g), 2, func(lo, hi int) {
				m.mulAddTo(ga[lo:hi], g[lo:hi], lo, sc)
			})
		})
	}
	return out
}

// AddDropout returns x + dropout(y, p) for tensors of the same shape: the
// residual connection of a transformer sublayer. On a nil or non-training
// tape it is x + y.
func (tp *Tape) AddDropout(x, y *Tensor, p float32) *Tensor {
	if !sameShape(x.Shape, y.Shape) {
		panic(shapeErr("AddDropout", "shapes %v and %v differ", x.Shape, y.Shape))
	}
	var m dropMask
	scale := float32(1)
	if tp.dropping(p) {
		if p >= 1 {
			p, scale = 1, 0
			m = make(dropMask, (len(y.Data)+63)/64)
		} else {
			m = tp.newDropMask(len(y.Data), p)
			scale = 1 / (1 - p)
		}
	}
	out := tp.newTensor(x.Shape)
	xd, yd, od := x.Data, y.Data, out.Data
	parallelFor(len(od), 2, func(lo, hi int) {
		if m == nil {
			for i := lo; i < hi; i++ {
				od[i] = xd[i] + yd[i]
			}
			return
		}
		m.addMulTo(od[lo:hi], xd[lo:hi], yd[lo:hi], lo, [2]float32{0, scale})
	})
	if tp.needs(x, y) {
		tp.record(out, func(g []float32) {
			if x.requiresGrad {
				gx := tp.grad(x)
				parallelFor(len(g), 1, func(lo, hi int) {
					for i := lo; i < hi; i++ {
						gx[i] += g[i]
					}
				})
			}
			if y.requiresGrad {
				gy := tp.grad(y)
				parallelFor(len(g), 2, func(lo, hi int) {
					if m == nil {
						for i := lo; i < hi; i++ {
							gy[i] += g[i]
						}
						return
					}
					m.mulAddTo(gy[lo:hi], g[lo:hi], lo, [2]float32{0, scale})
				})
			}
		})
	}
	return out
}

// MaskRows multiplies each block x[i, ...] selected by the leading
// dimensions of mask by mask[i]: mask's shape must be a prefix of x's. For
// example x (B, T, H) with a 0/1 mask (B, T) zeroes the padded time steps.
func (tp *Tape) MaskRows(x, mask *Tensor) *Tensor {
	nd := mask.Dims()
	if nd > x.Dims() || !sameShape(mask.Shape, x.Shape[:nd]) {
		panic(shapeErr("MaskRows", "mask %v is not a prefix of input %v", mask.Shape, x.Shape))
	}
	w := prod(x.Shape[nd:])
	out := tp.newTensor(x.Shape)
	for r, mv := range mask.Data {
		src, dst := x.Data[r*w:(r+1)*w], out.Data[r*w:(r+1)*w]
		if mv == 0 {
			clear(dst)
		} else {
			for i, v := range src {
				dst[i] = v * mv
			}
		}
	}
	if tp.needs(x) {
		tp.record(out, func(g []float32) {
			gx := tp.grad(x)
			for r, mv := range mask.Data {
				if mv == 0 {
					continue
				}
				for i := r * w; i < (r+1)*w; i++ {
					gx[i] += g[i] * mv
				}
			}
		})
	}
	return out
}

// Stack joins tensors of one shape along a new dimension at axis: n tensors
// (S...) give (S[:axis]..., n, S[axis:]...).
func (tp *Tape) Stack(axis int, ts ...*Tensor) *Tensor {
	if len(ts) == 0 {
		panic(shapeErr("Stack", "no tensors"))
	}
	shape := ts[0].Shape
	if axis < 0 {
		axis += len(shape) + 1
	}
	if axis < 0 || axis > len(shape) {
		panic(shapeErr("Stack", "axis out of range for shape %v", shape))
	}
	for _, t := range ts[1:] {
		if !sameShape(t.Shape, shape) {
			panic(shapeErr("Stack", "shapes %v and %v differ", shape, t.Shape))
		}
	}
	outer, inner := prod(shape[:axis]), prod(shape[axis:])
	n := len(ts)
	outShape := append(append(append([]int(nil), shape[:axis]...), n), shape[axis:]...)
	out := tp.newTensor(outShape)
	for k, t := range ts {
		for o := 0; o < outer; o++ {
			copy(out.Data[(o*n+k)*inner:(o*n+k+1)*inner], t.Data[o*inner:(o+1)*inner])
		}
	}
	if tp.needs(ts...) {
		tp.record(out, func(g []float32) {
			for k, t := range ts {
				if !t.requiresGrad {
					continue
				}
				gt := tp.grad(t)
				for o := 0; o < outer; o++ {
					src := g[(o*n+k)*inner : (o*n+k+1)*inner]
					dst := gt[o*inner : (o+1)*inner]
					for i, v := range src {
						dst[i] += v
					}
				}
			}
		})
	}
	return out
}

// words calls fn once for each run of the n elements from element off
// that lies in one word of the mask: the run's start j (counted from off),
// its length, and its keep bits from bit 0.
func (m dropMask) words(off, n int, fn func(j, l int, bits uint64)) {
	for j := 0; j < n; {
		i := off + j
		l := min(n-j, 64-i&63)
		fn(j, l, m[i>>6]>>(i&63))
		j += l
	}
}

// mulTo sets dst[j] = src[j] * sc[keep bit of element off+j] for every j
// of dst, a word of the mask at a time: the kernels index a {0, scale}
// pair with the bit instead of branching on random data.
func (m dropMask) mulTo(dst, src []float32, off int, sc [2]float32) {
	src = src[:len(dst)]
	m.words(off, len(dst), func(j, l int, bits uint64) {
		d, s := dst[j:j+l], src[j:j+l]
		for k := range d {
			d[k] = s[k] * sc[bits&1]
			bits >>= 1
		}
	})
}

// mulAddTo adds src[j] * sc[keep bit of element off+j] to dst[j].
func (m dropMask) mulAddTo(dst, src []float32, off int, sc [2]float32) {
	src = src[:len(dst)]
	m.words(off, len(dst), func(j, l int, bits uint64) {
		d, s := dst[j:j+l], src[j:j+l]
		for k := range d {
			d[k] += s[k] * sc[bits&1]
			bits >>= 1
		}
	})
}

// addMulTo sets dst[j] = x[j] + y[j] * sc[keep bit of element off+j].
func (m dropMask) addMulTo(dst, x, y []float32, off int, sc [2]float32) {
	x, y = x[:len(dst)], y[:len(dst)]
	m.words(off, len(dst), func(j, l int, bits uint64) {
		d, a, b := dst[j:j+l], x[j:j+l], y[j:j+l]
		for k := range d {
			d[k] = a[k] + b[k]*sc[bits&1]
			bits >>= 1
		}
	})
}

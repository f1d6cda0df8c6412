package tensor

import (
	"math"
)

// broadcastShape returns the numpy-style broadcast of two shapes.
func broadcastShape(op string, a, b []int) []int {
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := 0; i < n; i++ {
		da, db := 1, 1
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da == db, db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			panic(shapeErr(op, "shapes %v and %v do not broadcast", a, b))
		}
	}
	return out
}

// bcastStrides returns strides of shape (right-aligned into an out shape of
// rank n) with 0 for broadcast dimensions.
func bcastStrides(shape, out []int) []int {
	st := make([]int, len(out))
	own := stridesOf(shape)
	off := len(out) - len(shape)
	for i := range shape {
		if shape[i] != 1 || out[off+i] == 1 {
			st[off+i] = own[i]
		}
	}
	return st
}

// bcastIndex maps every output index to an input offset. For the common
// cases it avoids the table: same shape (identity) or trailing broadcast.
type bcastIndex struct {
	kind  int // 0 identity, 1 modulo (input is a suffix), 2 scalar, 3 general, 4 division (input is a prefix)
	mod   int // the modulus of kind 1, the divisor of kind 4
	table []int32
}

func makeBcastIndex(in, out []int) bcastIndex {
	nIn, nOut := prod(in), prod(out)
	if nIn == nOut {
		return bcastIndex{kind: 0}
	}
	if nIn == 1 {
		return bcastIndex{kind: 2}
	}
	// Is in (without leading 1s) equal to a suffix of out?
	k := 0
	for k < len(in) && in[k] == 1 {
		k++
	}
	suf := in[k:]
	if len(suf) <= len(out) && sameShape(suf, out[len(out)-len(suf):]) {
		return bcastIndex{kind: 1, mod: nIn}
	}
	// Is in (right-aligned) a prefix of out followed by 1s?
	full := append(make([]int, len(out)-len(in)), in...)
	for d := range len(out) - len(in) {
		full[d] = 1
	}
	k = len(full)
	for k > 0 && full[k-1] == 1 {
		k--
	}
	if sameShape(full[:k], out[:k]) {
		return bcastIndex{kind: 4, mod: nOut / nIn}
	}
	st := bcastStrides(in, out)
	tbl := make([]int32, nOut)
	idx := make([]int, len(out))
	off := 0
	for i := 0; i < nOut; i++ {
		tbl[i] = int32(off)
		for d := len(out) - 1; d >= 0; d-- {
			idx[d]++
			off += st[d]
			if idx[d] < out[d] {
				break
			}
			off -= st[d] * out[d]
			idx[d] = 0
		}
	}
	return bcastIndex{kind: 3, table: tbl}
}

func (bi *bcastIndex) at(i int) int {
	switch bi.kind {
	case 0:
		return i
	case 1:
		return i % bi.mod
	case 2:
		return 0
	case 4:
		return i / bi.mod
	}
	return int(bi.table[i])
}

// binary applies f elementwise with broadcasting; dfa and dfb give the
// partial derivatives of f at (x, y, f(x,y)).
func (tp *Tape) binary(op string, a, b *Tensor, f func(x, y float32) float32, dfa, dfb func(x, y, z float32) float32) *Tensor {
	outShape := broadcastShape(op, a.Shape, b.Shape)
	out := tp.newTensor(outShape)
	ia, ib := makeBcastIndex(a.Shape, outShape), makeBcastIndex(b.Shape, outShape)
	n := len(out.Data)
	if ia.kind == 0 && ib.kind == 0 {
		ad, bd, od := a.Data, b.Data, out.Data
		parallelFor(n, 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				od[i] = f(ad[i], bd[i])
			}
		})
	} else {
		parallelFor(n, 2, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				out.Data[i] = f(a.Data[ia.at(i)], b.Data[ib.at(i)])
			}
		})
	}
	if tp.needs(a, b) {
		tp.record(out, func(g []float32) {
			if a.requiresGrad {
				ga := tp.grad(a)
				accumulateBcast(ga, &ia, n, func(i int) float32 {
					return g[i] * dfa(a.Data[ia.at(i)], b.Data[ib.at(i)], out.Data[i])
				})
			}
			if b.requiresGrad {
				gb := tp.grad(b)
				accumulateBcast(gb, &ib, n, func(i int) float32 {
					return g[i] * dfb(a.Data[ia.at(i)], b.Data[ib.at(i)], out.Data[i])
				})
			}
		})
	}
	return out
}

// accumulateBcast adds v(i) for every output index i into dst at the input
// offset of i, reducing over broadcast dimensions.
func accumulateBcast(dst []float32, bi *bcastIndex, n int, v func(i int) float32) {
	switch bi.kind {
	case 0:
		parallelFor(n, 2, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				dst[i] += v(i)
			}
		})
	case 1:
		// Rows of length mod: parallel over columns so writes do not race.
		mod := bi.mod
		rows := n / mod
		parallelFor(mod, rows, func(lo, hi int) {
			for r := 0; r < rows; r++ {
				base := r * mod
				for j := lo; j < hi; j++ {
					dst[j] += v(base + j)
				}
			}
		})
	case 4:
		// Runs of length mod into one element each: parallel over the
		// elements, each summed in the order of the sequential loop.
		div := bi.mod
		parallelFor(n/div, div, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				for i := r * div; i < (r+1)*div; i++ {
					dst[r] += v(i)
				}
			}
		})
	case 2:
		var s float64
		for i := 0; i < n; i++ {
			s += float64(v(i))
		}
		dst[0] += float32(s)
	default:
		for i := 0; i < n; i++ {
			dst[bi.table[i]] += v(i)
		}
	}
}

// Add returns a + b with broadcasting.
func (tp *Tape) Add(a, b *Tensor) *Tensor {
	return tp.binary("Add", a, b, func(x, y float32) float32 { return x + y },
		func(x, y, z float32) float32 { return 1 }, func(x, y, z float32) float32 { return 1 })
}

// Sub returns a - b with broadcasting.
func (tp *Tape) Sub(a, b *Tensor) *Tensor {
	return tp.binary("Sub", a, b, func(x, y float32) float32 { return x - y },
		func(x, y, z float32) float32 { return 1 }, func(x, y, z float32) float32 { return -1 })
}

// Mul returns a * b elementwise with broadcasting.
func (tp *Tape) Mul(a, b *Tensor) *Tensor {
	return tp.binary("Mul", a, b, func(x, y float32) float32 { return x * y },
		func(x, y, z float32) float32 { return y }, func(x, y, z float32) float32 { return x })
}

// Div returns a / b elementwise with broadcasting.
func (tp *Tape) Div(a, b *Tensor) *Tensor {
	return tp.binary("Div", a, b, func(x, y float32) float32 { return x / y },
		func(x, y, z float32) float32 { return 1 / y }, func(x, y, z float32) float32 { return -z / y })
}

// unary applies f elementwise; df gives the derivative at (x, f(x)).
func (tp *Tape) unary(a *Tensor, f func(x float32) float32, df func(x, y float32) float32) *Tensor {
	out := tp.newTensor(a.Shape)
	ad, od := a.Data, out.Data
	parallelFor(len(od), 4, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			od[i] = f(ad[i])
		}
	})
	if tp.needs(a) {
		tp.record(out, func(g []float32) {
			ga := tp.grad(a)
			parallelFor(len(g), 4, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					ga[i] += g[i] * df(ad[i], od[i])
				}
			})
		})
	}
	return out
}

// Scale returns s * a.
func (tp *Tape) Scale(a *Tensor, s float32) *Tensor {
	return tp.unary(a, func(x float32) float32 { return s * x }, func(x, y float32) float32 { return s })
}

// AddScalar returns a + s.
func (tp *Tape) AddScalar(a *Tensor, s float32) *Tensor {
	return tp.unary(a, func(x float32) float32 { return x + s }, func(x, y float32) float32 { return 1 })
}

// Neg returns -a.
func (tp *Tape) Neg(a *Tensor) *Tensor { return tp.Scale(a, -1) }

// Abs returns |a|; the derivative at 0 is taken as 0.
func (tp *Tape) Abs(a *Tensor) *Tensor {
	return tp.unary(a, func(x float32) float32 { return float32(math.Abs(float64(x))) }, func(x, y float32) float32 {
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return 0
	})
}

// Exp returns e^a.
func (tp *Tape) Exp(a *Tensor) *Tensor {
	return tp.unary(a, func(x float32) float32 { return float32(math.Exp(float64(x))) }, func(x, y float32) float32 { return y })
}

// Log returns the natural logarithm of a.
func (tp *Tape) Log(a *Tensor) *Tensor {
	return tp.unary(a, func(x float32) float32 { return float32(math.Log(float64(x))) }, func(x, y float32) float32 { return 1 / x })
}

// Sqrt returns the square root of a.
func (tp *Tape) Sqrt(a *Tensor) *Tensor {
	return tp.unary(a, func(x float32) float32 { return float32(math.Sqrt(float64(x))) }, func(x, y float32) float32 { return 0.5 / y })
}

// Tanh returns the hyperbolic tangent of a.
func (tp *Tape) Tanh(a *Tensor) *Tensor {
	return tp.unary(a, func(x float32) float32 { return float32(math.Tanh(float64(x))) }, func(x, y float32) float32 { return 1 - y*y })
}

// Sigmoid returns 1 / (1 + e^-a).
func (tp *Tape) Sigmoid(a *Tensor) *Tensor {
	return tp.unary(a, sigmoid, func(x, y float32) float32 { return y * (1 - y) })
}

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

// Clamp limits a to [lo, hi]; the gradient is zero outside. Use
// math.Inf for a one-sided clamp (Clamp(x, 0, +Inf) is the hinge max(0, x)).
func (tp *Tape) Clamp(a *Tensor, lo, hi float32) *Tensor {
	return tp.unary(a, func(x float32) float32 { return min(max(x, lo), hi) }, func(x, y float32) float32 {
		if x < lo || x > hi {
			return 0
		}
		return 1
	})
}

// Hinge returns max(0, a), the clamp used by triplet losses.
func (tp *Tape) Hinge(a *Tensor) *Tensor { return tp.Clamp(a, 0, float32(math.Inf(1))) }

package tensor

import (
	"math"
	"sort"
)

// splitAxis returns the sizes before, at and after axis.
func splitAxis(shape []int, axis int) (outer, n, inner int) {
	return prod(shape[:axis]), shape[axis], prod(shape[axis+1:])
}

func reducedShape(shape []int, axis int, keep bool) []int {
	out := append([]int(nil), shape[:axis]...)
	if keep {
		out = append(out, 1)
	}
	return append(out, shape[axis+1:]...)
}

// SumAll returns the sum of all elements as a 0-d tensor.
func (tp *Tape) SumAll(a *Tensor) *Tensor {
	out := tp.newTensor([]int{})
	var s float64
	for _, v := range a.Data {
		s += float64(v)
	}
	out.Data[0] = float32(s)
	if tp.needs(a) {
		tp.record(out, func(g []float32) {
			ga := tp.grad(a)
			for i := range ga {
				ga[i] += g[0]
			}
		})
	}
	return out
}

// MeanAll returns the mean of all elements as a 0-d tensor.
func (tp *Tape) MeanAll(a *Tensor) *Tensor {
	return tp.Scale(tp.SumAll(a), 1/float32(max(len(a.Data), 1)))
}

// Sum sums a over the given axes (negative counts from the end); keepDims
// keeps them with size 1.
func (tp *Tape) Sum(a *Tensor, keepDims bool, axes ...int) *Tensor {
	ax := make([]int, len(axes))
	for i, x := range axes {
		ax[i] = normAxis("Sum", x, a.Dims())
	}
	sort.Sort(sort.Reverse(sort.IntSlice(ax)))
	out := a
	for i, x := range ax {
		if i > 0 && x == ax[i-1] {
			panic(shapeErr("Sum", "axis %d repeated in %v", x, axes))
		}
		out = tp.sumAxis(out, x, keepDims)
	}
	return out
}

func (tp *Tape) sumAxis(a *Tensor, axis int, keep bool) *Tensor {
	outer, n, inner := splitAxis(a.Shape, axis)
	out := tp.newZero(reducedShape(a.Shape, axis, keep))
	parallelFor(outer, n*inner, func(lo, hi int) {
		for o := lo; o < hi; o++ {
			dst := out.Data[o*inner : (o+1)*inner]
			for k := 0; k < n; k++ {
				src := a.Data[(o*n+k)*inner : (o*n+k+1)*inner]
				for j, v := range src {
					dst[j] += v
				}
			}
		}
	})
	if tp.needs(a) {
		tp.record(out, func(g []float32) {
			ga := tp.grad(a)
			parallelFor(outer, n*inner, func(lo, hi int) {
				for o := lo; o < hi; o++ {
					src := g[o*inner : (o+1)*inner]
					for k := 0; k < n; k++ {
						dst := ga[(o*n+k)*inner : (o*n+k+1)*inner]
						for j, v := range src {
							dst[j] += v
						}
					}
				}
			})
		})
	}
	return out
}

// Mean averages a over the given axes.
func (tp *Tape) Mean(a *Tensor, keepDims bool, axes ...int) *Tensor {
	cnt := 1
	for _, x := range axes {
		cnt *= a.Shape[normAxis("Mean", x, a.Dims())]
	}
	return tp.Scale(tp.Sum(a, keepDims, axes...), 1/float32(max(cnt, 1)))
}

// Max takes the maximum over axis and returns it with the argmax indices
// (as the flat index along axis for each output element). The gradient goes
// to the first maximal element. An optional mask broadcastable to a's shape
// excludes entries where it is 0 from the maximum; a slice with no allowed
// entry gives 0 and argmax -1 (it passes no gradient).
func (tp *Tape) Max(a *Tensor, axis int, keepDims bool, mask *Tensor) (*Tensor, []int32) {
	axis = normAxis("Max", axis, a.Dims())
	outer, n, inner := splitAxis(a.Shape, axis)
	am := newAxisMask("Max", mask, a.Shape, axis)
	out := tp.newTensor(reducedShape(a.Shape, axis, keepDims))
	arg := make([]int32, outer*inner)
	parallelFor(outer, n*inner, func(lo, hi int) {
		for o := lo; o < hi; o++ {
			for j := 0; j < inner; j++ {
				best, bi := float32(math.Inf(-1)), int32(-1)
				mb := am.base(o, j)
				for k := 0; k < n; k++ {
					idx := (o*n+k)*inner + j
					if am.masked(mb, k) {
						continue
					}
					if v := a.Data[idx]; v > best || bi < 0 {
						best, bi = v, int32(k)
					}
				}
				if bi < 0 {
					best = 0
				}
				out.Data[o*inner+j] = best
				arg[o*inner+j] = bi
			}
		}
	})
	if tp.needs(a) {
		tp.record(out, func(g []float32) {
			ga := tp.grad(a)
			for o := 0; o < outer; o++ {
				for j := 0; j < inner; j++ {
					if k := arg[o*inner+j]; k >= 0 {
						ga[(o*n+int(k))*inner+j] += g[o*inner+j]
					}
				}
			}
		})
	}
	return out, arg
}

// axisMask reads a mask broadcast to a tensor's shape around a reduction
// axis without materialising it: the mask's offset of element (o, k, j)
// (outer index, index along the axis, inner index; see splitAxis) is
// outer[o] + k*step + inner[j]. A nil *axisMask masks nothing.
type axisMask struct {
	data         []float32
	outer, inner []int
	step         int
}

// newAxisMask returns mask's axisMask for shape and axis, nil for a nil
// mask; it panics with op's name when mask does not broadcast to shape.
func newAxisMask(op string, mask *Tensor, shape []int, axis int) *axisMask {
	if mask == nil {
		return nil
	}
	if mask.Dims() > len(shape) || !sameShape(broadcastShape(op, shape, mask.Shape), shape) {
		panic(shapeErr(op, "mask of shape %v does not broadcast to %v", mask.Shape, shape))
	}
	st := bcastStrides(mask.Shape, shape)
	offsets := func(dims, strides []int) []int {
		off := make([]int, prod(dims))
		for i := range off {
			r, o := i, 0
			for d := len(dims) - 1; d >= 0; d-- {
				o += r % dims[d] * strides[d]
				r /= dims[d]
			}
			off[i] = o
		}
		return off
	}
	return &axisMask{
		data:  mask.Data,
		outer: offsets(shape[:axis], st[:axis]),
		inner: offsets(shape[axis+1:], st[axis+1:]),
		step:  st[axis],
	}
}

// base returns the mask's offset of element (o, 0, j).
func (m *axisMask) base(o, j int) int {
	if m == nil {
		return 0
	}
	return m.outer[o] + m.inner[j]
}

// masked reports whether element k along the axis from base is masked out
// (its mask value is 0).
func (m *axisMask) masked(base, k int) bool {
	return m != nil && m.data[base+k*m.step] == 0
}

// expandMask materialises mask broadcast to shape (values 0 or non-zero).
func expandMask(op string, mask *Tensor, shape []int) []float32 {
	bs := broadcastShape(op, shape, mask.Shape)
	if !sameShape(bs, shape) {
		panic(shapeErr(op, "mask of shape %v does not broadcast to %v", mask.Shape, shape))
	}
	if sameShape(mask.Shape, shape) {
		return mask.Data
	}
	bi := makeBcastIndex(mask.Shape, shape)
	n := prod(shape)
	out := make([]float32, n)
	for i := range out {
		out[i] = mask.Data[bi.at(i)]
	}
	return out
}

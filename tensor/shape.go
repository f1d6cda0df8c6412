package tensor

import (
	"math"
)

// Reshape returns a view of a with a new shape of the same size; one
// dimension may be -1 and is inferred.
func (tp *Tape) Reshape(a *Tensor, shape ...int) *Tensor {
	shape = append([]int(nil), shape...)
	infer, known := -1, 1
	for i, d := range shape {
		if d == -1 {
			if infer >= 0 {
				panic(shapeErr("Reshape", "more than one -1 in %v", shape))
			}
			infer = i
			continue
		}
		known *= d
	}
	if infer >= 0 {
		if known == 0 || len(a.Data)%known != 0 {
			panic(shapeErr("Reshape", "cannot reshape %v into %v", a.Shape, shape))
		}
		shape[infer] = len(a.Data) / known
	}
	if prod(shape) != len(a.Data) {
		panic(shapeErr("Reshape", "cannot reshape %v (%d elements) into %v", a.Shape, len(a.Data), shape))
	}
	out := tp.view(a.Data, shape)
	if tp.needs(a) {
		tp.record(out, func(g []float32) {
			ga := tp.grad(a)
			for i, v := range g {
				ga[i] += v
			}
		})
	}
	return out
}

// Transpose swaps two dimensions (a copy).
func (tp *Tape) Transpose(a *Tensor, d0, d1 int) *Tensor {
	perm := make([]int, a.Dims())
	for i := range perm {
		perm[i] = i
	}
	d0, d1 = normAxis("Transpose", d0, a.Dims()), normAxis("Transpose", d1, a.Dims())
	perm[d0], perm[d1] = perm[d1], perm[d0]
	return tp.Permute(a, perm...)
}

// Permute reorders dimensions: output dimension i is input dimension
// perm[i] (a copy).
func (tp *Tape) Permute(a *Tensor, perm ...int) *Tensor {
	nd := a.Dims()
	if len(perm) != nd {
		panic(shapeErr("Permute", "permutation %v for shape %v", perm, a.Shape))
	}
	seen := make([]bool, nd)
	outShape := make([]int, nd)
	for i, p := range perm {
		if p < 0 || p >= nd || seen[p] {
			panic(shapeErr("Permute", "%v is not a permutation of %d dimensions", perm, nd))
		}
		seen[p] = true
		outShape[i] = a.Shape[p]
	}
	inSt := a.Strides()
	src := make([]int, nd) // input stride of each output dimension
	for i, p := range perm {
		src[i] = inSt[p]
	}
	out := tp.newTensor(outShape)
	gather := permIndex(outShape, src)
	parallelFor(len(gather), 2, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			out.Data[i] = a.Data[gather[i]]
		}
	})
	if tp.needs(a) {
		tp.record(out, func(g []float32) {
			ga := tp.grad(a)
			parallelFor(len(gather), 2, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					ga[gather[i]] += g[i]
				}
			})
		})
	}
	return out
}

// permIndex lists, for each output offset, the input offset.
func permIndex(outShape, srcStrides []int) []int32 {
	n := prod(outShape)
	idx := make([]int32, n)
	nd := len(outShape)
	if nd == 0 {
		return idx
	}
	last, lastSt := outShape[nd-1], srcStrides[nd-1]
	cnt := make([]int, nd)
	base := 0
	for i := 0; i < n; i += last {
		for j := 0; j < last; j++ {
			idx[i+j] = int32(base + j*lastSt)
		}
		for d := nd - 2; d >= 0; d-- {
			cnt[d]++
			base += srcStrides[d]
			if cnt[d] < outShape[d] {
				break
			}
			base -= srcStrides[d] * outShape[d]
			cnt[d] = 0
		}
	}
	return idx
}

// Concat joins tensors along axis; all other dimensions must agree.
func (tp *Tape) Concat(axis int, ts ...*Tensor) *Tensor {
	if len(ts) == 0 {
		panic(shapeErr("Concat", "no tensors"))
	}
	axis = normAxis("Concat", axis, ts[0].Dims())
	outShape := append([]int(nil), ts[0].Shape...)
	outShape[axis] = 0
	for _, t := range ts {
		if t.Dims() != len(outShape) {
			panic(shapeErr("Concat", "shapes %v and %v differ in rank", ts[0].Shape, t.Shape))
		}
		for d := range outShape {
			if d != axis && t.Shape[d] != ts[0].Shape[d] {
				panic(shapeErr("Concat", "shapes %v and %v differ outside axis %d", ts[0].Shape, t.Shape, axis))
			}
		}
		outShape[axis] += t.Shape[axis]
	}
	outer, inner := prod(outShape[:axis]), prod(outShape[axis+1:])
	out := tp.newTensor(outShape)
	rowOut := outShape[axis] * inner
	off := 0
	for _, t := range ts {
		w := t.Shape[axis] * inner
		for o := 0; o < outer; o++ {
			copy(out.Data[o*rowOut+off:o*rowOut+off+w], t.Data[o*w:(o+1)*w])
		}
		off += w
	}
	if tp.needs(ts...) {
		tp.record(out, func(g []float32) {
			off := 0
			for _, t := range ts {
				w := t.Shape[axis] * inner
				if t.requiresGrad {
					gt := tp.grad(t)
					for o := 0; o < outer; o++ {
						src := g[o*rowOut+off : o*rowOut+off+w]
						dst := gt[o*w : (o+1)*w]
						for i, v := range src {
							dst[i] += v
						}
					}
				}
				off += w
			}
		})
	}
	return out
}

// Narrow returns the slice [start, start+length) of a along axis (a copy).
func (tp *Tape) Narrow(a *Tensor, axis, start, length int) *Tensor {
	axis = normAxis("Narrow", axis, a.Dims())
	if start < 0 || length < 0 || start+length > a.Shape[axis] {
		panic(shapeErr("Narrow", "range [%d, %d) outside dimension %d of %v", start, start+length, axis, a.Shape))
	}
	outShape := append([]int(nil), a.Shape...)
	outShape[axis] = length
	outer, n, inner := splitAxis(a.Shape, axis)
	out := tp.newTensor(outShape)
	w := length * inner
	for o := 0; o < outer; o++ {
		copy(out.Data[o*w:(o+1)*w], a.Data[(o*n+start)*inner:(o*n+start)*inner+w])
	}
	if tp.needs(a) {
		tp.record(out, func(g []float32) {
			ga := tp.grad(a)
			for o := 0; o < outer; o++ {
				dst := ga[(o*n+start)*inner : (o*n+start)*inner+w]
				for i, v := range g[o*w : (o+1)*w] {
					dst[i] += v
				}
			}
		})
	}
	return out
}

// Embedding gathers rows of weight (V, D) for each id; the result has shape
// (len(ids), D), reshaped by the caller as needed. Ids outside [0, V) panic
// with a ShapeError.
func (tp *Tape) Embedding(weight *Tensor, ids []int32) *Tensor {
	if weight.Dims() != 2 {
		panic(shapeErr("Embedding", "weight must be (V, D), is %v", weight.Shape))
	}
	v, d := weight.Shape[0], weight.Shape[1]
	out := tp.newTensor([]int{len(ids), d})
	for i, id := range ids {
		if id < 0 || int(id) >= v {
			panic(shapeErr("Embedding", "id %d at position %d outside vocabulary of %d", id, i, v))
		}
		copy(out.Data[i*d:(i+1)*d], weight.Data[int(id)*d:(int(id)+1)*d])
	}
	if tp.needs(weight) {
		tp.record(out, func(g []float32) {
			gw := tp.grad(weight)
			for i, id := range ids {
				dst := gw[int(id)*d : (int(id)+1)*d]
				for j, x := range g[i*d : (i+1)*d] {
					dst[j] += x
				}
			}
		})
	}
	return out
}

// L2Normalize divides a by its L2 norm over the last dimension (clamped
// below by eps, as torch.nn.functional.normalize).
func (tp *Tape) L2Normalize(a *Tensor, eps float32) *Tensor {
	d := a.Shape[a.Dims()-1]
	rows := len(a.Data) / max(d, 1)
	out := tp.newTensor(a.Shape)
	norms := make([]float32, rows)
	parallelFor(rows, d*2, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			x := a.Data[r*d : (r+1)*d]
			var s float64
			for _, v := range x {
				s += float64(v) * float64(v)
			}
			n := max(float32(math.Sqrt(s)), eps)
			norms[r] = n
			inv := 1 / n
			y := out.Data[r*d : (r+1)*d]
			for i, v := range x {
				y[i] = v * inv
			}
		}
	})
	if tp.needs(a) {
		tp.record(out, func(g []float32) {
			ga := tp.grad(a)
			parallelFor(rows, d*2, func(lo, hi int) {
				for r := lo; r < hi; r++ {
					y := out.Data[r*d : (r+1)*d]
					gr := g[r*d : (r+1)*d]
					n := norms[r]
					inv := 1 / n
					dst := ga[r*d : (r+1)*d]
					clamped := n == eps
					var dot float32
					for i := range y {
						dot += gr[i] * y[i]
					}
					for i := range y {
						if clamped {
							dst[i] += gr[i] * inv
						} else {
							dst[i] += (gr[i] - y[i]*dot) * inv
						}
					}
				}
			})
		})
	}
	return out
}

// MaskedFill returns a with value wherever mask (broadcastable to a) is
// non-zero; those positions pass no gradient.
func (tp *Tape) MaskedFill(a, mask *Tensor, value float32) *Tensor {
	md := expandMask("MaskedFill", mask, a.Shape)
	out := tp.newTensor(a.Shape)
	for i, v := range a.Data {
		if md[i] != 0 {
			out.Data[i] = value
		} else {
			out.Data[i] = v
		}
	}
	if tp.needs(a) {
		tp.record(out, func(g []float32) {
			ga := tp.grad(a)
			for i, m := range md {
				if m == 0 {
					ga[i] += g[i]
				}
			}
		})
	}
	return out
}

package tensor

// Conv1d is torch.nn.functional.conv1d with zero padding, stride 1, in the
// channels-last layout: x (B, T, In), w (Out, In, K) as PyTorch stores it, b
// (Out) or nil, giving (B, T+2*padding-K+1, Out):
//
//	out[b, t, o] = b[o] + sum_{k, i} w[o, i, k] * x[b, t+k-padding, i]
//
// It unfolds the padded input into (B*Tout, K*In) windows and multiplies
// them by the weight rearranged to (Out, K*In) in one GEMM.
func (tp *Tape) Conv1d(x, w, b *Tensor, padding int) *Tensor {
	if w.Dims() != 3 {
		panic(shapeErr("Conv1d", "weight %v must be (Out, In, K) for input %v", w.Shape, x.Shape))
	}
	if x.Dims() != 3 || x.Shape[2] != w.Shape[1] {
		panic(shapeErr("Conv1d", "input %v does not fit weight %v (want (B, T, %d))", x.Shape, w.Shape, w.Shape[1]))
	}
	if b != nil && b.Numel() != w.Shape[0] {
		panic(shapeErr("Conv1d", "bias %v does not fit weight %v", b.Shape, w.Shape))
	}
	nb, t, in := x.Shape[0], x.Shape[1], x.Shape[2]
	nOut, k := w.Shape[0], w.Shape[2]
	tout := t + 2*padding - k + 1
	if padding < 0 || tout < 1 {
		panic(shapeErr("Conv1d", "input %v with padding %d is shorter than kernel %v", x.Shape, padding, w.Shape))
	}
	kin := k * in
	// wr (Out, K*In): wr[o, kk*In+i] = w[o, i, kk].
	wr := tp.alloc(nOut * kin)
	for o := 0; o < nOut; o++ {
		for i := 0; i < in; i++ {
			for kk := 0; kk < k; kk++ {
				wr[o*kin+kk*in+i] = w.Data[(o*in+i)*k+kk]
			}
		}
	}
	// cols (B*Tout, K*In): window of output step s of item n.
	rows := nb * tout
	cols := tp.alloc(rows * kin)
	parallelFor(rows, kin, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			n, s := r/tout, r%tout
			dst := cols[r*kin : (r+1)*kin]
			for kk := 0; kk < k; kk++ {
				src := s + kk - padding
				if src < 0 || src >= t {
					clear(dst[kk*in : (kk+1)*in])
					continue
				}
				copy(dst[kk*in:(kk+1)*in], x.Data[(n*t+src)*in:(n*t+src+1)*in])
			}
		}
	})
	out := tp.newTensor([]int{nb, tout, nOut})
	beta := float32(0)
	if b != nil {
		for r := 0; r < rows; r++ {
			copy(out.Data[r*nOut:(r+1)*nOut], b.Data)
		}
		beta = 1
	}
	gemm(false, true, rows, nOut, kin, 1, cols, kin, wr, kin, beta, out.Data, nOut)
	if !tp.needs(x, w, b) {
		tp.free(cols)
		tp.free(wr)
		return out
	}
	tp.keepBuf(cols)
	tp.keepBuf(wr)
	tp.record(out, func(g []float32) {
		if w.requiresGrad {
			// dwr = g^T cols, folded back into (Out, In, K).
			dwr := tp.allocZero(nOut * kin)
			gemm(true, false, nOut, kin, rows, 1, g, nOut, cols, kin, 0, dwr, kin)
			gw := tp.grad(w)
			for o := 0; o < nOut; o++ {
				for i := 0; i < in; i++ {
					for kk := 0; kk < k; kk++ {
						gw[(o*in+i)*k+kk] += dwr[o*kin+kk*in+i]
					}
				}
			}
			tp.free(dwr)
		}
		if b != nil && b.requiresGrad {
			colSumInto(tp.grad(b), g, rows, nOut)
		}
		if x.requiresGrad {
			// dcols = g wr, scattered back onto the input steps.
			dcols := tp.alloc(rows * kin)
			gemm(false, false, rows, kin, nOut, 1, g, nOut, wr, kin, 0, dcols, kin)
			gx := tp.grad(x)
			// Parallel over items: windows of one item overlap, items do not.
			parallelFor(nb, tout*kin, func(lo, hi int) {
				for n := lo; n < hi; n++ {
					for s := 0; s < tout; s++ {
						src := dcols[(n*tout+s)*kin : (n*tout+s+1)*kin]
						for kk := 0; kk < k; kk++ {
							ti := s + kk - padding
							if ti < 0 || ti >= t {
								continue
							}
							dst := gx[(n*t+ti)*in : (n*t+ti+1)*in]
							for i, v := range src[kk*in : (kk+1)*in] {
								dst[i] += v
							}
						}
					}
				}
			})
			tp.free(dcols)
		}
	})
	return out
}

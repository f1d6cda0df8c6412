package tensor

// MatMul multiplies op(a) by op(b), where op transposes the last two
// dimensions when the flag is set.
//
//   - a (M, K) x b (K, N) -> (M, N);
//   - a (..., M, K) x b (K, N) -> (..., M, N): a linear map applied to every
//     row of a (only without transA);
//   - a (B..., M, K) x b (B..., K, N) -> (B..., M, N): a batched product over
//     equal leading dimensions.
func (tp *Tape) MatMul(a, b *Tensor, transA, transB bool) *Tensor {
	if a.Dims() < 2 || b.Dims() < 2 {
		panic(shapeErr("MatMul", "operands must have at least 2 dimensions, have %v and %v", a.Shape, b.Shape))
	}
	if b.Dims() == 2 && a.Dims() > 2 && !transA {
		return tp.matmulRows(a, b, transB)
	}
	if a.Dims() != b.Dims() || !sameShape(a.Shape[:a.Dims()-2], b.Shape[:b.Dims()-2]) {
		panic(shapeErr("MatMul", "batch dimensions of %v and %v differ", a.Shape, b.Shape))
	}
	nd := a.Dims()
	m, ka := a.Shape[nd-2], a.Shape[nd-1]
	if transA {
		m, ka = ka, m
	}
	kb, n := b.Shape[nd-2], b.Shape[nd-1]
	if transB {
		kb, n = n, kb
	}
	if ka != kb {
		panic(shapeErr("MatMul", "inner dimensions differ: %v (transposed %v) x %v (transposed %v)", a.Shape, transA, b.Shape, transB))
	}
	k := ka
	batch := prod(a.Shape[:nd-2])
	outShape := append(append([]int(nil), a.Shape[:nd-2]...), m, n)
	out := tp.newTensor(outShape)
	sa, sb, sc := m*k, k*n, m*n
	lda, ldb := a.Shape[nd-1], b.Shape[nd-1]
	for i := 0; i < batch; i++ {
		gemm(transA, transB, m, n, k, 1, a.Data[i*sa:(i+1)*sa], lda, b.Data[i*sb:(i+1)*sb], ldb, 0, out.Data[i*sc:(i+1)*sc], n)
	}
	if tp.needs(a, b) {
		tp.record(out, func(g []float32) {
			for i := 0; i < batch; i++ {
				gc := g[i*sc : (i+1)*sc]
				if a.requiresGrad {
					ga := tp.grad(a)[i*sa : (i+1)*sa]
					// C = op(A) op(B): dA = dC op(B)^T, or (dC op(B)^T)^T when A is transposed.
					if !transA {
						gemm(false, !transB, m, k, n, 1, gc, n, b.Data[i*sb:(i+1)*sb], ldb, 1, ga, lda)
					} else {
						gemm(transB, true, k, m, n, 1, b.Data[i*sb:(i+1)*sb], ldb, gc, n, 1, ga, lda)
					}
				}
				if b.requiresGrad {
					gb := tp.grad(b)[i*sb : (i+1)*sb]
					if !transB {
						gemm(!transA, false, k, n, m, 1, a.Data[i*sa:(i+1)*sa], lda, gc, n, 1, gb, ldb)
					} else {
						gemm(true, transA, n, k, m, 1, gc, n, a.Data[i*sa:(i+1)*sa], lda, 1, gb, ldb)
					}
				}
			}
		})
	}
	return out
}

// matmulRows treats a (..., M, K) as a (rows, K) matrix times b (K, N), or
// b^T when transB with b (N, K).
func (tp *Tape) matmulRows(a, b *Tensor, transB bool) *Tensor {
	k := a.Shape[a.Dims()-1]
	rows := len(a.Data) / max(k, 1)
	if k == 0 {
		rows = prod(a.Shape[:a.Dims()-1])
	}
	kb, n := b.Shape[0], b.Shape[1]
	if transB {
		kb, n = n, kb
	}
	if k != kb {
		panic(shapeErr("MatMul", "inner dimensions differ: %v x %v (transposed %v)", a.Shape, b.Shape, transB))
	}
	outShape := append(append([]int(nil), a.Shape[:a.Dims()-1]...), n)
	out := tp.newTensor(outShape)
	ldb := b.Shape[1]
	gemm(false, transB, rows, n, k, 1, a.Data, k, b.Data, ldb, 0, out.Data, n)
	if tp.needs(a, b) {
		tp.record(out, func(g []float32) {
			if a.requiresGrad {
				gemm(false, !transB, rows, k, n, 1, g, n, b.Data, ldb, 1, tp.grad(a), k)
			}
			if b.requiresGrad {
				if !transB {
					gemm(true, false, k, n, rows, 1, a.Data, k, g, n, 1, tp.grad(b), ldb)
				} else {
					gemm(true, false, n, k, rows, 1, g, n, a.Data, k, 1, tp.grad(b), ldb)
				}
			}
		})
	}
	return out
}

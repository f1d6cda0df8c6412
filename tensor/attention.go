package tensor

import (
	"math"

	"github.com/xmr-project/xmr/blas"
)

// AttentionOptions configures Attention.
type AttentionOptions struct {
	// Heads splits the model width D into Heads heads of D/Heads columns.
	Heads int
	// KeyValid (B, Tk) marks real keys with 1 and padding with 0; nil means
	// every key is real.
	KeyValid *Tensor
	// Causal hides keys after the query (key j > query i); it needs Tq == Tk.
	Causal bool
	// Dropout is the probability of dropping an attention weight (after the
	// softmax, as PyTorch); it acts only on a training tape.
	Dropout float32
	// Dim is the model width D; 0 means the last dimension of q minus QOff.
	Dim int
	// QOff, KOff and VOff are the first columns of q, k and v within their
	// last dimension, so that one packed projection (B, T, 3D) can serve as
	// all three operands without a copy.
	QOff, KOff, VOff int
}

// Attention is fused multi-head scaled dot-product attention:
//
//	out[b, :, head h] = softmax(Q_bh K_bh^T / sqrt(dh) + mask) V_bh
//
// where Q_bh = q[b, :, QOff+h*dh : QOff+(h+1)*dh] (Tq, dh), and K_bh, V_bh
// likewise from k and v (Tk, dh). q is (B, Tq, >= QOff+D), k and v are
// (B, Tk, ...); the result is (B, Tq, D) with the heads side by side, ready
// for the output projection. Heads are read in place through the GEMM row
// strides, so no permuted copies are made. A query with no visible key gets
// a zero output (PyTorch would give NaN).
func (tp *Tape) Attention(q, k, v *Tensor, o AttentionOptions) *Tensor {
	if q.Dims() != 3 || k.Dims() != 3 || v.Dims() != 3 {
		panic(shapeErr("Attention", "q %v, k %v, v %v must be (B, T, D)", q.Shape, k.Shape, v.Shape))
	}
	b, tq, tk := q.Shape[0], q.Shape[1], k.Shape[1]
	ldq, ldk, ldv := q.Shape[2], k.Shape[2], v.Shape[2]
	d := o.Dim
	if d == 0 {
		d = ldq - o.QOff
	}
	switch {
	case k.Shape[0] != b || v.Shape[0] != b || v.Shape[1] != tk:
		panic(shapeErr("Attention", "q %v, k %v, v %v disagree in batch or key length", q.Shape, k.Shape, v.Shape))
	case o.Heads <= 0 || d <= 0 || d%o.Heads != 0:
		panic(shapeErr("Attention", "width %d of q %v does not split into %d heads", d, q.Shape, o.Heads))
	case o.QOff < 0 || o.KOff < 0 || o.VOff < 0 || o.QOff+d > ldq || o.KOff+d > ldk || o.VOff+d > ldv:
		panic(shapeErr("Attention", "columns [%d,%d), [%d,%d), [%d,%d) outside q %v, k %v, v %v", o.QOff, o.QOff+d, o.KOff, o.KOff+d, o.VOff, o.VOff+d, q.Shape, k.Shape, v.Shape))
	case o.Causal && tq != tk:
		panic(shapeErr("Attention", "causal attention needs as many queries as keys: q %v, k %v", q.Shape, k.Shape))
	case o.KeyValid != nil && (o.KeyValid.Dims() != 2 || o.KeyValid.Shape[0] != b || o.KeyValid.Shape[1] != tk):
		panic(shapeErr("Attention", "key mask %v does not fit keys %v (want (%d, %d))", o.KeyValid.Shape, k.Shape, b, tk))
	}
	heads := o.Heads
	dh := d / heads
	scale := float32(1 / math.Sqrt(float64(dh)))
	nbh, tt := b*heads, tq*tk
	// qAt etc. return the (T, dh) block of head h of batch item i, row
	// stride ld.
	qAt := func(data []float32, i, h int) []float32 { return data[i*tq*ldq+o.QOff+h*dh:] }
	kAt := func(data []float32, i, h int) []float32 { return data[i*tk*ldk+o.KOff+h*dh:] }
	vAt := func(data []float32, i, h int) []float32 { return data[i*tk*ldv+o.VOff+h*dh:] }
	oAt := func(data []float32, i, h int) []float32 { return data[i*tq*d+h*dh:] }

	out := tp.newTensor([]int{b, tq, d})
	record := tp.needs(q, k, v)
	var valid []float32
	if o.KeyValid != nil {
		valid = o.KeyValid.Data
	}
	// Dropout decisions are drawn up front, in order, from the tape's
	// generator; pd holds the weights after dropout (p itself without).
	p := tp.alloc(nbh * tt) // (B, H, Tq, Tk) attention weights
	pd := p
	var keep dropMask
	dscale := float32(1)
	if tp.dropping(o.Dropout) {
		pd = tp.alloc(nbh * tt)
		if o.Dropout >= 1 {
			keep = make(dropMask, (len(p)+63)/64)
			dscale = 0
		} else {
			keep = tp.newDropMask(len(p), o.Dropout)
			dscale = 1 / (1 - o.Dropout)
		}
	}
	// One task per (batch item, head): S = scale * Q K^T, masked softmax
	// over keys, dropout, out = P V into the head's columns of out.
	forEachHead(nbh, func(bh int) {
		i, h := bh/heads, bh%heads
		s := p[bh*tt : (bh+1)*tt] // (Tq, Tk)
		blas.Sgemm(false, true, tq, tk, dh, scale, qAt(q.Data, i, h), ldq, kAt(k.Data, i, h), ldk, 0, s, tk)
		var vrow []float32
		if valid != nil {
			vrow = valid[i*tk : (i+1)*tk]
		}
		for qi := 0; qi < tq; qi++ {
			n := tk
			if o.Causal {
				n = qi + 1
			}
			softmaxRow(s[qi*tk:(qi+1)*tk], n, vrow)
		}
		sd := s
		if keep != nil {
			sd = pd[bh*tt : (bh+1)*tt]
			keep.mulTo(sd, s, bh*tt, [2]float32{0, dscale})
		}
		blas.Sgemm(false, false, tq, dh, tk, 1, sd, tk, vAt(v.Data, i, h), ldv, 0, oAt(out.Data, i, h), d)
	})
	if !record {
		if tp != nil {
			tp.free(p)
			if keep != nil {
				tp.free(pd)
			}
		}
		return out
	}
	tp.keepBuf(p)
	if keep != nil {
		tp.keepBuf(pd)
	}
	tp.record(out, func(g []float32) {
		gq, gk, gv := tp.gradIf(q), tp.gradIf(k), tp.gradIf(v)
		dp := tp.alloc(nbh * tt)
		defer tp.free(dp)
		// Tasks touch only their own (item, head) blocks of the gradients,
		// also when q, k and v are one packed tensor.
		forEachHead(nbh, func(bh int) {
			i, h := bh/heads, bh%heads
			gs := oAt(g, i, h)
			pbh := pd[bh*tt : (bh+1)*tt]
			// dV += Pd^T dO: (Tk, dh).
			if gv != nil {
				blas.Sgemm(true, false, tk, dh, tq, 1, pbh, tk, gs, d, 1, vAt(gv, i, h), ldv)
			}
			if gq == nil && gk == nil {
				return
			}
			// dPd = dO V^T: (Tq, Tk).
			ds := dp[bh*tt : (bh+1)*tt]
			blas.Sgemm(false, true, tq, tk, dh, 1, gs, d, vAt(v.Data, i, h), ldv, 0, ds, tk)
			// Through dropout and softmax: dS = P * (dP - sum(dP * P)).
			for r := 0; r < tq; r++ {
				pr, dr := p[(bh*tq+r)*tk:(bh*tq+r+1)*tk], ds[r*tk:(r+1)*tk]
				if keep != nil {
					keep.mulTo(dr, dr, (bh*tq+r)*tk, [2]float32{0, dscale})
				}
				var dot float32
				for j, pv := range pr {
					dot += pv * dr[j]
				}
				for j, pv := range pr {
					dr[j] = pv * (dr[j] - dot)
				}
			}
			// dQ += scale * dS K: (Tq, dh); dK += scale * dS^T Q: (Tk, dh).
			if gq != nil {
				blas.Sgemm(false, false, tq, dh, tk, scale, ds, tk, kAt(k.Data, i, h), ldk, 1, qAt(gq, i, h), ldq)
			}
			if gk != nil {
				blas.Sgemm(true, false, tk, dh, tq, scale, ds, tk, qAt(q.Data, i, h), ldq, 1, kAt(gk, i, h), ldk)
			}
		})
	})
	return out
}

// softmaxRow replaces row[:n] by its softmax over the keys that valid (nil:
// all) marks non-zero; every other entry becomes 0. A row with no visible
// key is all zeros.
func softmaxRow(row []float32, n int, valid []float32) {
	mx := float32(math.Inf(-1))
	for j := 0; j < n; j++ {
		if valid == nil || valid[j] != 0 {
			mx = max(mx, row[j])
		}
	}
	if math.IsInf(float64(mx), -1) {
		clear(row)
		return
	}
	var sum float32
	for j := 0; j < n; j++ {
		if valid != nil && valid[j] == 0 {
			row[j] = 0
			continue
		}
		e := expf(row[j] - mx)
		row[j] = e
		sum += e
	}
	clear(row[n:])
	inv := 1 / sum
	for j := 0; j < n; j++ {
		row[j] *= inv
	}
}

// expf is math.Exp in float32.
func expf(x float32) float32 { return float32(math.Exp(float64(x))) }

// free returns a scratch buffer to the pool at once.
func (tp *Tape) free(b []float32) {
	if tp != nil {
		tp.put(b)
	}
}

// keepBuf registers a scratch buffer that a recorded backward reads, so that
// Reset returns it to the pool.
func (tp *Tape) keepBuf(b []float32) {
	tp = tp.target()
	if tp != nil {
		tp.live = append(tp.live, &Tensor{Data: b, Shape: []int{len(b)}})
	}
}

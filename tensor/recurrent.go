package tensor

// Fused recurrent cells. A recurrent layer computes the input projection of
// every time step in one GEMM up front, xp = x W_ih^T + b_ih (B, T, G*H),
// and per step only gh = h W_hh^T + b_hh (B, G*H); the cells below combine
// step t of xp with gh in one pass each way. valid[b] false leaves row b's
// state unchanged (a padded step), which gives pack_padded_sequence
// semantics for both directions.

// checkCell validates the operands of a cell with g gates.
func checkCell(op string, xp *Tensor, t int, gh, h *Tensor, valid []bool, g int) (b, hid int) {
	if h.Dims() != 2 {
		panic(shapeErr(op, "state %v must be (B, H)", h.Shape))
	}
	b, hid = h.Shape[0], h.Shape[1]
	if xp.Dims() != 3 || xp.Shape[0] != b || xp.Shape[2] != g*hid {
		panic(shapeErr(op, "input projection %v does not fit state %v (want (%d, T, %d))", xp.Shape, h.Shape, b, g*hid))
	}
	if t < 0 || t >= xp.Shape[1] {
		panic(shapeErr(op, "step %d outside input projection %v", t, xp.Shape))
	}
	if gh.Dims() != 2 || gh.Shape[0] != b || gh.Shape[1] != g*hid {
		panic(shapeErr(op, "recurrent projection %v does not fit state %v (want (%d, %d))", gh.Shape, h.Shape, b, g*hid))
	}
	if valid != nil && len(valid) != b {
		panic(shapeErr(op, "%d step flags for state %v", len(valid), h.Shape))
	}
	return b, hid
}

// GRUCell is one step of torch.nn.GRU (gate order r, z, n):
//
//	r = sigmoid(xr + hr), z = sigmoid(xz + hz)
//	n = tanh(xn + r * hn)
//	h' = (1 - z) * n + z * h
//
// where (xr, xz, xn) = xp[:, t] (B, T, 3H) and (hr, hz, hn) = gh (B, 3H)
// include their biases. Rows with valid[b] false (nil: all valid) keep h.
// It returns h' (B, H).
func (tp *Tape) GRUCell(xp *Tensor, t int, gh, h *Tensor, valid []bool) *Tensor {
	b, hid := checkCell("GRUCell", xp, t, gh, h, valid, 3)
	steps := xp.Shape[1]
	out := tp.newTensor(h.Shape)
	rec := tp.needs(xp, gh, h)
	var acts []float32 // r, z, n per row (B, 3H), kept for backward
	if rec {
		acts = tp.alloc(b * 3 * hid)
		tp.keepBuf(acts)
	}
	parallelFor(b, hid*16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			hp := h.Data[i*hid : (i+1)*hid]
			ho := out.Data[i*hid : (i+1)*hid]
			if valid != nil && !valid[i] {
				copy(ho, hp)
				continue
			}
			x := xp.Data[(i*steps+t)*3*hid : (i*steps+t+1)*3*hid]
			g := gh.Data[i*3*hid : (i+1)*3*hid]
			for j := 0; j < hid; j++ {
				r := sigmoid(x[j] + g[j])
				z := sigmoid(x[hid+j] + g[hid+j])
				n := tanhf(x[2*hid+j] + r*g[2*hid+j])
				ho[j] = (1-z)*n + z*hp[j]
				if rec {
					a := acts[i*3*hid:]
					a[j], a[hid+j], a[2*hid+j] = r, z, n
				}
			}
		}
	})
	if !rec {
		return out
	}
	tp.record(out, func(gout []float32) {
		gx, gg, gprev := tp.gradIf(xp), tp.gradIf(gh), tp.gradIf(h)
		parallelFor(b, hid*16, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				dOut := gout[i*hid : (i+1)*hid]
				if valid != nil && !valid[i] {
					if gprev != nil {
						for j, v := range dOut {
							gprev[i*hid+j] += v
						}
					}
					continue
				}
				a := acts[i*3*hid : (i+1)*3*hid]
				hp := h.Data[i*hid : (i+1)*hid]
				g := gh.Data[i*3*hid : (i+1)*3*hid]
				xo := (i*steps + t) * 3 * hid
				for j := 0; j < hid; j++ {
					r, z, n := a[j], a[hid+j], a[2*hid+j]
					dho := dOut[j]
					dn := dho * (1 - z) * (1 - n*n) // through tanh
					dz := dho * (hp[j] - n) * z * (1 - z)
					dr := dn * g[2*hid+j] * r * (1 - r)
					if gx != nil {
						gx[xo+j] += dr
						gx[xo+hid+j] += dz
						gx[xo+2*hid+j] += dn
					}
					if gg != nil {
						o := i * 3 * hid
						gg[o+j] += dr
						gg[o+hid+j] += dz
						gg[o+2*hid+j] += dn * r
					}
					if gprev != nil {
						gprev[i*hid+j] += dho * z
					}
				}
			}
		})
	})
	return out
}

// LSTMCell is one step of torch.nn.LSTM (gate order i, f, g, o):
//
//	i = sigmoid(.), f = sigmoid(.), g = tanh(.), o = sigmoid(.) of xp[:, t] + gh
//	c' = f * c + i * g
//	h' = o * tanh(c')
//
// with xp (B, T, 4H), gh, h and c as for GRUCell. Rows with valid[b] false
// keep h and c. It returns h' and c' (B, H), recorded as two operations.
func (tp *Tape) LSTMCell(xp *Tensor, t int, gh, h, c *Tensor, valid []bool) (hNew, cNew *Tensor) {
	b, hid := checkCell("LSTMCell", xp, t, gh, h, valid, 4)
	if !sameShape(c.Shape, h.Shape) {
		panic(shapeErr("LSTMCell", "cell state %v and hidden state %v differ", c.Shape, h.Shape))
	}
	steps := xp.Shape[1]
	cNew = tp.newTensor(h.Shape)
	hNew = tp.newTensor(h.Shape)
	rec := tp.needs(xp, gh, h, c)
	// acts holds i, f, g, o and tanh(c') per row (B, 5H).
	acts := tp.alloc(b * 5 * hid)
	parallelFor(b, hid*16, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			cp, hp := c.Data[r*hid:(r+1)*hid], h.Data[r*hid:(r+1)*hid]
			co, ho := cNew.Data[r*hid:(r+1)*hid], hNew.Data[r*hid:(r+1)*hid]
			if valid != nil && !valid[r] {
				copy(co, cp)
				copy(ho, hp)
				continue
			}
			x := xp.Data[(r*steps+t)*4*hid : (r*steps+t+1)*4*hid]
			g := gh.Data[r*4*hid : (r+1)*4*hid]
			a := acts[r*5*hid : (r+1)*5*hid]
			for j := 0; j < hid; j++ {
				ig := sigmoid(x[j] + g[j])
				fg := sigmoid(x[hid+j] + g[hid+j])
				gv := tanhf(x[2*hid+j] + g[2*hid+j])
				og := sigmoid(x[3*hid+j] + g[3*hid+j])
				cv := fg*cp[j] + ig*gv
				tc := tanhf(cv)
				co[j], ho[j] = cv, og*tc
				a[j], a[hid+j], a[2*hid+j], a[3*hid+j], a[4*hid+j] = ig, fg, gv, og, tc
			}
		}
	})
	if !rec {
		tp.free(acts)
		return hNew, cNew
	}
	tp.keepBuf(acts)
	// dgate adds a gate pre-activation gradient to xp's and gh's gradients
	// (nil when not needed).
	dgate := func(gx, gg []float32, r, k int, v float32) {
		if gx != nil {
			gx[(r*steps+t)*4*hid+k] += v
		}
		if gg != nil {
			gg[r*4*hid+k] += v
		}
	}
	// c' = f*c + i*g: gradients to i, f, g and c.
	tp.record(cNew, func(gc []float32) {
		gx, gg := tp.gradIf(xp), tp.gradIf(gh)
		gcp := tp.gradIf(c) // gradient of the previous cell state
		parallelFor(b, hid*16, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				if valid != nil && !valid[r] {
					if gcp != nil {
						for j := 0; j < hid; j++ {
							gcp[r*hid+j] += gc[r*hid+j]
						}
					}
					continue
				}
				a := acts[r*5*hid : (r+1)*5*hid]
				for j := 0; j < hid; j++ {
					d := gc[r*hid+j]
					ig, fg, gv := a[j], a[hid+j], a[2*hid+j]
					dgate(gx, gg, r, j, d*gv*ig*(1-ig))
					dgate(gx, gg, r, hid+j, d*c.Data[r*hid+j]*fg*(1-fg))
					dgate(gx, gg, r, 2*hid+j, d*ig*(1-gv*gv))
					if gcp != nil {
						gcp[r*hid+j] += d * fg
					}
				}
			}
		})
	})
	// h' = o*tanh(c'): gradients to o and c' (and h on padded rows).
	tp.record(hNew, func(gh2 []float32) {
		gcn := tp.grad(cNew)
		gx, gg := tp.gradIf(xp), tp.gradIf(gh)
		ghp := tp.gradIf(h) // gradient of the previous hidden state
		parallelFor(b, hid*16, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				if valid != nil && !valid[r] {
					if ghp != nil {
						for j := 0; j < hid; j++ {
							ghp[r*hid+j] += gh2[r*hid+j]
						}
					}
					continue
				}
				a := acts[r*5*hid : (r+1)*5*hid]
				for j := 0; j < hid; j++ {
					d := gh2[r*hid+j]
					og, tc := a[3*hid+j], a[4*hid+j]
					dgate(gx, gg, r, 3*hid+j, d*tc*og*(1-og))
					gcn[r*hid+j] += d * og * (1 - tc*tc)
				}
			}
		})
	})
	return hNew, cNew
}

func tanhf(x float32) float32 {
	// tanh(x) = 1 - 2/(e^{2x}+1), saturating for large |x|.
	if x > 15 {
		return 1
	}
	if x < -15 {
		return -1
	}
	e := expf(2 * x)
	return (e - 1) / (e + 1)
}

package tensor

// Two-dimensional convolutions in TensorFlow's layouts (NHWC activations,
// HWIO weights), for MobileNet-style networks: a full convolution as
// im2col and one GEMM, and a depthwise one as direct loops over the
// channels of a pixel, which are contiguous.

// conv2dGeom returns the output length and the padding before the first
// element along one spatial axis of length in, for a kernel of k taps and
// stride s: TensorFlow's "SAME" (out = ceil(in/s), total padding
// max((out-1)*s+k-in, 0), its floor half before) or "VALID" (out =
// (in-k)/s+1, no padding). out is 0 when the kernel does not fit.
func conv2dGeom(in, k, s int, same bool) (out, pad int) {
	if same {
		out = (in + s - 1) / s
		return out, max((out-1)*s+k-in, 0) / 2
	}
	if in < k {
		return 0, 0
	}
	return (in-k)/s + 1, 0
}

// conv2dRange returns the taps [k0, k1) of a k-tap kernel whose input
// position o*s+kk-pad lies in [0, in).
func conv2dRange(o, s, pad, k, in int) (k0, k1 int) {
	base := o*s - pad
	return max(0, -base), min(k, in-base)
}

// conv2dShapes checks the operands common to Conv2d and DepthwiseConv2d
// and returns the output geometry.
func conv2dShapes(op string, x, w *Tensor, stride int, same bool) (ho, wo, padT, padL int) {
	if stride < 1 {
		panic(shapeErr(op, "stride %d must be at least 1 (input %v, weight %v)", stride, x.Shape, w.Shape))
	}
	k := w.Shape[0]
	ho, padT = conv2dGeom(x.Shape[1], k, stride, same)
	wo, padL = conv2dGeom(x.Shape[2], k, stride, same)
	if ho < 1 || wo < 1 {
		mode := "VALID"
		if same {
			mode = "SAME"
		}
		panic(shapeErr(op, "input %v is smaller than kernel %v (%s padding, stride %d)", x.Shape, w.Shape, mode, stride))
	}
	return ho, wo, padT, padL
}

// depthwiseParts is the number of blocks of output rows whose weight
// gradients DepthwiseConv2d sums apart.
const depthwiseParts = 16

// Conv2d is TensorFlow's conv2d in the NHWC layout: x (N, H, W, Cin), w
// (K, K, Cin, Cout) in TensorFlow's HWIO layout, b (Cout) or nil, the same
// stride s along both spatial axes, giving (N, Ho, Wo, Cout):
//
//	out[n, oy, ox, o] = b[o] + sum_{ky, kx, i} w[ky, kx, i, o] * x[n, oy*s+ky-padT, ox*s+kx-padL, i]
//
// with x zero outside the image. same selects TensorFlow's "SAME" padding:
// along each axis of input length in, out = ceil(in/s), the total padding
// is max((out-1)*s+K-in, 0), of which total/2 (rounded down) goes before
// (padT, padL) and the rest after. same=false is "VALID": no padding and
// out = (in-K)/s + 1.
//
// A 1x1 kernel with stride 1 is one GEMM on x viewed as (N*H*W, Cin);
// other kernels unfold x into (N*Ho*Wo, K*K*Cin) windows, whose row-major
// order matches the weight's HWIO layout read as (K*K*Cin, Cout), and
// multiply them by it in one GEMM.
func (tp *Tape) Conv2d(x, w, b *Tensor, stride int, same bool) *Tensor {
	const op = "Conv2d"
	if w.Dims() != 4 || w.Shape[0] != w.Shape[1] || w.Shape[0] < 1 {
		panic(shapeErr(op, "weight %v must be (K, K, Cin, Cout) for input %v", w.Shape, x.Shape))
	}
	if x.Dims() != 4 || x.Shape[3] != w.Shape[2] {
		panic(shapeErr(op, "input %v does not fit weight %v (want (N, H, W, %d))", x.Shape, w.Shape, w.Shape[2]))
	}
	if b != nil && b.Numel() != w.Shape[3] {
		panic(shapeErr(op, "bias %v does not fit weight %v", b.Shape, w.Shape))
	}
	ho, wo, padT, padL := conv2dShapes(op, x, w, stride, same)
	nb, h, wi, cin := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	k, cout := w.Shape[0], w.Shape[3]
	kc := k * cin // one kernel row of a window: K pixels of Cin
	kkc := k * kc // a whole window
	rows := nb * ho * wo
	direct := k == 1 && stride == 1 // then Ho = H, Wo = W and no padding
	var cols []float32
	if direct {
		cols = x.Data
	} else {
		cols = tp.alloc(rows * kkc)
		parallelFor(rows, kkc, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				n, oy, ox := r/(ho*wo), r/wo%ho, r%wo
				dst := cols[r*kkc : (r+1)*kkc]
				kx0, kx1 := conv2dRange(ox, stride, padL, k, wi)
				ix0 := ox*stride - padL + kx0
				for ky := 0; ky < k; ky++ {
					row := dst[ky*kc : (ky+1)*kc]
					iy := oy*stride - padT + ky
					if iy < 0 || iy >= h || kx0 >= kx1 {
						clear(row)
						continue
					}
					clear(row[:kx0*cin])
					src := ((n*h+iy)*wi + ix0) * cin
					copy(row[kx0*cin:kx1*cin], x.Data[src:src+(kx1-kx0)*cin])
					clear(row[kx1*cin:])
				}
			}
		})
	}
	out := tp.newTensor([]int{nb, ho, wo, cout})
	beta := float32(0)
	if b != nil {
		parallelFor(rows, cout, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				copy(out.Data[r*cout:(r+1)*cout], b.Data)
			}
		})
		beta = 1
	}
	gemm(false, false, rows, cout, kkc, 1, cols, kkc, w.Data, cout, beta, out.Data, cout)
	if !tp.needs(x, w, b) {
		if !direct {
			tp.free(cols)
		}
		return out
	}
	// The windows stay for the weight's gradient, if the weight needs one
	// now (decided here: they are gone when it does not).
	wantW := w.requiresGrad
	if !direct {
		if wantW {
			tp.keepBuf(cols)
		} else {
			tp.free(cols)
			cols = nil
		}
	}
	tp.record(out, func(g []float32) {
		// The weight's gradient first: it may go to the worker while this
		// goroutine computes the input's (async.go). dW = cols^T g is
		// already in HWIO order.
		if wantW {
			tp.deferGEMM(w, true, false, kkc, cout, rows, cols, kkc, g, cout, tp.grad(w), cout)
		}
		if x.requiresGrad {
			gx := tp.grad(x)
			if direct {
				gemm(false, true, rows, cin, cout, 1, g, cout, w.Data, cout, 1, gx, cin)
			} else {
				// dcols = g W^T, scattered back onto the input pixels.
				dcols := tp.alloc(rows * kkc)
				gemm(false, true, rows, kkc, cout, 1, g, cout, w.Data, cout, 0, dcols, kkc)
				// Parallel over images: windows of one image overlap,
				// images do not.
				parallelFor(nb, ho*wo*kkc, func(lo, hi int) {
					for n := lo; n < hi; n++ {
						for oy := 0; oy < ho; oy++ {
							for ox := 0; ox < wo; ox++ {
								r := (n*ho+oy)*wo + ox
								src := dcols[r*kkc : (r+1)*kkc]
								kx0, kx1 := conv2dRange(ox, stride, padL, k, wi)
								if kx0 >= kx1 {
									continue
								}
								ix0 := ox*stride - padL + kx0
								for ky := 0; ky < k; ky++ {
									iy := oy*stride - padT + ky
									if iy < 0 || iy >= h {
										continue
									}
									s := src[ky*kc+kx0*cin : ky*kc+kx1*cin]
									d0 := ((n*h+iy)*wi + ix0) * cin
									d := gx[d0 : d0+len(s)]
									for i, v := range s {
										d[i] += v
									}
								}
							}
						}
					}
				})
				tp.free(dcols)
			}
		}
		if b != nil && b.requiresGrad {
			colSumInto(tp.grad(b), g, rows, cout)
		}
	})
	return out
}

// DepthwiseConv2d is TensorFlow's depthwise_conv2d with channel multiplier
// 1 in the NHWC layout: x (N, H, W, C), w (K, K, C, 1) as TensorFlow stores
// it, b (C) or nil, the same stride s along both spatial axes, giving
// (N, Ho, Wo, C):
//
//	out[n, oy, ox, c] = b[c] + sum_{ky, kx} w[ky, kx, c, 0] * x[n, oy*s+ky-padT, ox*s+kx-padL, c]
//
// with x zero outside the image. same selects TensorFlow's "SAME" padding:
// along each axis of input length in, out = ceil(in/s), the total padding
// is max((out-1)*s+K-in, 0), of which total/2 (rounded down) goes before
// (padT, padL) and the rest after. same=false is "VALID": no padding and
// out = (in-K)/s + 1.
//
// It runs direct loops with the channels of a pixel innermost, in parallel
// over output rows (forward), input rows (the input's gradient, gathered)
// and blocks of output rows with private sums (the weight's gradient);
// each pass of the inner loop adds up to four products per channel.
func (tp *Tape) DepthwiseConv2d(x, w, b *Tensor, stride int, same bool) *Tensor {
	const op = "DepthwiseConv2d"
	if w.Dims() != 4 || w.Shape[0] != w.Shape[1] || w.Shape[0] < 1 || w.Shape[3] != 1 {
		panic(shapeErr(op, "weight %v must be (K, K, C, 1) for input %v", w.Shape, x.Shape))
	}
	if x.Dims() != 4 || x.Shape[3] != w.Shape[2] {
		panic(shapeErr(op, "input %v does not fit weight %v (want (N, H, W, %d))", x.Shape, w.Shape, w.Shape[2]))
	}
	if b != nil && b.Numel() != w.Shape[2] {
		panic(shapeErr(op, "bias %v does not fit weight %v", b.Shape, w.Shape))
	}
	ho, wo, padT, padL := conv2dShapes(op, x, w, stride, same)
	nb, h, wi, c := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	k := w.Shape[0]
	xd, wd := x.Data, w.Data
	// px returns the C values of pixel (n, y, x) of an (N, Hh, Ww, C) map.
	px := func(d []float32, n, y, xx, hh, ww int) []float32 {
		o := ((n*hh+y)*ww + xx) * c
		return d[o : o+c : o+c]
	}
	// tap returns the C weights of tap (ky, kx).
	tap := func(ky, kx int) []float32 {
		o := (ky*k + kx) * c
		return wd[o : o+c : o+c]
	}
	out := tp.newTensor([]int{nb, ho, wo, c})
	od := out.Data
	parallelFor(nb*ho, wo*k*k*c, func(lo, hi int) {
		var ps dwPairs
		for r := lo; r < hi; r++ {
			n, oy := r/ho, r%ho
			ky0, ky1 := conv2dRange(oy, stride, padT, k, h)
			for ox := 0; ox < wo; ox++ {
				dst := px(od, n, oy, ox, ho, wo)
				if b != nil {
					copy(dst, b.Data)
				} else {
					clear(dst)
				}
				kx0, kx1 := conv2dRange(ox, stride, padL, k, wi)
				for ky := ky0; ky < ky1; ky++ {
					iy := oy*stride - padT + ky
					for kx := kx0; kx < kx1; kx++ {
						ps.add(dst, tap(ky, kx), px(xd, n, iy, ox*stride-padL+kx, h, wi))
					}
				}
				ps.flush(dst)
			}
		}
	})
	if !tp.needs(x, w, b) {
		return out
	}
	tp.record(out, func(g []float32) {
		if w.requiresGrad {
			// dw[ky, kx, c] = sum over outputs of g * x under the tap:
			// blocks of output rows sum into private buffers, added up
			// in block order.
			gw := tp.grad(w)
			kkc := k * k * c
			nr := nb * ho
			// A fixed number of blocks, not cores(): the sums' bits then
			// depend on the shapes alone.
			parts := 1
			if nr*wo*kkc >= minParallel {
				parts = min(depthwiseParts, nr)
			}
			var part []float32
			if parts > 1 {
				part = tp.allocZero(parts * kkc)
			}
			parallelTasks(parts, func(p int) {
				acc := gw
				if parts > 1 {
					acc = part[p*kkc : (p+1)*kkc]
				}
				var ps dwPairs
				for r := p * nr / parts; r < (p+1)*nr/parts; r++ {
					n, oy := r/ho, r%ho
					ky0, ky1 := conv2dRange(oy, stride, padT, k, h)
					for ky := ky0; ky < ky1; ky++ {
						iy := oy*stride - padT + ky
						for kx := 0; kx < k; kx++ {
							dst := acc[(ky*k+kx)*c : (ky*k+kx+1)*c]
							for ox := 0; ox < wo; ox++ {
								ix := ox*stride - padL + kx
								if ix < 0 || ix >= wi {
									continue
								}
								ps.add(dst, px(g, n, oy, ox, ho, wo), px(xd, n, iy, ix, h, wi))
							}
							ps.flush(dst)
						}
					}
				}
			})
			if parts > 1 {
				parallelFor(kkc, parts, func(lo, hi int) {
					for p := 0; p < parts; p++ {
						s := part[p*kkc+lo : p*kkc+hi]
						d := gw[lo:hi]
						for i, v := range s {
							d[i] += v
						}
					}
				})
				tp.free(part)
			}
		}
		if x.requiresGrad {
			// dx[n, iy, ix, c] = sum of w[ky, kx, c] * g[n, oy, ox, c]
			// over the taps with oy*s+ky-padT = iy and ox*s+kx-padL = ix:
			// gathered, so that each input row has one writer.
			gx := tp.grad(x)
			parallelFor(nb*h, wi*k*k*c/(stride*stride), func(lo, hi int) {
				var ps dwPairs
				for r := lo; r < hi; r++ {
					n, iy := r/h, r%h
					for ix := 0; ix < wi; ix++ {
						dst := px(gx, n, iy, ix, h, wi)
						for ky := 0; ky < k; ky++ {
							ty := iy + padT - ky
							if ty < 0 || ty%stride != 0 || ty/stride >= ho {
								continue
							}
							oy := ty / stride
							for kx := 0; kx < k; kx++ {
								tx := ix + padL - kx
								if tx < 0 || tx%stride != 0 || tx/stride >= wo {
									continue
								}
								ps.add(dst, tap(ky, kx), px(g, n, oy, tx/stride, ho, wo))
							}
						}
						ps.flush(dst)
					}
				}
			})
		}
		if b != nil && b.requiresGrad {
			colSumInto(tp.grad(b), g, nb*ho*wo, c)
		}
	})
	return out
}

// dwPairs gathers pairs of vectors whose elementwise products a kernel
// adds to one destination, four pairs to a pass over it: a quarter of the
// destination's loads and stores of one pass per pair.
type dwPairs struct {
	a, b [4][]float32
	n    int
}

// add queues dst += a*b (elementwise), running the queue when it is full.
// Every pair queued before a flush must have the same dst.
func (m *dwPairs) add(dst, a, b []float32) {
	m.a[m.n], m.b[m.n] = a, b
	m.n++
	if m.n == 4 {
		dwMadd4(dst, m.a[0], m.b[0], m.a[1], m.b[1], m.a[2], m.b[2], m.a[3], m.b[3])
		m.n = 0
	}
}

// flush runs the pairs still queued.
func (m *dwPairs) flush(dst []float32) {
	switch m.n {
	case 1:
		dwMadd1(dst, m.a[0], m.b[0])
	case 2:
		dwMadd2(dst, m.a[0], m.b[0], m.a[1], m.b[1])
	case 3:
		dwMadd3(dst, m.a[0], m.b[0], m.a[1], m.b[1], m.a[2], m.b[2])
	}
	m.n = 0
}

// dwMadd1Go adds a*b to dst elementwise; a and b are at least as long as
// dst. dwMadd1 runs it, or its AVX2 version.
func dwMadd1Go(dst, a, b []float32) {
	n := len(dst)
	a, b = a[:n], b[:n]
	for i := range dst {
		dst[i] += a[i] * b[i]
	}
}

// dwMadd2 adds a0*b0 + a1*b1 to dst elementwise.
func dwMadd2(dst, a0, b0, a1, b1 []float32) {
	if hasMaddFMA {
		dwMadd1(dst, a0, b0)
		dwMadd1(dst, a1, b1)
		return
	}
	n := len(dst)
	a0, b0, a1, b1 = a0[:n], b0[:n], a1[:n], b1[:n]
	for i := range dst {
		dst[i] += a0[i]*b0[i] + a1[i]*b1[i]
	}
}

// dwMadd3 adds a0*b0 + a1*b1 + a2*b2 to dst elementwise.
func dwMadd3(dst, a0, b0, a1, b1, a2, b2 []float32) {
	if hasMaddFMA {
		dwMadd1(dst, a0, b0)
		dwMadd1(dst, a1, b1)
		dwMadd1(dst, a2, b2)
		return
	}
	n := len(dst)
	a0, b0, a1, b1, a2, b2 = a0[:n], b0[:n], a1[:n], b1[:n], a2[:n], b2[:n]
	for i := range dst {
		dst[i] += (a0[i]*b0[i] + a1[i]*b1[i]) + a2[i]*b2[i]
	}
}

// dwMadd4Go adds a0*b0 + a1*b1 + a2*b2 + a3*b3 to dst elementwise.
// dwMadd4 runs it, or its AVX2 version.
func dwMadd4Go(dst, a0, b0, a1, b1, a2, b2, a3, b3 []float32) {
	n := len(dst)
	a0, b0, a1, b1, a2, b2, a3, b3 = a0[:n], b0[:n], a1[:n], b1[:n], a2[:n], b2[:n], a3[:n], b3[:n]
	for i := range dst {
		dst[i] += (a0[i]*b0[i] + a1[i]*b1[i]) + (a2[i]*b2[i] + a3[i]*b3[i])
	}
}

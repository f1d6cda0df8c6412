package detect

// dwRowGo is the portable kernel of the depthwise convolution: for each of
// n output pixels i, o[i*C+j] += x[i*xstep+j] * w[j] for j < C.
func dwRowGo(o, x, w []float32, n, C, xstep int) {
	w = w[:C]
	for i := 0; i < n; i++ {
		oo := o[i*C : i*C+C]
		xx := x[i*xstep : i*xstep+C]
		for j := range oo {
			oo[j] += xx[j] * w[j]
		}
	}
}

// dwInteriorGo is the portable kernel of the depthwise convolution of
// interior pixels (every tap inside the image), for the channels j >= j0 of
// 4*groups output pixels i: o[i*C+j] = the sum over ky, kx < k of
// x[i*xstep + ky*rowstride + kx*C + j] * w[(ky*k+kx)*C+j].
func dwInteriorGo(o, x, w []float32, groups, C, k, xstep, rowstride, j0 int) {
	for i := 0; i < 4*groups; i++ {
		oo := o[i*C+j0 : i*C+C]
		clear(oo)
		for ky := 0; ky < k; ky++ {
			for kx := 0; kx < k; kx++ {
				xx := x[i*xstep+ky*rowstride+kx*C+j0:]
				ww := w[(ky*k+kx)*C+j0:]
				for j := range oo {
					oo[j] += xx[j] * ww[j]
				}
			}
		}
	}
}

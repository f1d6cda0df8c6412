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

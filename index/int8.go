package index

// This file chooses how the int8 path (quant.go) computes its integer dot
// products: with the widest kernel this machine runs (int8_amd64.go lists
// them: AVX-512 VNNI, AVX-VNNI, AVX2), or with the portable loops. Every
// kernel gives the exact integer dot products, so the choice changes the
// speed of a search, never its scores.

// int8Kernel is one way of computing the dot products of int8 code rows
// with a packed query.
type int8Kernel struct {
	name string
	// has says whether this machine can run it.
	has bool
	// bytes says whether it takes the query's codes as int8
	// (packedQuery.q8) rather than as int16 (packedQuery.q16).
	bytes bool
	// dots adds to out[g*nv*12+r*12+w] the dot product over elements
	// [k0, k0+span) of row r of codes (element k of row r at
	// codes[r*stride+k]) and query vector 12g+w of p, for every row r <
	// nv and every group g of p; k0 and span are multiples of 16, span
	// positive.
	dots func(codes []int8, nv, stride int, p *packedQuery, k0, span int, out []int32)
}

// goInt8 is the portable kernel: dots12Go on the int16 layout.
var goInt8 = &int8Kernel{name: "go", has: true, dots: func(codes []int8, nv, stride int, p *packedQuery, k0, span int, out []int32) {
	for g, qg := range p.q16 {
		dots12Go(codes[k0:], nv, stride, qg[k0*12:], span, out[g*nv*12:(g+1)*nv*12])
	}
}}

// int8Default is the kernel that scores int8 codes on this machine: the
// first of int8Kernels that it can run.
var int8Default = func() *int8Kernel {
	for _, k := range int8Kernels {
		if k.has {
			return k
		}
	}
	return goInt8
}()

// Int8Kernel names the kernel that scores int8 codes on this machine:
// "avx512vnni", "avxvnni", "avx2" or "go" (the portable loops). GODEBUG's
// cpu.avx512f=off, cpu.avx512vnni=off, cpu.avxvnni=off or cpu.avx2=off
// chooses a narrower one, to compare them.
func Int8Kernel() string { return int8Default.name }

// int8DotsRef is the plain definition that every kernel must equal: it
// adds to out[g*nv*12+r*12+w] the dot product over elements [k0, k0+span)
// of row r of codes (stride apart) and query 12g+w of qcodes (n vectors,
// qstride apart).
func int8DotsRef(codes []int8, nv, stride int, qcodes []int8, n, qstride, k0, span int, out []int32) {
	for j := range n {
		g, w := j/12, j%12
		q := qcodes[j*qstride+k0 : j*qstride+k0+span]
		for r := range nv {
			row := codes[r*stride+k0 : r*stride+k0+span]
			var s int32
			for k, x := range row {
				s += int32(x) * int32(q[k])
			}
			out[g*nv*12+r*12+w] += s
		}
	}
}

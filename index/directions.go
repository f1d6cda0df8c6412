package index

import (
	"slices"

	"gonum.org/v1/gonum/mat"
)

// This file holds the compressed layout's second residual coder, which
// spends the codes' bits where the residuals' variance is. Residuals of
// learnt embeddings are far from isotropic (those of the photo demo's
// TERAN hold 80% of their variance in 16 of 256 directions), so that
// product quantisation of pairs of elements spends most of its bits on
// directions that hardly vary. The direction coder instead
//
//   - turns each residual to its coordinates along the training sample's
//     principal directions (the eigenvectors of its second moment);
//   - codes the coordinates in 4-bit scalar stages, each a subspace of the
//     fast-scan layout: a stage codes what the direction's earlier stages
//     left, with 16 levels trained by Lloyd's algorithm;
//   - gives the subspaces, one at a time, to the direction whose coded
//     coordinates still err most on the sample (reverse water-filling), so
//     that a direction of large variance gets two or three stages and
//     directions of little variance none.
//
// A query vector's table for subspace s is its own coordinate along the
// stage's direction times each level, so that the kernels, the exact
// tables and the layout are those of product quantisation with subspaces
// one coordinate wide. The writer trains both coders and keeps the one
// with the smaller error on the sample (trainResidual), so that isotropic
// residuals keep product quantisation.

// ResidualCoder says how a compressed layout codes the residuals of its
// vectors (LayoutOptions.Coder).
type ResidualCoder int

const (
	// CoderAuto trains both coders on the first batch and keeps the one
	// whose codes err least on it.
	CoderAuto ResidualCoder = iota
	// CoderPQ is 4-bit product quantisation of the residuals' elements.
	CoderPQ
	// CoderDirections is 4-bit scalar stages along the residuals'
	// principal directions.
	CoderDirections
)

// String returns the coder's name as xmr bench's coder= takes it.
func (c ResidualCoder) String() string {
	switch c {
	case CoderPQ:
		return "pq"
	case CoderDirections:
		return "directions"
	}
	return "auto"
}

// secResDirs and secResDirOf are the direction coder's sections (format
// version 3, when the header's "pq" names directions).
const (
	secResDirs  = "resdirs"  // float32 x directions x dim: the principal directions, rows
	secResDirOf = "resdirof" // uint16 x subspaces: the direction each subspace codes
)

// dirCoder is the part of a pqCodebook that turns vectors to coordinates
// along principal directions; the codebook's centroids are then each
// subspace's 16 levels (dsub 1).
type dirCoder struct {
	k      int       // directions
	dirs   []float32 // k x dim, orthonormal rows
	dirOf  []uint16  // per subspace, its direction; a direction's stages in order
	packed *packedFloats
}

// newDirCoder returns the coder of directions dirs (k rows of dim) and
// subspaces dirOf.
func newDirCoder(dirs []float32, dim int, dirOf []uint16) *dirCoder {
	return &dirCoder{k: len(dirs) / dim, dirs: dirs, dirOf: dirOf, packed: packFloats(dirs, dim)}
}

// coords writes the coordinates of vecs (rows of dim) along the
// directions to out (rows of k), through tmp.
func (dc *dirCoder) coords(vecs []float32, dim int, out []float32, tmp *[]float32) {
	dotsInto(vecs, dim, dc.packed, out, tmp)
}

// lloydIterations is the number of iterations that train a stage's levels.
const lloydIterations = 16

// trainDirections trains a direction coder of m subspaces on res (rows of
// d) and returns it with its mean squared error per vector on res.
func trainDirections(res []float32, d, m int) (*pqCodebook, float64) {
	n := len(res) / d
	cb := &pqCodebook{dim: d, dsub: 1, m: m, centroids: make([]float32, m*pqCentroids)}
	if n == 0 {
		cb.dir = newDirCoder(make([]float32, d), d, make([]uint16, m))
		return cb, 0
	}
	dirs := principalDirections(res, d, min(m, d))
	k := len(dirs) / d
	y := make([]float32, n*k)
	var tmp []float32
	dc := newDirCoder(dirs, d, nil)
	dc.coords(res, d, y, &tmp)
	// Each direction's coordinates, as a column, and what its stages so
	// far leave of them.
	rest := make([][]float32, k)
	errs := make([]float64, k)
	for j := range rest {
		rest[j] = make([]float32, n)
		for i := range n {
			rest[j][i] = y[i*k+j]
			errs[j] += float64(y[i*k+j]) * float64(y[i*k+j])
		}
	}
	var total float64
	for _, x := range res {
		total += float64(x) * float64(x)
	}
	coded := 0.0 // the energy the stages took
	dirOf := make([]uint16, m)
	for s := range m {
		j := 0
		for c := range errs {
			if errs[c] > errs[j] {
				j = c
			}
		}
		lv := cb.centroids[s*pqCentroids : (s+1)*pqCentroids]
		lloyd(rest[j], lv)
		var e float64
		for i, x := range rest[j] {
			r := x - lv[nearestLevel(x, lv)]
			rest[j][i] = r
			e += float64(r) * float64(r)
		}
		coded += errs[j] - e
		errs[j] = e
		dirOf[s] = uint16(j)
	}
	used := 1 + int(slices.Max(dirOf)) // directions past the last coded are not kept
	cb.dir = newDirCoder(dirs[:used*d], d, dirOf)
	return cb, max(0, total-coded) / float64(n)
}

// principalDirections returns the k leading eigenvectors (rows of d) of
// the second moment of vecs (rows of d): the directions along which the
// vectors vary most about the origin, which is what their dot products
// with queries see.
func principalDirections(vecs []float32, d, k int) []float32 {
	n := len(vecs) / d
	// The moment as the dot products of the columns with each other.
	cols := make([]float32, d*n)
	for i := range n {
		for j, x := range vecs[i*d : (i+1)*d] {
			cols[j*n+i] = x
		}
	}
	pf := packFloats(cols, n)
	gram := make([]float32, d*d)
	const rows = 16
	parallel((d+rows-1)/rows, func(t int) {
		lo, hi := t*rows, min(t*rows+rows, d)
		var tmp []float32
		dotsInto(cols[lo*n:hi*n], n, pf, gram[lo*d:hi*d], &tmp)
	})
	sym := mat.NewSymDense(d, nil)
	for a := range d {
		for b := a; b < d; b++ {
			sym.SetSym(a, b, float64(gram[a*d+b]+gram[b*d+a])/2/float64(n))
		}
	}
	var eig mat.EigenSym
	out := make([]float32, k*d)
	if !eig.Factorize(sym, true) { // does not happen for a symmetric matrix of finite values; fall back to the axes
		for j := range k {
			out[j*d+j] = 1
		}
		return out
	}
	var vec mat.Dense
	eig.VectorsTo(&vec)
	vals := eig.Values(nil) // ascending
	order := make([]int, d)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case vals[a] > vals[b]:
			return -1
		case vals[a] < vals[b]:
			return 1
		}
		return 0
	})
	for j := range k {
		for e := range d {
			out[j*d+e] = float32(vec.At(e, order[j]))
		}
	}
	return out
}

// lloyd sets the 16 levels lv (ascending) to those of Lloyd's algorithm on
// xs, started at the quantiles; a level no value falls to moves to the
// middle of the widest gap.
func lloyd(xs []float32, lv []float32) {
	if len(xs) == 0 {
		clear(lv)
		return
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	k := len(lv)
	for c := range lv {
		lv[c] = sorted[(2*c+1)*len(sorted)/(2*k)]
	}
	sums := make([]float64, k)
	counts := make([]int, k)
	for range lloydIterations {
		clear(sums)
		clear(counts)
		// sorted values fall to the levels in runs: one pass.
		c := 0
		for _, x := range sorted {
			for c+1 < k && x-lv[c] > lv[c+1]-x {
				c++
			}
			sums[c] += float64(x)
			counts[c]++
		}
		for c := range lv {
			if counts[c] > 0 {
				lv[c] = float32(sums[c] / float64(counts[c]))
			}
		}
		slices.Sort(lv)
	}
}

// nearestLevel returns the index of the level of lv (16, ascending) nearest
// to x; ties go to the lower.
func nearestLevel(x float32, lv []float32) int {
	lo, hi := 0, len(lv)-1
	for lo < hi { // the first level whose upper midpoint is at or above x
		mid := (lo + hi) / 2
		if x <= (lv[mid]+lv[mid+1])/2 {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// encodeDirs stores the codes of the residual x (dim elements) as vector
// i of the block blk, given its coordinates y (k; changed).
func (cb *pqCodebook) encodeDirs(blk []byte, i int, y []float32) {
	for s, j := range cb.dir.dirOf {
		lv := cb.centroids[s*pqCentroids : (s+1)*pqCentroids]
		c := nearestLevel(y[j], lv)
		y[j] -= lv[c]
		setCode(blk, s, i, byte(c))
	}
}

// dirTables returns, for each query vector (rows of cb.dim) and subspace,
// its coordinate along the subspace's direction times the 16 levels:
// nq x m x 16, as floatTables.
func (cb *pqCodebook) dirTables(vecs []float32) []float32 {
	dc := cb.dir
	n := len(vecs) / cb.dim
	y := make([]float32, n*dc.k)
	var tmp []float32
	dc.coords(vecs, cb.dim, y, &tmp)
	out := make([]float32, n*cb.m*pqCentroids)
	for v := range n {
		for s, j := range dc.dirOf {
			t := y[v*dc.k+int(j)]
			row := out[(v*cb.m+s)*pqCentroids : (v*cb.m+s+1)*pqCentroids]
			for c, l := range cb.centroids[s*pqCentroids : (s+1)*pqCentroids] {
				row[c] = t * l
			}
		}
	}
	return out
}

// addDirs adds to out (dim elements) the residual that codes (m, one a
// subspace) stand for.
func (cb *pqCodebook) addDirs(codes []byte, out []float32) {
	dc := cb.dir
	y := make([]float32, dc.k)
	for s, j := range dc.dirOf {
		y[j] += cb.centroids[s*pqCentroids+int(codes[s])]
	}
	for j, t := range y {
		if t == 0 {
			continue
		}
		for e, u := range dc.dirs[j*cb.dim : (j+1)*cb.dim] {
			out[e] += t * u
		}
	}
}

package index

import (
	"math"
	"math/rand/v2"
)

// This file holds the build side of the 4-bit product quantiser (pq.go):
// training a codebook by k-means and encoding vectors in the fast-scan
// block layout.

// trainPQ trains a codebook with subspaces of about dsub elements (see
// pqShape) on vecs (rows of dim) by k-means: a deterministic sample of at
// most pqTrainVectors vectors, 16 centroids per subspace, pqIterations
// iterations, the subspaces in parallel.
func trainPQ(vecs []float32, dim, dsub int) *pqCodebook {
	w, m := pqShape(dim, dsub)
	cb := &pqCodebook{dim: dim, dsub: w, m: m, centroids: make([]float32, m*pqCentroids*w)}
	n := len(vecs) / dim
	if n == 0 {
		return cb
	}
	sample := Spread(n, pqTrainVectors)
	parallel(m, func(s int) {
		pts := make([]float32, len(sample)*w)
		for i, r := range sample {
			cb.sub(vecs[r*dim:(r+1)*dim], s, pts[i*w:(i+1)*w])
		}
		kmeans(pts, w, cb.centroids[s*pqCentroids*w:(s+1)*pqCentroids*w], uint64(s))
	})
	return cb
}

// kmeans clusters the points (rows of w) into len(cent)/w centroids,
// written to cent. With fewer distinct points than centroids, points
// repeat.
func kmeans(pts []float32, w int, cent []float32, seed uint64) {
	n, k := len(pts)/w, len(cent)/w
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	perm := rng.Perm(n)
	for c := 0; c < k; c++ {
		copy(cent[c*w:(c+1)*w], pts[perm[c%n]*w:])
	}
	assign := make([]int, n)
	sums := make([]float64, k*w)
	counts := make([]int, k)
	for range pqIterations {
		for i := 0; i < n; i++ {
			assign[i] = nearest(pts[i*w:(i+1)*w], cent, w)
		}
		clear(sums)
		clear(counts)
		for i, c := range assign {
			counts[c]++
			for j, x := range pts[i*w : (i+1)*w] {
				sums[c*w+j] += float64(x)
			}
		}
		for c := 0; c < k; c++ {
			if counts[c] == 0 { // an empty cluster restarts at a random point
				copy(cent[c*w:(c+1)*w], pts[rng.IntN(n)*w:])
				continue
			}
			for j := 0; j < w; j++ {
				cent[c*w+j] = float32(sums[c*w+j] / float64(counts[c]))
			}
		}
	}
}

// nearest returns the index of the centroid (rows of w in cent) closest to
// x in Euclidean distance; ties go to the lower index.
func nearest(x, cent []float32, w int) int {
	best, bestD := 0, float32(math.Inf(1))
	for c := 0; c < len(cent)/w; c++ {
		var d float32
		for j, v := range x {
			t := v - cent[c*w+j]
			d += t * t
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// encode returns the codes of vecs (rows of dim) in the kernel's block
// layout (see the top of this file), in parallel.
func (cb *pqCodebook) encode(vecs []float32) []byte {
	n := len(vecs) / cb.dim
	nb := pqBlocks(n)
	bs := 16 * cb.m // bytes per block
	out := make([]byte, nb*bs)
	half := cb.halfNorms()
	parallel(nb, func(b int) {
		buf := make([]float32, cb.m*cb.dsub)
		blk := out[b*bs : (b+1)*bs]
		for i := 0; i < pqBlock && b*pqBlock+i < n; i++ {
			copy(buf, vecs[(b*pqBlock+i)*cb.dim:(b*pqBlock+i+1)*cb.dim])
			cb.encodeInto(blk, i, buf, half)
		}
	})
	return out
}

// halfNorms returns half the squared norm of every centroid (m x 16): the
// nearest centroid to x is the one with the largest x.c - |c|^2/2.
func (cb *pqCodebook) halfNorms() []float32 {
	half := make([]float32, cb.m*pqCentroids)
	for c := range half {
		for _, v := range cb.centroids[c*cb.dsub : (c+1)*cb.dsub] {
			half[c] += v * v / 2
		}
	}
	return half
}

// encodeInto stores the codes of x (m x dsub elements, zero past the
// dimension) as vector i of the block blk; half is halfNorms().
func (cb *pqCodebook) encodeInto(blk []byte, i int, x, half []float32) {
	w := cb.dsub
	for s := 0; s < cb.m; s++ {
		setCode(blk, s, i, byte(nearestHalf(x[s*w:(s+1)*w], cb.centroids[s*pqCentroids*w:(s+1)*pqCentroids*w], half[s*pqCentroids:(s+1)*pqCentroids])))
	}
}

// squaredError returns the mean squared error per vector of cb's codes of
// vecs (rows of cb.dim, plain product quantisation).
func (cb *pqCodebook) squaredError(vecs []float32) float64 {
	n := len(vecs) / cb.dim
	if n == 0 {
		return 0
	}
	half := cb.halfNorms()
	errs := make([]float64, n)
	parallel((n+255)/256, func(t int) {
		buf := make([]float32, cb.m*cb.dsub)
		for i := t * 256; i < min(n, t*256+256); i++ {
			x := vecs[i*cb.dim : (i+1)*cb.dim]
			copy(buf, x)
			var e float64
			for s := range cb.m {
				w := cb.dsub
				c := nearestHalf(buf[s*w:(s+1)*w], cb.centroids[s*pqCentroids*w:(s+1)*pqCentroids*w], half[s*pqCentroids:(s+1)*pqCentroids])
				for k, u := range buf[s*w : (s+1)*w] {
					r := float64(u - cb.centroids[(s*pqCentroids+c)*w+k])
					e += r * r
				}
			}
			errs[i] = e
		}
	})
	var sum float64
	for _, e := range errs {
		sum += e
	}
	if math.IsNaN(sum) {
		return math.Inf(1)
	}
	return sum / float64(n)
}

// setCode stores the 4-bit code c of subspace s of vector i (< 32) in the
// block blk; code returns it.
func setCode(blk []byte, s, i int, c byte) {
	at := (s/2)*32 + (s%2)*16 + i%16
	if i < 16 {
		blk[at] = blk[at]&0xf0 | c
	} else {
		blk[at] = blk[at]&0x0f | c<<4
	}
}

// PQBytes returns the size of the product-quantised form of d-dimensional
// vectors as this version writes segments: bytes of 4-bit codes per
// vector, and bytes of the codebook (16 float32 centroids per subspace)
// per segment.
func PQBytes(d int) (perVector, codebook int) {
	w, m := pqShape(d, pqDsubFor(d))
	return m / 2, 4 * m * pqCentroids * w
}

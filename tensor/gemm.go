package tensor

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/xmr-project/xmr/blas"
)

// GEMM scheduling for the fused kernels of this package.
//
// By default the blas package runs OpenBLAS on one thread per call and
// splits large products over goroutines itself. Two cases need more than
// that, and gemm and forEachHead handle them when OpenBLAS is on one thread:
//
//   - products with few rows (one sequence at inference, x (12, D) times a
//     weight): cut into column tiles small enough for OpenBLAS's small-matrix
//     kernels, which skip packing the weight (2-4x faster, since packing
//     dominates such products), and run the tiles side by side;
//   - many small products (one per attention head) run side by side on
//     goroutines rather than one after another.
//
// With a multi-threaded OpenBLAS or the pure-Go GEMM both fall back to plain
// calls in order.

// blasSmall is the largest m*n*k that OpenBLAS (0.3.17 and later, on
// AVX-512 CPUs) hands to its small-matrix kernels, which do not pack.
const blasSmall = 100 * 100 * 100

// gemmSmallMin is the least work (m*n*k) worth tiling a few-row product.
const gemmSmallMin = 2 * blasSmall

// oneThreadBLAS reports whether OpenBLAS is in use on one thread per call,
// so that concurrent calls from goroutines are the parallelism.
func oneThreadBLAS() bool {
	ob, ok := blas.Current().(*blas.OpenBLAS)
	return ok && runtime.GOMAXPROCS(0) > 1 && ob.Threads() == 1
}

// gemm is blas.Sgemm, with products of at most 64 rows cut into column
// tiles for the small-matrix kernels when OpenBLAS runs on one thread.
func gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m > 64 || m*n*k < gemmSmallMin || m*k*16 > blasSmall || !oneThreadBLAS() {
		if busyWorkers.Load() > 0 {
			// A weight-gradient task or a forked tape has a core: this
			// goroutine computes the blocks of Sgemm's split in turn, so
			// that the bits do not depend on when the other one ends.
			blas.SgemmInTurn(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
			return
		}
		blas.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	// Tiles of op(B)'s columns, a multiple of 16 wide, under blasSmall (and
	// so under the size at which blas splits a product again).
	step := (blasSmall / (m * k)) &^ 15
	parallelTasks((n+step-1)/step, func(t int) {
		lo := t * step
		hi := min(lo+step, n)
		bo := lo // column lo of op(B) = B
		if transB {
			bo = lo * ldb // row lo of B
		}
		blas.Sgemm(transA, transB, m, hi-lo, k, alpha, a, lda, b[bo:], ldb, beta, c[lo:], ldc)
	})
}

// forEachHead runs fn for every (batch item, head) pair: side by side on
// goroutines when OpenBLAS runs on one thread, in order otherwise (each
// product then uses OpenBLAS's threads).
func forEachHead(n int, fn func(bh int)) {
	if oneThreadBLAS() {
		parallelTasks(n, fn)
		return
	}
	for i := 0; i < n; i++ {
		fn(i)
	}
}

// parallelTasks runs fn(0..n-1) on up to cores() goroutines that take
// task indices from a shared counter, so that a slow (descheduled) worker
// does not hold the others up.
func parallelTasks(n int, fn func(i int)) {
	p := min(cores(), n)
	if p <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	worker := func() {
		for {
			i := int(next.Add(1)) - 1
			if i >= n {
				return
			}
			fn(i)
		}
	}
	var wg sync.WaitGroup
	for w := 1; w < p; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker()
		}()
	}
	worker()
	wg.Wait()
}

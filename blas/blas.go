// Package blas provides the single-precision matrix product that the tensor
// core is built on.
//
// At start-up it looks for Debian's OpenBLAS (libopenblas.so.0) and, when it
// is found, routes every product through cblas_sgemm, loaded at run time with
// purego so that the binary never needs cgo or a build tag. When the library
// is missing, or XMR_BLAS=go is set, a pure-Go implementation is used instead.
//
// Matrices are row-major. Sgemm computes C = alpha*op(A)*op(B) + beta*C where
// op(X) is X or its transpose.
package blas

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// Impl is one implementation of the matrix product.
type Impl interface {
	// Name identifies the implementation ("openblas", "go").
	Name() string
	// Sgemm computes C = alpha*op(A)*op(B) + beta*C for row-major matrices:
	// op(A) is m x k, op(B) is k x n, C is m x n; lda, ldb and ldc are the row
	// strides of A, B and C as stored.
	Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
}

var (
	mu      sync.RWMutex
	current Impl
	loadErr error  // why OpenBLAS could not be used, if it could not
	why     string // the same in a few words, for Fallback
	once    sync.Once
)

func initDefault() {
	once.Do(func() {
		pure := Go{}
		switch v := os.Getenv("XMR_BLAS"); v {
		case "go", "pure", "gonum":
			current = pure
			loadErr = fmt.Errorf("XMR_BLAS=%s selects the pure-Go GEMM", v)
			why = "XMR_BLAS=" + v + " selects it"
			return
		}
		ob, err := LoadOpenBLAS()
		if err != nil {
			current, loadErr = pure, err
			why = err.Error()
			if errors.Is(err, ErrNotFound) {
				why = "the OpenBLAS library (libopenblas.so.0) was not found"
			}
			return
		}
		current = ob
	})
}

// Fallback reports whether the pure-Go GEMM is the implementation in use
// and, when it is, why, in a few words: XMR_BLAS chose it, or OpenBLAS
// could not be loaded (most often: the library is not installed). The
// pure-Go GEMM computes the same products 3-14x more slowly (0.07-0.36x
// OpenBLAS's speed on the shapes the models use, docs/benchmarks.md, "gemm").
func Fallback() (reason string, inUse bool) {
	if _, ok := Current().(Go); !ok {
		return "", false
	}
	if why == "" {
		return "it was chosen in this process (blas.Use)", true
	}
	return why, true
}

// Current returns the implementation in use.
func Current() Impl {
	initDefault()
	mu.RLock()
	defer mu.RUnlock()
	return current
}

// Use replaces the implementation in use and returns the previous one. Tests
// use it to run the same code on both paths.
func Use(impl Impl) Impl {
	initDefault()
	mu.Lock()
	defer mu.Unlock()
	prev := current
	current = impl
	return prev
}

// Describe says which implementation is in use and, for the fallback, why.
func Describe() string {
	impl := Current()
	if ob, ok := impl.(*OpenBLAS); ok {
		kernels := ""
		if ob.Core != "" {
			kernels = ", " + ob.Core + " kernels"
			if ob.CoreNote != "" {
				kernels += " (" + ob.CoreNote + ")"
			}
		}
		if ob.Split() > 1 {
			return fmt.Sprintf("openblas (%s%s, one thread per call, large products split over %d goroutines)", ob.Path, kernels, ob.Split())
		}
		return fmt.Sprintf("openblas (%s%s, %d threads)", ob.Path, kernels, ob.Threads())
	}
	if loadErr != nil {
		return fmt.Sprintf("%s (OpenBLAS not used: %v)", impl.Name(), loadErr)
	}
	return impl.Name()
}

// Sgemm computes C = alpha*op(A)*op(B) + beta*C with the implementation in
// use. It checks the slice lengths and panics on a mismatch, which is a
// programming error in the caller.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	checkProduct(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	Current().Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// checkProduct panics when a, b or c cannot hold the product's matrices.
func checkProduct(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	checkMat("A", transA, m, k, a, lda)
	checkMat("B", transB, k, n, b, ldb)
	checkMat("C", false, m, n, c, ldc)
}

// checkMat verifies that x holds an op(x) of r x c with row stride ld.
func checkMat(name string, trans bool, r, c int, x []float32, ld int) {
	rows, cols := r, c
	if trans {
		rows, cols = c, r
	}
	if rows == 0 || cols == 0 {
		return
	}
	if ld < cols || len(x) < (rows-1)*ld+cols {
		panic(fmt.Sprintf("blas: matrix %s: %dx%d with stride %d needs %d elements, have %d", name, rows, cols, ld, (rows-1)*ld+cols, len(x)))
	}
}

// SgemmInTurn is Sgemm on the calling goroutine alone: with OpenBLAS, the
// blocks Sgemm would compute side by side run one after another, so the
// result has Sgemm's bits whatever the kernels (some round differently
// when a product is cut elsewhere). A caller that leaves the other cores to
// other work uses it where it would otherwise call Sgemm. Other
// implementations compute it as Sgemm.
func SgemmInTurn(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	onCaller((*OpenBLAS).inTurn, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SgemmSerial is Sgemm computed as one call on the calling goroutine: with
// OpenBLAS it is never split across goroutines. Callers that already run
// many products in parallel (one block of rows each) use it so that the
// blocks do not split again. Other implementations (the pure-Go fallback,
// whose gonum kernel uses goroutines of its own) compute it as Sgemm.
func SgemmSerial(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	onCaller((*OpenBLAS).serial, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// onCaller checks the product and computes it with run when OpenBLAS is in
// use, with the implementation's Sgemm otherwise.
func onCaller(run func(ob *OpenBLAS, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int),
	transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	checkProduct(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	impl := Current()
	if ob, ok := impl.(*OpenBLAS); ok {
		run(ob, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	impl.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

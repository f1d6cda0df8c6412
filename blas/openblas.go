package blas

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/ebitengine/purego"
)

// libNames are the shared objects tried, in order. Debian's libopenblas0
// installs libopenblas.so.0 through the alternatives system.
var libNames = []string{
	"libopenblas.so.0",
	"libopenblas.so",
	"/usr/lib/x86_64-linux-gnu/libopenblas.so.0",
	"/usr/lib/aarch64-linux-gnu/libopenblas.so.0",
	"libopenblas.dylib",
}

// CBLAS enumerations.
const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
	cblasTrans    = 112
)

// OpenBLAS calls cblas_sgemm of a dynamically loaded OpenBLAS.
//
// By default OpenBLAS runs one thread per call and xmr splits large
// products into row (or column) blocks computed by concurrent calls, one per
// core. OpenBLAS's own worker threads spin (sched_yield) for a while after
// every call, taking the cores that xmr's elementwise kernels need between
// products; with the split, training steps run 1.6-1.9x faster on 2 cores
// (docs/benchmarks.md, "gemm"). Setting OPENBLAS_NUM_THREADS keeps
// OpenBLAS's own threading instead.
type OpenBLAS struct {
	// Path is the library name that was loaded.
	Path string

	native int          // OpenBLAS's thread count when loaded
	split  atomic.Int32 // concurrent calls a large product is split into (1: none)

	sgemm      func(order, transA, transB, m, n, k int32, alpha float32, a *float32, lda int32, b *float32, ldb int32, beta float32, c *float32, ldc int32)
	setThreads func(n int32)
	getThreads func() int32
	corename   func() string

	// Core names the kernels OpenBLAS runs (openblas_get_corename, e.g.
	// "SkylakeX", "Haswell", "Zen"; "" when the library does not say).
	Core string
	// CoreNote says why those kernels run when it was not the library's own
	// choice (see fixCore), or is empty.
	CoreNote string
}

// ErrNotFound is wrapped by LoadOpenBLAS's error when no OpenBLAS library
// could be opened.
var ErrNotFound = errors.New("libopenblas.so.0 not found")

// LoadOpenBLAS opens OpenBLAS and resolves cblas_sgemm. It fails with an
// error (never a panic) when the library is absent.
func LoadOpenBLAS() (*OpenBLAS, error) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" && runtime.GOOS != "freebsd" {
		return nil, fmt.Errorf("loading OpenBLAS is not supported on %s", runtime.GOOS)
	}
	var errs []error
	for _, name := range libNames {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ob := &OpenBLAS{Path: name}
		if err := ob.resolve(h); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		ob.fixCore(h)
		ob.native = ob.Threads()
		ob.split.Store(1)
		if os.Getenv("OPENBLAS_NUM_THREADS") == "" && os.Getenv("OMP_NUM_THREADS") == "" && ob.setThreads != nil && runtime.GOMAXPROCS(0) > 1 {
			ob.SetThreads(1)
			ob.split.Store(int32(runtime.GOMAXPROCS(0)))
		}
		return ob, nil
	}
	return nil, fmt.Errorf("%w (install Debian's libopenblas0): %w", ErrNotFound, errors.Join(errs...))
}

func (ob *OpenBLAS) resolve(h uintptr) (err error) {
	sym, err := purego.Dlsym(h, "cblas_sgemm")
	if err != nil {
		return err
	}
	purego.RegisterFunc(&ob.sgemm, sym)
	if s, err := purego.Dlsym(h, "openblas_set_num_threads"); err == nil {
		purego.RegisterFunc(&ob.setThreads, s)
	}
	if s, err := purego.Dlsym(h, "openblas_get_num_threads"); err == nil {
		purego.RegisterFunc(&ob.getThreads, s)
	}
	if s, err := purego.Dlsym(h, "openblas_get_corename"); err == nil {
		purego.RegisterFunc(&ob.corename, s)
	}
	return nil
}

// Name implements Impl.
func (ob *OpenBLAS) Name() string { return "openblas" }

// Threads returns OpenBLAS's thread count, or 0 if unknown.
func (ob *OpenBLAS) Threads() int {
	if ob.getThreads == nil {
		return 0
	}
	return int(ob.getThreads())
}

// SetThreads sets OpenBLAS's thread count when the library exports it.
func (ob *OpenBLAS) SetThreads(n int) {
	if ob.setThreads != nil && n > 0 {
		ob.setThreads(int32(n))
	}
}

// NativeThreads is OpenBLAS's own thread count when it was loaded.
func (ob *OpenBLAS) NativeThreads() int { return ob.native }

// Split returns how many concurrent calls a large product is split into.
func (ob *OpenBLAS) Split() int { return int(ob.split.Load()) }

// SetSplit sets how many concurrent calls a large product is split into
// (1: every product is one call) and returns the previous value.
func (ob *OpenBLAS) SetSplit(n int) int { return int(ob.split.Swap(int32(max(n, 1)))) }

// minSplitFlops is the size (2*m*n*k) below which splitting a product
// across goroutines costs more than it saves.
const minSplitFlops = 1 << 22

// Sgemm implements Impl by calling cblas_sgemm: a large product is split
// into Split() blocks computed side by side on goroutines.
func (ob *OpenBLAS) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	ob.blocks(true, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// inTurn computes the blocks Sgemm would split the product into, one after
// another on the calling goroutine.
func (ob *OpenBLAS) inTurn(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	ob.blocks(false, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// blocks cuts the product into Split() blocks (or leaves it whole when it
// is small) and computes them side by side on goroutines (parallel) or in
// order on the calling one. The blocks depend only on the shape and
// Split(), never on which of the two runs them, because OpenBLAS's results
// depend on the cut with some kernels: Haswell's (Zen's too) give other
// bits when the rows of C are cut at other than a multiple of 12, and for
// any cut of its columns.
func (ob *OpenBLAS) blocks(parallel bool, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	p := ob.Split()
	if k == 0 || p <= 1 || 2*m*n*k < minSplitFlops {
		ob.serial(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	var wg sync.WaitGroup
	run := func(f func()) {
		if !parallel {
			f()
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	// Split C into p blocks of rows, or of columns when it has fewer rows
	// than columns (then each call packs only its part of B, the larger
	// operand); each block is an independent product over the same k.
	if m >= 8*p && (m >= n || n < 32*p) {
		step := (m + p - 1) / p
		for i0 := 0; i0 < m; i0 += step {
			rows := min(step, m-i0)
			aOff := i0 * lda // row i0 of op(A) = A
			if transA {
				aOff = i0 // column i0 of A
			}
			run(func() {
				ob.call(transA, transB, rows, n, k, alpha, a[aOff:], lda, b, ldb, beta, c[i0*ldc:], ldc)
			})
		}
	} else {
		step := (n + p - 1) / p
		step = (step + 15) &^ 15 // whole cache lines of C
		for j0 := 0; j0 < n; j0 += step {
			cols := min(step, n-j0)
			bOff := j0 // column j0 of op(B) = B
			if transB {
				bOff = j0 * ldb // row j0 of B
			}
			run(func() {
				ob.call(transA, transB, m, cols, k, alpha, a, lda, b[bOff:], ldb, beta, c[j0:], ldc)
			})
		}
	}
	wg.Wait()
}

// serial computes the product on the calling goroutine: one cblas_sgemm
// call, or C = beta*C when k is 0.
func (ob *OpenBLAS) serial(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if k == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	ob.call(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// call is one cblas_sgemm call.
func (ob *OpenBLAS) call(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	ta, tb := int32(cblasNoTrans), int32(cblasNoTrans)
	if transA {
		ta = cblasTrans
	}
	if transB {
		tb = cblasTrans
	}
	ob.sgemm(cblasRowMajor, ta, tb, int32(m), int32(n), int32(k), alpha, &a[0], int32(lda), &b[0], int32(ldb), beta, &c[0], int32(ldc))
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	runtime.KeepAlive(c)
}

// scaleC sets C = beta*C (the k = 0 case of a product).
func scaleC(m, n int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		for j := range row {
			if beta == 0 {
				row[j] = 0
			} else {
				row[j] *= beta
			}
		}
	}
}

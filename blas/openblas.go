package blas

import (
	"errors"
	"fmt"
	"runtime"

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
type OpenBLAS struct {
	// Path is the library name that was loaded.
	Path string

	sgemm      func(order, transA, transB, m, n, k int32, alpha float32, a *float32, lda int32, b *float32, ldb int32, beta float32, c *float32, ldc int32)
	setThreads func(n int32)
	getThreads func() int32
}

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
		return ob, nil
	}
	return nil, fmt.Errorf("libopenblas.so.0 not found (install Debian's libopenblas0): %w", errors.Join(errs...))
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

// Sgemm implements Impl by calling cblas_sgemm.
func (ob *OpenBLAS) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
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

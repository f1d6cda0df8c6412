package data

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/npy"
)

// firstNonFinite returns the index of the first NaN or Inf in f, or -1.
// A value is NaN or Inf when all its exponent bits are set. Blocks of 16
// values are tested two at a time as uint64 with a SWAR zero-lane test, and
// only a block that has a hit is scanned value by value.
func firstNonFinite(f []float32) int {
	if len(f) == 0 {
		return -1
	}
	u := unsafe.Slice((*uint32)(unsafe.Pointer(&f[0])), len(f))
	const exp = 0x7f800000
	i := 0
	if uintptr(unsafe.Pointer(&u[0]))%8 == 0 && len(u) >= 16 {
		w := unsafe.Slice((*uint64)(unsafe.Pointer(&u[0])), len(u)/2)
		const (
			exp2 = exp | exp<<32 // exponent bits of both lanes
			one2 = 1 | 1<<32
			top2 = 1<<31 | 1<<63
		)
		// hit is non-zero when a lane of x has all exponent bits set:
		// x&exp2 ^ exp2 then has a zero lane, and the lanes are below
		// 1<<31, so (t - one2) &^ t sets a lane's top bit only for zero.
		hit := func(x uint64) uint64 {
			t := x&exp2 ^ exp2
			return (t - one2) &^ t & top2
		}
		for ; 2*i+16 <= 2*len(w); i += 8 {
			b := w[i : i+8 : i+8]
			if hit(b[0])|hit(b[1])|hit(b[2])|hit(b[3])|hit(b[4])|hit(b[5])|hit(b[6])|hit(b[7]) != 0 {
				break
			}
		}
		i *= 2
	}
	for ; i < len(u); i++ {
		if u[i]&exp == exp {
			return i
		}
	}
	return -1
}

// finiteChunk is the number of values a goroutine of parallelFirstNonFinite
// scans between two checks of its context (16 MiB).
const finiteChunk = 4 << 20

// parallelFirstNonFinite is firstNonFinite spread over the available cores.
// Each goroutine checks ctx between chunks of finiteChunk values, so that
// the scan of a large feature file stops soon after ctx is cancelled; it
// then returns ctx's error.
func parallelFirstNonFinite(ctx context.Context, f []float32) (int, error) {
	workers := min(runtime.GOMAXPROCS(0), 8)
	if len(f) < 1<<20 {
		workers = 1
	}
	// Ranges of a multiple of 16 values keep each one's start as aligned
	// as f's, for firstNonFinite's fast path.
	per := (len(f) + workers - 1) / workers
	per = (per + 15) &^ 15
	found := make([]int, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo := min(w*per, len(f))
		hi := min(lo+per, len(f))
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[w] = -1
			for c := lo; c < hi; c += finiteChunk {
				if err := ctx.Err(); err != nil {
					errs[w] = err
					return
				}
				if j := firstNonFinite(f[c:min(c+finiteChunk, hi)]); j >= 0 {
					found[w] = c + j
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return -1, err
		}
	}
	for _, j := range found {
		if j >= 0 {
			return j, nil
		}
	}
	return -1, nil
}

// checkFinite returns an error naming the first NaN or Inf feature of g,
// e.g. "image 17 region 3 feature 100 is NaN", or, when ctx is cancelled
// during the scan, an error wrapping ctx's error.
func checkFinite(ctx context.Context, g *Regions, global bool) error {
	j, err := parallelFirstNonFinite(ctx, g.Feat)
	if err != nil {
		return fmt.Errorf("check for NaN and Inf: %w", err)
	}
	if j < 0 {
		return nil
	}
	return fmt.Errorf("%s is %v", featPos(j, g.R, g.D, global), g.Feat[j])
}

// featPos names the position of flat feature index j.
func featPos(j, R, D int, global bool) string {
	img, reg, d := j/(R*D), j/D%R, j%D
	if global {
		return fmt.Sprintf("image %d feature %d", img, d)
	}
	return fmt.Sprintf("image %d region %d feature %d", img, reg, d)
}

// isFinite32 reports whether v is neither NaN nor infinite.
func isFinite32(v float32) bool {
	return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0)
}

// writeAtomic writes path through atomicfile.
func writeAtomic(path string, fn func(w io.Writer) error) error {
	return atomicfile.Write(path, fn)
}

// npyTo returns a function that writes data to a writer as npy.Write
// does, checking ctx before each piece of ctxChunk bytes.
func npyTo[T npy.Element](ctx context.Context, shape []int, data []T) func(w io.Writer) error {
	return func(w io.Writer) error {
		return npy.Write(&ctxWriter{ctx: ctx, w: w}, shape, data)
	}
}

// ctxChunk is the most a ctxWriter writes between two checks of its
// context.
const ctxChunk = 64 << 20

// ctxWriter passes writes on to w in pieces of at most ctxChunk bytes and
// fails with ctx's error once ctx is cancelled.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c *ctxWriter) Write(p []byte) (n int, err error) {
	for len(p) > 0 {
		if err := c.ctx.Err(); err != nil {
			return n, err
		}
		k, err := c.w.Write(p[:min(len(p), ctxChunk)])
		n += k
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

package data

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/xmr-project/xmr/atomicfile"
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

// parallelFirstNonFinite is firstNonFinite spread over the available cores.
func parallelFirstNonFinite(f []float32) int {
	workers := min(runtime.GOMAXPROCS(0), 8)
	if workers <= 1 || len(f) < 1<<20 {
		return firstNonFinite(f)
	}
	per := (len(f) + workers - 1) / workers
	found := make([]int, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo := min(w*per, len(f))
		hi := min(lo+per, len(f))
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[w] = -1
			if j := firstNonFinite(f[lo:hi]); j >= 0 {
				found[w] = lo + j
			}
		}()
	}
	wg.Wait()
	for _, j := range found {
		if j >= 0 {
			return j
		}
	}
	return -1
}

// checkFinite returns an error naming the first NaN or Inf feature of g,
// e.g. "image 17 region 3 feature 100 is NaN".
func checkFinite(g *Regions, global bool) error {
	j := parallelFirstNonFinite(g.Feat)
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

package tensor

import "sync"

// minParallel is the number of elements below which kernels run on one
// goroutine: the cost of starting goroutines exceeds the gain.
const minParallel = 1 << 15

// parallelFor splits [0, n) into contiguous chunks run on up to cores()
// goroutines; cost is the approximate work per index (1 for a cheap
// elementwise op) and decides whether splitting pays.
func parallelFor(n, cost int, fn func(lo, hi int)) {
	p := cores()
	if p == 1 || n*cost < minParallel || n < 2 {
		fn(0, n)
		return
	}
	if p > n {
		p = n
	}
	var wg sync.WaitGroup
	chunk := (n + p - 1) / p
	for lo := chunk; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, hi)
	}
	fn(0, min(chunk, n))
	wg.Wait()
}

package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/xmr-project/xmr/atomicfile"
)

// startCPUProfile writes a CPU profile (go tool pprof) to path until the
// returned stop is called; with path empty it does nothing. The profile is
// written atomically (it appears at stop), or directly to a FIFO or a
// terminal. Check path with profileOutput beside the command's inputs
// before: this creates nothing else.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Abort()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Commit(); err != nil {
			fmt.Fprintf(os.Stderr, "xmr: --cpuprofile %s: %v\n", path, err)
		}
	}, nil
}

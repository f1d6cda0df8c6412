package train

import (
	"os"
	"runtime/debug"
)

// gcPercent is the garbage collector's target while a model trains: a
// collection once the heap has grown by a quarter over what the last one
// left live, where Go's default waits until it has doubled. A run's live
// heap is gigabytes of weights, Adam's moments and the tape's buffers that
// last the whole run, while each validation encodes the dev split into
// garbage of its own size; at 100% that garbage doubled the peak memory.
// Measured (teran-mrsw-small, batch 128, 8 regions, 60 iterations and a
// validation of 400 images; docs/benchmarks.md "train-step"): peak RSS
// 1.91 GB at 100%, 1.21 GB at 25%, 1.10 GB at 10%, at the same speed.
const gcPercent = 25

// LeanGC sets the garbage collector's target for training (gcPercent)
// unless the user chose one with GOGC, and returns the function that
// restores the previous target.
func LeanGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(gcPercent)
	return func() { debug.SetGCPercent(old) }
}

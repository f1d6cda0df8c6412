package main

import "runtime"

// maxWorkersPerCPU bounds every --workers flag: more goroutines than this
// per CPU only add memory (each extract worker holds a decoded photo and
// the detector's activations: 100,000 workers took 8 GB and ran 5 times
// slower than 2).
const maxWorkersPerCPU = 4

// checkWorkers validates a --workers flag: 1 to maxWorkersPerCPU times the
// CPUs, or also 0 where zeroMeansAll (one per CPU).
func checkWorkers(n int, zeroMeansAll bool) error {
	limit := maxWorkersPerCPU * runtime.NumCPU()
	if (n >= 1 && n <= limit) || (n == 0 && zeroMeansAll) {
		return nil
	}
	zero := ""
	if zeroMeansAll {
		zero = ", or 0 for one per CPU"
	}
	return usageErrorf("--workers %d: want 1 to %d (%d per CPU of this machine's %d)%s", n, limit, maxWorkersPerCPU, runtime.NumCPU(), zero)
}

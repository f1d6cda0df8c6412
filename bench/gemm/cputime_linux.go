package gemm

import "golang.org/x/sys/unix"

// threadCPU returns the CPU time of the calling OS thread in seconds.
func threadCPU() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

// threadCPUAvailable reports whether threadCPU works here.
func threadCPUAvailable() bool { return threadCPU() > 0 }

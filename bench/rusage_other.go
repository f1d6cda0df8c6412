//go:build !unix

package bench

// MaxRSSMiB returns 0: the peak resident set size is unknown here.
func MaxRSSMiB() float64 { return 0 }

// CPUSeconds returns 0: the process CPU time is unknown here.
func CPUSeconds() float64 { return 0 }

// MinorFaults returns 0: the page faults are unknown here.
func MinorFaults() int64 { return 0 }

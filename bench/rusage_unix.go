//go:build unix

package bench

import (
	"runtime"
	"syscall"
)

// rusage is getrusage of this process; ok is false when it failed.
func rusage() (ru syscall.Rusage, ok bool) {
	return ru, syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil
}

// MaxRSSMiB returns the process's peak resident set size in MiB (0 if
// unknown).
func MaxRSSMiB() float64 {
	ru, ok := rusage()
	if !ok {
		return 0
	}
	kb := float64(ru.Maxrss)
	if runtime.GOOS == "darwin" {
		kb /= 1024 // bytes on macOS, KiB elsewhere
	}
	return kb / 1024
}

// CPUSeconds returns the user+system CPU time the process has used.
func CPUSeconds() float64 {
	ru, _ := rusage()
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// MinorFaults returns the process's minor page faults so far (the first
// touches of fresh memory: the cost of allocation).
func MinorFaults() int64 {
	ru, _ := rusage()
	return int64(ru.Minflt)
}

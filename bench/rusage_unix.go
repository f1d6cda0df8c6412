//go:build unix

package bench

import (
	"runtime"
	"syscall"
)

// MaxRSSMiB returns the process's peak resident set size in MiB (0 if
// unknown).
func MaxRSSMiB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
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
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

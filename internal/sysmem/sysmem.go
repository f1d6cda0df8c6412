// Package sysmem says how much memory the machine can give this process,
// so that a command can refuse, with numbers, work that would not fit
// instead of being killed by the kernel half way: MemAvailable and
// MemTotal from /proc/meminfo, lowered to a cgroup v2 limit (memory.max,
// less memory.current) when one is set.
package sysmem

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// Memory is what the machine can give a process, in bytes.
type Memory struct {
	// Available is what can be had now without swapping (MemAvailable,
	// less for a cgroup limit); Total is the machine's memory (or the
	// cgroup limit).
	Available, Total float64
}

// Read reads the machine's memory; ok is false where it cannot be known
// (not Linux).
func Read() (m Memory, ok bool) {
	return ReadFrom("/proc/meminfo", "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current")
}

// ReadFrom parses meminfo (MemTotal and MemAvailable, in kB) and lowers
// both to the cgroup v2 limit in cgroupMax, less the usage in
// cgroupCurrent, when one is set ("max" is none). ok is false when
// meminfo cannot be read or lacks either figure.
func ReadFrom(meminfo, cgroupMax, cgroupCurrent string) (m Memory, ok bool) {
	f, err := os.Open(meminfo)
	if err != nil {
		return Memory{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseFloat(fields[1], 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "MemTotal:":
			m.Total = kb * 1024
		case "MemAvailable:":
			m.Available = kb * 1024
		}
	}
	if m.Total <= 0 || m.Available <= 0 {
		return Memory{}, false
	}
	if limit, ok := readNumber(cgroupMax); ok && limit < m.Total {
		m.Total = limit
		used, _ := readNumber(cgroupCurrent)
		m.Available = math.Min(m.Available, limit-used)
	}
	return m, true
}

// readNumber reads a file holding one number ("max" and the like are not).
func readNumber(path string) (float64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	return v, err == nil
}

// Format writes a byte count in TiB, GiB or MiB ("1.5 GiB").
func Format(b float64) string {
	switch {
	case b >= 1<<40:
		return fmt.Sprintf("%.3g TiB", b/(1<<40))
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", b/(1<<30))
	default:
		return fmt.Sprintf("%.0f MiB", b/(1<<20))
	}
}

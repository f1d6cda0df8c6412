package atomicfile

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether fi, a character device, is a terminal: one of
// the process's own (standard input, output or error on a terminal) or a
// device numbered as Linux numbers terminals (major 4: virtual consoles
// and serial lines; 5,0 and 5,1: /dev/tty and /dev/console; 136 to 143:
// pseudo-terminals). The device is not opened to ask it, since opening
// some devices (a watchdog, /dev/ptmx) acts.
func isTerminal(fi fs.FileInfo) bool {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		rdev := uint64(st.Rdev)
		switch maj, mnr := unix.Major(rdev), unix.Minor(rdev); {
		case maj == 4, maj == 5 && mnr <= 1, maj >= 136 && maj <= 143:
			return true
		}
	}
	return isStdTerminal(fi)
}

// isStdTerminal reports whether fi is the file of the process's standard
// input, output or error, and that is a terminal.
func isStdTerminal(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	for fd := 0; fd <= 2; fd++ {
		var sst unix.Stat_t
		if unix.Fstat(fd, &sst) != nil || uint64(sst.Dev) != uint64(st.Dev) || uint64(sst.Ino) != uint64(st.Ino) {
			continue
		}
		if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
			return true
		}
	}
	return false
}

package server

import (
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// acceptQueued accepts, without waiting, the connections that the kernel
// has queued on ln (connections whose clients are connected and may have
// sent their request, which closing ln would reset) and closes ln. The
// queue is taken with accept4(2) until it is empty and ln closed at once:
// a connection that completes in between is reset. The caller is ln's
// only accepter.
func acceptQueued(ln net.Listener) []net.Conn {
	defer ln.Close()
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var fds []int
	// A listener's RawConn has Control only; its socket does not block.
	rc.Control(func(fd uintptr) {
		for {
			nfd, _, err := unix.Accept4(int(fd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
			switch err {
			case nil:
				fds = append(fds, nfd)
			case unix.EINTR, unix.ECONNABORTED:
			default: // EAGAIN: the queue is empty
				return
			}
		}
	})
	ln.Close()
	var conns []net.Conn
	for _, fd := range fds {
		f := os.NewFile(uintptr(fd), "accepted")
		c, err := net.FileConn(f) // a duplicate of fd
		f.Close()
		if err == nil {
			conns = append(conns, c)
		}
	}
	return conns
}

// bytesWaiting reports whether bytes have arrived on c that nobody has
// read yet.
func bytesWaiting(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	rc.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return err == nil && n > 0
}

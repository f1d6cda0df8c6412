//go:build !linux

package server

import "net"

// acceptQueued accepts the connections that the kernel has queued on ln
// and closes ln; it takes them on Linux only: elsewhere closing ln resets
// them.
func acceptQueued(ln net.Listener) []net.Conn {
	ln.Close()
	return nil
}

// bytesWaiting reports whether bytes have arrived on c that nobody has
// read yet; it is known on Linux only: elsewhere it reports false, and an
// idle connection is kept only once the server has read from it.
func bytesWaiting(c net.Conn) bool { return false }

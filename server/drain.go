package server

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Graceful shutdown, as Serve does it. http.Server.Shutdown alone cut
// requests that had already reached the server, in two ways: it closed
// the listener with connections still in the kernel's accept queue (their
// clients, connected and their request sent, got a reset), and it closed
// every keep-alive connection it saw idle, although a request may have
// been on its way in it (in the socket's buffer, or being read: a
// connection turns active only once its whole header is read), and the
// client got EOF. It also polled for the end of the requests in flight at
// intervals that double up to half a second: it returned up to 0.28 s
// after the last answer. Here the listener hands over its accept queue
// before it closes, an idle connection is let go only when no byte of a
// request has come on it, and the connections are counted, so that Serve
// returns as the last one closes.

// drainListener is a net.Listener that, once stopped, accepts what the
// kernel has already queued (on Linux) before it closes, hands those
// connections to the server and then reports itself closed. The
// connections it returns are *trackedConn.
type drainListener struct {
	net.Listener
	stopping atomic.Bool
	queued   []net.Conn // accepted from the queue at the stop, to hand over
	drained  bool       // the queue was taken and the listener closed
}

func newDrainListener(ln net.Listener) *drainListener { return &drainListener{Listener: ln} }

// Accept returns the next connection; once the listener is stopped, the
// ones the kernel had queued, then net.ErrClosed. The http.Server calls
// it from one goroutine.
func (l *drainListener) Accept() (net.Conn, error) {
	if !l.stopping.Load() {
		c, err := l.Listener.Accept()
		if err == nil {
			return &trackedConn{Conn: c}, nil
		}
		if !l.stopping.Load() {
			return nil, err
		}
		// Woken by stop.
	}
	if !l.drained {
		l.drained = true
		l.queued = acceptQueued(l.Listener)
	}
	if len(l.queued) == 0 {
		return nil, net.ErrClosed
	}
	c := l.queued[0]
	l.queued = l.queued[1:]
	return &trackedConn{Conn: c}, nil
}

// stop makes Accept take the accept queue, close the listener and report
// it closed; it wakes an Accept that waits. A listener without deadlines
// is closed at once, its queue with it.
func (l *drainListener) stop() {
	l.stopping.Store(true)
	if d, ok := l.Listener.(interface{ SetDeadline(time.Time) error }); ok && d.SetDeadline(past) == nil {
		return
	}
	l.Listener.Close()
}

// Close closes the listener (http.Server.Close calls it).
func (l *drainListener) Close() error {
	l.stopping.Store(true)
	err := l.Listener.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// trackedConn is a connection of the server that counts the bytes read
// from it, to tell an idle connection on which a request has begun to
// arrive from one with nothing on it, and that the drain can stop
// waiting for a request without cutting one that is being read.
type trackedConn struct {
	net.Conn

	mu   sync.Mutex
	read int64 // bytes read so far
	// quit is set by the drain on an idle connection with nothing on it:
	// its read deadline stays in the past, and the server's wait for the
	// next request ends at once, until bytes come after all.
	quit bool
}

// past is a read deadline that has passed: a read waiting for data
// returns at once, one under way returns its data.
var past = time.Unix(1, 0)

func (c *trackedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read += int64(n)
	if n > 0 && c.quit {
		// A request came after all, its first bytes read as the drain
		// quit: let it be read (the server sets its own deadlines for
		// the rest once it has 4 bytes).
		c.quit = false
		c.Conn.SetReadDeadline(time.Time{})
	}
	return n, err
}

// SetReadDeadline keeps the past deadline of a connection the drain quit:
// the server sets the idle timeout after it turns the connection idle,
// which may come after the drain.
func (c *trackedConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.quit {
		t = past
	}
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline is SetReadDeadline and SetWriteDeadline.
func (c *trackedConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

// bytesRead returns the bytes read so far.
func (c *trackedConn) bytesRead() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read
}

// quitIfQuiet ends the server's wait for a request on an idle connection
// unless a request has begun to arrive: bytes read since readAtIdle, or
// waiting in the socket. It does so with a read deadline in the past, not
// by closing: a read under way when it is called, its bytes taken from
// the socket but not yet counted, still returns them. The server then
// closes the connection.
func (c *trackedConn) quitIfQuiet(readAtIdle int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.read != readAtIdle || bytesWaiting(c.Conn) {
		return
	}
	c.quit = true
	c.Conn.SetReadDeadline(past)
}

// CloseWrite half-closes a TCP connection: the server does it before
// closing one whose request body it did not read (an upload over the
// limit), so that the client reads the answer instead of a reset.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom lets the server send files with sendfile(2), as it does on a
// bare *net.TCPConn.
func (c *trackedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// connTracker follows the server's connections through http.Server's
// ConnState hook. Once draining, it ends the wait of each idle
// connection on which no request has begun to arrive (the server then
// closes it), and closes done when no connection is left.
type connTracker struct {
	mu       sync.Mutex
	conns    map[*trackedConn]*connInfo
	draining bool
	done     chan struct{}
}

type connInfo struct {
	state      http.ConnState
	readAtIdle int64 // bytes read when it last turned idle
}

func newConnTracker() *connTracker {
	return &connTracker{conns: map[*trackedConn]*connInfo{}, done: make(chan struct{})}
}

// update is the http.Server's ConnState hook.
func (t *connTracker) update(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*trackedConn)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch st {
	case http.StateClosed, http.StateHijacked:
		delete(t.conns, c)
		t.checkDone()
		return
	}
	ci := t.conns[c]
	if ci == nil {
		ci = &connInfo{}
		t.conns[c] = ci
	}
	ci.state = st
	if st == http.StateIdle {
		ci.readAtIdle = c.bytesRead()
		if t.draining {
			c.quitIfQuiet(ci.readAtIdle)
		}
	}
}

// drain begins the drain: it ends the idle connections with nothing
// arriving on them, and from now on each one that turns idle. done is
// closed once no connection is left.
func (t *connTracker) drain() (done <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.draining = true
	for c, ci := range t.conns {
		if ci.state == http.StateIdle {
			c.quitIfQuiet(ci.readAtIdle)
		}
	}
	t.checkDone()
	return t.done
}

// open returns the connections still open, and how many of them are
// answering a request (not idle).
func (t *connTracker) open() (conns, active int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ci := range t.conns {
		if ci.state != http.StateIdle {
			active++
		}
	}
	return len(t.conns), active
}

// checkDone closes done when draining and no connection is left; t.mu is
// held.
func (t *connTracker) checkDone() {
	if !t.draining || len(t.conns) > 0 {
		return
	}
	select {
	case <-t.done:
	default:
		close(t.done)
	}
}

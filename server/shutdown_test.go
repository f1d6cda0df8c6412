package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// answerCounter counts the answers a handler completed, by status.
type answerCounter struct {
	next http.Handler
	mu   sync.Mutex
	by   map[int]int
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (a *answerCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w}
	a.next.ServeHTTP(sw, r)
	a.mu.Lock()
	a.by[sw.status]++
	a.mu.Unlock()
}

func (a *answerCounter) counts() map[int]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[int]int{}
	for k, v := range a.by {
		out[k] = v
	}
	return out
}

// TestShutdownUnderLoad: 100 clients each hold a keep-alive connection;
// searches are held while each sends a second request, and shutdown
// begins once all are written: some are running, most wait for a turn,
// some are still unread in their idle connection. Every one of them is
// answered 200 in full, with Connection: close; the clients' next
// requests, sent after shutdown began, are refused; and Serve returns
// nil once the last answer is written, not before.
func TestShutdownUnderLoad(t *testing.T) {
	const clients = 100
	f := testFixture(t)
	s := quietServer(t, &Options{MaxConcurrent: 2})
	answers := &answerCounter{next: s.handler, by: map[int]int{}}
	s.handler = answers
	var hold atomic.Pointer[chan struct{}]
	s.searching = func(ctx context.Context) {
		if h := hold.Load(); h != nil {
			<-*h
		}
	}
	drained := make(chan struct{})
	s.drained = func() { close(drained) }
	ln := localListener(t)
	url := "http://" + ln.Addr().String() + "/api/search/text"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		err     error
		answers int // answers counted by the server when Serve returned
	}
	served := make(chan result, 1)
	go func() {
		err := s.Serve(ctx, ln)
		n := 0
		for _, c := range answers.counts() {
			n += c
		}
		served <- result{err, n}
	}()

	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	body := `{"text": "` + f.captions[0].Text + `", "k": 3}`
	// search returns the status of a search and whether the answer closed
	// the connection (Connection: close).
	search := func(wrote chan<- struct{}) (int, bool, error) {
		ctx := context.Background()
		if wrote != nil {
			ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote <- struct{}{} }})
		}
		req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return 0, false, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, false, err
		}
		var r searchResponse
		if resp.StatusCode == 200 && (json.Unmarshal(b, &r) != nil || len(r.Results) != 3) {
			return 0, false, fmt.Errorf("incomplete answer %s", b)
		}
		return resp.StatusCode, resp.Close, nil
	}

	// Every client opens its connection, which then idles.
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			if code, _, err := search(nil); code != 200 {
				t.Errorf("before shutdown: %d %v", code, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Searches are held; each client sends a second request.
	release := make(chan struct{})
	hold.Store(&release)
	wrote := make(chan struct{}, clients)
	type outcome struct {
		code       int
		connClose  bool
		err        error
		afterCode  int
		afterError error
	}
	outcomes := make(chan outcome, clients)
	for range clients {
		go func() {
			var o outcome
			o.code, o.connClose, o.err = search(wrote)
			<-drained
			// Sent after shutdown began.
			o.afterCode, _, o.afterError = search(nil)
			outcomes <- o
		}()
	}
	for range clients {
		<-wrote
	}
	cancel()
	<-drained // the listener is closed, and so are the quiet idle connections
	close(release)

	var answered, refused int
	for range clients {
		o := <-outcomes
		if o.code != 200 || o.err != nil || !o.connClose {
			t.Errorf("a request sent before shutdown: %d %v (Connection: close %v), want 200 with Connection: close", o.code, o.err, o.connClose)
		} else {
			answered++
		}
		if errors.Is(o.afterError, syscall.ECONNREFUSED) {
			refused++
		} else {
			t.Errorf("a request sent after shutdown began: %d %v, want the connection refused", o.afterCode, o.afterError)
		}
	}
	select {
	case r := <-served:
		if r.err != nil {
			t.Errorf("Serve: %v", r.err)
		}
		if r.answers != 2*clients {
			t.Errorf("Serve returned with %d answers written, want all %d", r.answers, 2*clients)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return within 10 s of the last answer")
	}
	if got := answers.counts(); got[200] != 2*clients || len(got) != 1 {
		t.Errorf("the server answered %v, want %d times 200 and nothing else", got, 2*clients)
	}
	t.Logf("sent before shutdown: %d answered; sent after: %d refused", answered, refused)
}

// TestShutdownServesAcceptQueue: clients that connected and sent their
// request while the server accepted nothing (their connections queued in
// the kernel) are answered when shutdown begins, not reset.
func TestShutdownServesAcceptQueue(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the accept queue is taken on Linux only")
	}
	const clients = 20
	f := testFixture(t)
	s := quietServer(t, &Options{})
	ln := localListener(t)
	body := `{"text": "` + f.captions[0].Text + `", "k": 3}`
	req := fmt.Sprintf("POST /api/search/text HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	var conns []net.Conn
	for range clients {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// Shutdown begins as serving does.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Serve(ctx, ln); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("client %d: %v, want an answer", i, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(decodeJSON[searchResponse](t, b).Results) != 3 {
			t.Errorf("client %d: %d %s", i, resp.StatusCode, b)
		}
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("the listener still accepts connections after Serve returned")
	}
}

// TestShutdownTimeout: a request still running when the shutdown timeout
// ends is cut; Serve logs and returns how many connections it closed.
func TestShutdownTimeout(t *testing.T) {
	f := testFixture(t)
	logs := &lockedBuffer{b: &bytes.Buffer{}}
	s, err := New(f.ix, &Options{ShutdownTimeout: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	entered := make(chan struct{})
	s.searching = func(ctx context.Context) {
		close(entered)
		<-ctx.Done() // until its connection is closed
	}
	ln := localListener(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	answered := make(chan error, 1)
	go func() {
		resp, err := http.Post("http://"+ln.Addr().String()+"/api/search/text", "application/json", strings.NewReader(`{"text": "a red circle"}`))
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	<-entered
	cancel()
	err = <-served
	want := "shutdown: closed 1 connection(s) still open after 200ms, 1 of them answering a request"
	if err == nil || err.Error() != want {
		t.Errorf("Serve: %v, want %q", err, want)
	}
	if err := <-answered; err == nil {
		t.Error("the cut request got an answer")
	}
	if l := logs.String(); !strings.Contains(l, "connections still open after the timeout were closed") || !strings.Contains(l, "connections=1") {
		t.Errorf("log:\n%s", l)
	}
}

// lockedBuffer is a bytes.Buffer for several goroutines' logs.
type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

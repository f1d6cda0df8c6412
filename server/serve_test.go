package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestGracefulShutdown cancels Serve's context while a search is running:
// the server stops accepting connections, the search completes with its
// answer, and Serve returns nil.
func TestGracefulShutdown(t *testing.T) {
	f := testFixture(t)
	s := quietServer(t, &Options{})
	entered, release := make(chan struct{}), make(chan struct{})
	s.searching = func(ctx context.Context) {
		close(entered)
		<-release
	}
	ln := localListener(t)
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()

	type answer struct {
		code int
		body []byte
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.Post("http://"+addr+"/api/search/text", "application/json", strings.NewReader(`{"text": "`+f.captions[0].Text+`", "k": 3}`))
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answered <- answer{resp.StatusCode, b, err}
	}()
	<-entered
	cancel()
	// The listener closes; the search is still running.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the server still accepts connections 5 s after shutdown began")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned %v while a request was in flight", err)
	case a := <-answered:
		t.Fatalf("the request was answered before the search finished: %d %s %v", a.code, a.body, a.err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	a := <-answered
	if a.err != nil || a.code != 200 {
		t.Fatalf("in-flight request: %d %s %v", a.code, a.body, a.err)
	}
	if r := decodeJSON[searchResponse](t, a.body); len(r.Results) != 3 {
		t.Fatalf("in-flight request's answer %s", a.body)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after the last request")
	}
}

// TestDraining checks that once shutdown has begun, requests that still
// arrive (on connections accepted before) get their answers, each
// closing its connection, and /healthz says 503 for load balancers.
func TestDraining(t *testing.T) {
	s, _ := newServer(t, nil)
	s.draining.Store(true)
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/healthz", 503, "the server is shutting down"},
		{"/api/info", 200, `"captions"`},
	} {
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, httptest.NewRequest("GET", c.path, nil))
		if w.Code != c.code || !strings.Contains(w.Body.String(), c.want) || w.Header().Get("Connection") != "close" {
			t.Errorf("%s while draining: %d %s %v, want %d with %q and Connection: close", c.path, w.Code, w.Body, w.Header(), c.code, c.want)
		}
	}
}

// TestClientGoneCancelsSearch checks that a search stops when its client
// goes away: its context is cancelled, and the request is counted with
// status 499.
func TestClientGoneCancelsSearch(t *testing.T) {
	f := testFixture(t)
	s, ts := newServer(t, nil)
	entered, stopped := make(chan struct{}), make(chan error, 1)
	s.searching = func(ctx context.Context) {
		close(entered)
		select {
		case <-ctx.Done():
			stopped <- ctx.Err()
		case <-time.After(10 * time.Second):
			stopped <- errors.New("the search's context was not cancelled within 10 s of its client going away")
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "POST", ts.URL+"/api/search/text", strings.NewReader(`{"text": "`+f.captions[0].Text+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := ts.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-entered
	cancel()
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Fatalf("search context: %v, want context.Canceled", err)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v", err)
	}
	s.searching = nil
	// The handler finishes after the client has gone; wait for its count.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(metricsText(t, ts), `xmr_http_requests_total{code="499",endpoint="POST /api/search/text"} 1`) {
		if time.Now().After(deadline) {
			t.Fatalf("no request counted with status 499:\n%s", metricsText(t, ts))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSearchTimeout checks that a search past Options.SearchTimeout is
// cancelled and answered 503 with Retry-After.
func TestSearchTimeout(t *testing.T) {
	f := testFixture(t)
	s, ts := newServer(t, &Options{SearchTimeout: 50 * time.Millisecond})
	s.searching = func(ctx context.Context) { <-ctx.Done() }
	code, h, body := do(t, ts.Client(), "POST", ts.URL+"/api/search/text", []byte(`{"text": "`+f.captions[0].Text+`"}`))
	if code != 503 || h.Get("Retry-After") == "" || !strings.Contains(string(body), "the search took longer than 50ms") {
		t.Fatalf("%d %v %s", code, h, body)
	}
}

// TestMetricsAndAccessLog checks the Prometheus exposition (counts by
// endpoint and status, the latency histogram, the process's memory) and
// the access log.
func TestMetricsAndAccessLog(t *testing.T) {
	f := testFixture(t)
	var log bytes.Buffer
	_, ts := newServer(t, &Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	for range 3 {
		post(t, ts.Client(), ts.URL+"/api/search/text", map[string]any{"text": f.captions[1].Text})
	}
	post(t, ts.Client(), ts.URL+"/api/search/image", map[string]any{"image_id": "nope"})
	m := metricsText(t, ts)
	for _, want := range []string{
		`xmr_http_requests_total{code="200",endpoint="POST /api/search/text"} 3`,
		`xmr_http_requests_total{code="404",endpoint="POST /api/search/image"} 1`,
		`xmr_http_request_duration_seconds_bucket{endpoint="POST /api/search/text",le="+Inf"} 3`,
		`xmr_http_request_duration_seconds_count{endpoint="POST /api/search/text"} 3`,
		`xmr_index_images 40`,
		`xmr_index_captions 200`,
		`process_resident_memory_bytes `,
		`go_memstats_heap_inuse_bytes `,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	for _, want := range []string{"msg=http method=POST path=/api/search/text status=200", "path=/api/search/image status=404"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("access log lacks %q:\n%s", want, log.String())
		}
	}
}

func metricsText(t testing.TB, ts *httptest.Server) string {
	t.Helper()
	code, _, body := do(t, ts.Client(), "GET", ts.URL+"/metrics", nil)
	if code != 200 {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	return string(body)
}

// TestImageFilesStayInside serves a directory of images next to a secret
// file and asks for the secret every way a path can escape: "..", encoded
// "..", absolute paths, symbolic links out of the directory. Only the
// images are served.
func TestImageFilesStayInside(t *testing.T) {
	f := testFixture(t)
	base := t.TempDir()
	secret := []byte("the secret")
	if err := os.WriteFile(filepath.Join(base, "secret.png"), secret, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "images")
	png, err := os.ReadFile(filepath.Join(f.images, f.ids[0]+".png"))
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"a.png": png, "sub/b.png": png, "notes.txt": []byte("notes"), "dir.png/c.png": png} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"out.png":    "../secret.png",
		"abs.png":    filepath.Join(base, "secret.png"),
		"sub/up.png": "../../secret.png",
		"in.png":     "a.png",
		"outdir":     "..",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	_, ts := newServer(t, &Options{Images: dir})
	addr := strings.TrimPrefix(ts.URL, "http://")
	cases := []struct {
		path string
		ok   bool
	}{
		{"/images/a.png", true},
		{"/images/sub/b.png", true},
		{"/images/in.png", true}, // a link inside the directory
		{"/images/../secret.png", false},
		{"/images/sub/../../secret.png", false},
		{"/images/%2e%2e/secret.png", false},
		{"/images/..%2fsecret.png", false},
		{"/images/sub%2f..%2f..%2fsecret.png", false},
		{"/images//" + strings.TrimPrefix(filepath.Join(base, "secret.png"), "/"), false},
		{"/images/%2f" + strings.TrimPrefix(filepath.Join(base, "secret.png"), "/"), false},
		{"/images/out.png", false},
		{"/images/abs.png", false},
		{"/images/sub/up.png", false},
		{"/images/outdir/secret.png", false},
		{"/images/notes.txt", false},
		{"/images/dir.png", false},
		{"/images/", false},
		{"/images/nope.png", false},
		{"/images/a.png%00.txt", false},
	}
	for _, c := range cases {
		code, body := rawGet(t, addr, c.path)
		if bytes.Contains(body, secret) {
			t.Errorf("%s: served the secret (%d)", c.path, code)
		}
		if c.ok && (code != 200 || !bytes.HasPrefix(body, []byte("\x89PNG"))) {
			t.Errorf("%s: %d, want the image", c.path, code)
		}
		if !c.ok && code == 200 {
			t.Errorf("%s: 200, want a refusal", c.path)
		}
	}
}

// TestImageFileFIFO: a FIFO named like an image is a 404 at once; opening
// it waited for a writer and held the request and its OS thread for good.
func TestImageFileFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.png"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	_, ts := newServer(t, &Options{Images: dir})
	client := &http.Client{Timeout: 30 * time.Second}
	for range 3 {
		resp, err := client.Get(ts.URL + "/images/fifo.png")
		if err != nil {
			t.Fatalf("GET /images/fifo.png: %v (a FIFO must not be waited on)", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET /images/fifo.png: %d, want 404", resp.StatusCode)
		}
	}
}

// rawGet sends path as it is, unparsed and uncleaned by any client, and
// follows no redirect.
func rawGet(t *testing.T, addr, path string) (int, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		var e errorBody
		if err := json.Unmarshal(b, &e); err != nil || e.Error == "" {
			t.Errorf("%s: %d with a body that is no JSON error: %s", path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, b
}

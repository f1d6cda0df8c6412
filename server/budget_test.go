package server

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/model"
)

// TestPixelBudget checks the semaphore: pixels are granted in arrival
// order (a large waiter at the front holds back smaller ones behind it), a
// waiter whose context ends leaves the queue and lets the ones behind it
// in, and no more than the budget is ever held.
func TestPixelBudget(t *testing.T) {
	b := newPixelBudget(100)
	ctx := context.Background()
	if err := b.acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	// 50 waits (60+50 > 100); 30 would fit but arrives after it.
	got := make(chan int64, 3)
	wait := func(n int64) {
		if err := b.acquire(ctx, n); err != nil {
			t.Error(err)
			return
		}
		got <- n
	}
	go wait(50)
	waitFor(t, "50 to queue", func() bool { return b.waiting() == 1 })
	// 30 fits beside the 60 held, but queues behind 50: arrival order.
	go wait(30)
	waitFor(t, "30 to queue behind 50", func() bool { return b.waiting() == 2 })
	if h := b.inUse(); h != 60 {
		t.Fatalf("%d pixels held, want 60: 30 passed 50", h)
	}

	// A waiter whose context ends gives up, holding nothing.
	cctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- b.acquire(cctx, 40) }()
	waitFor(t, "40 to queue", func() bool { return b.waiting() == 3 })
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait returned %v, want context.Canceled", err)
	}

	b.release(60) // 50 and 30 fit now
	if a, c := <-got, <-got; a+c != 80 {
		t.Errorf("granted %d and %d, want 50 and 30", a, c)
	}
	if h := b.inUse(); h != 80 {
		t.Errorf("%d pixels held, want 80", h)
	}
	b.release(50)
	b.release(30)
	if h, w, p := b.inUse(), b.waiting(), b.highWater(); h != 0 || w != 0 || p > 100 {
		t.Errorf("at the end: %d held, %d waiting, %d at most; want 0, 0 and at most 100", h, w, p)
	}
}

// waiting returns how many acquire calls wait, for the tests.
func (b *pixelBudget) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiters.Len()
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// pngOf returns a PNG of w x h pixels.
func pngOf(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// gatedImageQuery is an ImageQuery that counts the images it decodes at
// once, and decodes none until gate is closed.
type gatedImageQuery struct {
	gate           chan struct{}
	mu             sync.Mutex
	inside, peak   int
	pixels, peakPx int64
	img            *data.Regions
}

func newGatedImageQuery(t *testing.T) *gatedImageQuery {
	s, err := data.LoadPrecomp(context.Background(), world.Dir(t), "test", &data.PrecompOptions{NoMmap: true})
	if err != nil {
		t.Fatal(err)
	}
	return &gatedImageQuery{gate: make(chan struct{}), img: s.Images.Slice(0, 1)}
}

func (g *gatedImageQuery) query(ctx context.Context, b []byte, m model.Model) (*model.Embeddings, error) {
	w, h, _, _ := declaredSize(b)
	g.mu.Lock()
	g.inside++
	g.pixels += int64(w * h)
	g.peak, g.peakPx = max(g.peak, g.inside), max(g.peakPx, g.pixels)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inside--
		g.pixels -= int64(w * h)
		g.mu.Unlock()
	}()
	<-g.gate
	return model.EncodeImages(ctx, m, g.img, nil)
}

// TestUploadPixelBudget fires 12 concurrent uploads of 8,000 pixels at a
// server that decodes 24,000 at once: 3 are decoded together, never more,
// the others wait for room, and all are answered.
func TestUploadPixelBudget(t *testing.T) {
	const n, w, h, budget = 12, 100, 80, 3 * 100 * 80
	g := newGatedImageQuery(t)
	s, ts := newServer(t, &Options{ImageQuery: eachModel(g.query), UploadPixelBudget: budget, MaxConcurrent: n, SearchTimeout: time.Minute})
	img := pngOf(t, w, h)
	codes := make(chan int, n)
	for range n {
		go func() {
			code, body := upload(t, ts.Client(), ts.URL+"/api/search/upload?k=3", "image/png", img)
			if code != 200 {
				t.Errorf("upload: %d %s", code, body)
			}
			codes <- code
		}()
	}
	waitFor(t, "3 uploads decoding and 9 waiting", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.inside == 3 && s.pixels.waiting() == n-3
	})
	close(g.gate)
	for range n {
		<-codes
	}
	if g.peak != 3 || g.peakPx > budget || s.pixels.highWater() != budget {
		t.Errorf("%d images (%d pixels) decoded at once, the budget's high-water mark %d; want 3 images, at most %d pixels", g.peak, g.peakPx, s.pixels.highWater(), budget)
	}
	if h := s.pixels.inUse(); h != 0 {
		t.Errorf("%d pixels still held after every upload was answered", h)
	}
}

// TestUploadPixelBudgetRefusals: an image larger than the whole budget is
// refused with 413 without being decoded; one that finds the budget taken
// for longer than its SearchTimeout gets 503 with Retry-After; both
// messages give the figures. Once room is made, the same upload passes.
func TestUploadPixelBudgetRefusals(t *testing.T) {
	g := newGatedImageQuery(t)
	close(g.gate)
	s, ts := newServer(t, &Options{ImageQuery: eachModel(g.query), UploadPixelBudget: 10_000, SearchTimeout: 300 * time.Millisecond})
	url := ts.URL + "/api/search/upload?k=3"
	c := ts.Client()

	code, body := upload(t, c, url, "image/png", pngOf(t, 200, 100))
	want := "image of 200x100 = 20000 pixels: more than the 10000 pixels that this server decodes at once; send a smaller image"
	if e := decodeJSON[errorBody](t, body); code != http.StatusRequestEntityTooLarge || e.Error != want {
		t.Errorf("an image over the budget: %d %s, want 413 %q", code, body, want)
	}
	if g.peak != 0 {
		t.Errorf("the image over the budget was decoded")
	}

	// The budget is taken (by uploads in flight): the upload waits for
	// its SearchTimeout, then gets 503.
	if err := s.pixels.acquire(context.Background(), 9_000); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", url, bytes.NewReader(pngOf(t, 50, 50)))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	resp.Body.Close()
	e := decodeJSON[errorBody](t, b.Bytes())
	for _, w := range []string{"the server is decoding other uploaded images (9000 of the 10000 pixels it decodes at once are in use); this 50x50 image (2500 pixels) waited ", " for room: try again shortly"} {
		if !strings.Contains(e.Error, w) {
			t.Errorf("upload while the budget is taken: %d %s, want 503 with %q", resp.StatusCode, b.Bytes(), w)
		}
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("upload while the budget is taken: %d, Retry-After %q; want 503 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	s.pixels.release(9_000)
	if code, body := upload(t, c, url, "image/png", pngOf(t, 50, 50)); code != 200 {
		t.Errorf("upload once the budget has room: %d %s", code, body)
	}
	if h, w := s.pixels.inUse(), s.pixels.waiting(); h != 0 || w != 0 {
		t.Errorf("%d pixels held and %d uploads waiting at the end, want none", h, w)
	}
}

// TestUploadPixelBudgetClientGone: an upload whose client goes away while
// it waits for room leaves the queue, and holds nothing.
func TestUploadPixelBudgetClientGone(t *testing.T) {
	g := newGatedImageQuery(t)
	close(g.gate)
	s, ts := newServer(t, &Options{ImageQuery: eachModel(g.query), UploadPixelBudget: 10_000, SearchTimeout: time.Minute})
	if err := s.pixels.acquire(context.Background(), 10_000); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/api/search/upload", bytes.NewReader(pngOf(t, 50, 50)))
	var gone atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := ts.Client().Do(req); err == nil || !gone.Load() {
			t.Errorf("the request ended with %v before its client went away", err)
		}
	}()
	waitFor(t, "the upload to wait for room", func() bool { return s.pixels.waiting() == 1 })
	gone.Store(true)
	cancel()
	<-done
	waitFor(t, "the upload to leave the queue", func() bool { return s.pixels.waiting() == 0 })
	s.pixels.release(10_000)
	if h := s.pixels.inUse(); h != 0 || g.peak != 0 {
		t.Errorf("%d pixels held, %d images decoded; want none", h, g.peak)
	}
}

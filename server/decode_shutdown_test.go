package server

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"mime/multipart"
	"net/http"
	"testing"
	"time"

	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/model"
)

// slowJPEG returns a w x h JPEG of one flat colour whose one scan is
// repeated n times before EOI: within every limit (n <=
// extract.MaxJPEGScans), but each scan a full pass of the decoder over
// the image.
func slowJPEG(t testing.TB, w, h, n int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = 0x80
	}
	img.Set(0, 0, color.RGBA{255, 0, 0, 255})
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, nil); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	i := 2
	for b[i] == 0xFF && b[i+1] != 0xDA {
		i += 2 + (int(b[i+2])<<8 | int(b[i+3]))
	}
	scan := b[i : len(b)-2]
	out := append([]byte(nil), b[:i]...)
	for range n {
		out = append(out, scan...)
	}
	return append(out, 0xFF, 0xD9)
}

// serveUntilShutdown serves s, sends one upload built by send, waits for
// entered, then shuts the server down, and returns how long Serve took to
// return after its context was cancelled.
func serveUntilShutdown(t *testing.T, s *Server, entered <-chan struct{}, send func(url string)) time.Duration {
	t.Helper()
	ln := localListener(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	go send("http://" + ln.Addr().String() + "/api/search/upload")
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the upload never reached its decode")
	}
	start := time.Now()
	cancel()
	select {
	case <-served:
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return within 30 s of its shutdown")
	}
	return time.Since(start)
}

// TestShutdownCancelsUpload: an upload still decoding when the shutdown
// timeout ends is cancelled (its ImageQuery's context is done), so that
// Serve returns within the timeout and a margin, even for a multipart
// upload whose body was not read to its end (its connection's closing
// alone does not cancel its request's context).
func TestShutdownCancelsUpload(t *testing.T) {
	const timeout = time.Second
	entered := make(chan struct{})
	cancelled := make(chan struct{})
	s := quietServer(t, &Options{ShutdownTimeout: timeout, SearchTimeout: time.Minute,
		ImageQuery: eachModel(func(ctx context.Context, b []byte, m model.Model) (*model.Embeddings, error) {
			close(entered)
			<-ctx.Done() // a decode that stops only when cancelled
			close(cancelled)
			return nil, ctx.Err()
		})})
	took := serveUntilShutdown(t, s, entered, func(url string) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		fw, _ := mw.CreateFormFile("image", "a.png")
		fw.Write(pngOf(t, 10, 10))
		// A field after the image that the server never reads.
		fw, _ = mw.CreateFormField("padding")
		fw.Write(bytes.Repeat([]byte("x"), 1<<20))
		mw.Close()
		req, _ := http.NewRequest("POST", url, &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	if took > timeout+2*time.Second {
		t.Errorf("Serve returned %v after shutdown began, with a %v timeout", took, timeout)
	}
	select {
	case <-cancelled:
	default:
		t.Error("the upload's context was not cancelled")
	}
}

// TestShutdownCancelsDecode: the same with the real decode (as xmr serve's
// ImageQuery makes it) of an allowed but slow JPEG: extract.DecodeContext
// returns once the upload's context is cancelled, and Serve within its
// timeout and a margin.
func TestShutdownCancelsDecode(t *testing.T) {
	const timeout = time.Second
	img := slowJPEG(t, 4096, 4096, extract.MaxJPEGScans)
	entered := make(chan struct{})
	s := quietServer(t, &Options{ShutdownTimeout: timeout, SearchTimeout: time.Minute, MaxUploadBytes: 64 << 20,
		ImageQuery: eachModel(func(ctx context.Context, b []byte, m model.Model) (*model.Embeddings, error) {
			close(entered)
			_, err := extract.DecodeContext(ctx, b, "upload", extract.Limits{})
			return nil, err
		})})
	took := serveUntilShutdown(t, s, entered, func(url string) {
		if resp, err := http.Post(url, "image/jpeg", bytes.NewReader(img)); err == nil {
			resp.Body.Close()
		}
	})
	if took > timeout+2*time.Second {
		t.Errorf("Serve returned %v after shutdown began, with a %v timeout", took, timeout)
	}
}

// pngOfModel returns a w x h PNG of img's kind: NRGBA64 with one
// translucent pixel (16-bit RGBA), NRGBA (8-bit RGBA), Gray16, Gray.
func pngOfModel(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestUploadBudgetBitDepth: an upload holds from the pixel budget what
// its format needs decoded, read from its header: a 16-bit RGBA PNG (8
// bytes a pixel decoded, 3 for the RGB copy) holds 11/7 of what an 8-bit
// one of the same size holds (4 + 3 bytes a pixel, its pixels); 8-bit
// grey, 16-bit grey and JPEG hold their pixels.
func TestUploadBudgetBitDepth(t *testing.T) {
	const w, h = 70, 100
	rgba64 := image.NewNRGBA64(image.Rect(0, 0, w, h))
	rgba64.SetNRGBA64(0, 0, color.NRGBA64{R: 1000, A: 30000})
	rgba := image.NewNRGBA(image.Rect(0, 0, w, h))
	rgba.SetNRGBA(0, 0, color.NRGBA{R: 10, A: 100})
	var jpg bytes.Buffer
	jpeg.Encode(&jpg, rgba, nil)
	cases := []struct {
		name string
		img  []byte
		want int64
	}{
		{"16-bit RGBA PNG", pngOfModel(t, rgba64), w * h * 11 / 7},
		{"8-bit RGBA PNG", pngOfModel(t, rgba), w * h},
		{"16-bit grey PNG", pngOfModel(t, image.NewGray16(image.Rect(0, 0, w, h))), w * h},
		{"8-bit grey PNG", pngOfModel(t, image.NewGray(image.Rect(0, 0, w, h))), w * h},
		{"JPEG", jpg.Bytes(), w * h},
	}
	held := make(chan int64, 1)
	var s *Server
	s, ts := newServer(t, &Options{UploadPixelBudget: 1_000_000,
		ImageQuery: eachModel(func(ctx context.Context, b []byte, m model.Model) (*model.Embeddings, error) {
			held <- s.pixels.inUse()
			return nil, ErrBadImage
		})})
	for _, c := range cases {
		upload(t, ts.Client(), ts.URL+"/api/search/upload", "application/octet-stream", c.img)
		if got := <-held; got != c.want {
			t.Errorf("%s of %dx%d: held %d pixels of the budget, want %d", c.name, w, h, got, c.want)
		}
	}
	// An image that fits the budget by its pixels, not by its bytes.
	_, ts = newServer(t, &Options{UploadPixelBudget: w*h + 1, ImageQuery: fakeImageQuery(t)})
	code, body := upload(t, ts.Client(), ts.URL+"/api/search/upload", "image/png", pngOfModel(t, rgba64))
	if code != http.StatusRequestEntityTooLarge || !bytes.Contains(body, []byte("11 bytes each")) {
		t.Errorf("a 16-bit PNG over the budget by its bytes: %d %s, want 413 naming its 11 bytes a pixel", code, body)
	}
}

// TestUploadDecodeTimeout: an upload whose decode runs past the search
// timeout (an allowed but slow JPEG, decoded as xmr serve's ImageQuery
// decodes it) gets 503 at the timeout, and gives its search turn back:
// a text search then runs.
func TestUploadDecodeTimeout(t *testing.T) {
	const timeout = 500 * time.Millisecond
	img := slowJPEG(t, 4096, 4096, extract.MaxJPEGScans)
	f := testFixture(t)
	s, ts := newServer(t, &Options{SearchTimeout: timeout, MaxConcurrent: 1, MaxUploadBytes: 64 << 20,
		ImageQuery: eachModel(func(ctx context.Context, b []byte, m model.Model) (*model.Embeddings, error) {
			_, err := extract.DecodeContext(ctx, b, "upload", extract.Limits{})
			return nil, err
		})})
	start := time.Now()
	code, body := upload(t, ts.Client(), ts.URL+"/api/search/upload", "image/jpeg", img)
	if took := time.Since(start); took > timeout+2*time.Second {
		t.Errorf("the upload was answered after %v, with a %v search timeout", took, timeout)
	}
	if code != http.StatusServiceUnavailable {
		t.Errorf("an upload decoding past the search timeout: %d %s, want 503", code, body)
	}
	if code, body := post(t, ts.Client(), ts.URL+"/api/search/text", map[string]any{"text": f.captions[0].Text, "k": 1}); code != http.StatusOK {
		t.Errorf("a text search after it: %d %s", code, body)
	}
	if h := s.pixels.inUse(); h != 0 {
		t.Errorf("%d pixels still held", h)
	}
}

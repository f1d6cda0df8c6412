package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/model"
)

// fakeImageQuery stands in for the extractor: a body starting with "PNG"
// is image 0 of the world's test split (encoded by the index's model),
// "HUGE" is over its limits, anything else is not an image.
func fakeImageQuery(t *testing.T) ImageQuery {
	s, err := data.LoadPrecomp(context.Background(), world.Dir(t), "test", &data.PrecompOptions{NoMmap: true})
	if err != nil {
		t.Fatal(err)
	}
	img := s.Images.Slice(0, 1)
	return eachModel(func(ctx context.Context, b []byte, m model.Model) (*model.Embeddings, error) {
		switch {
		case bytes.HasPrefix(b, []byte("PNG")):
			return model.EncodeImages(ctx, m, img, nil)
		case bytes.HasPrefix(b, []byte("HUGE")):
			return nil, fmt.Errorf("%w: upload: header declares 100000x100000 pixels", ErrImageTooLarge)
		}
		return nil, fmt.Errorf("%w: upload: not a JPEG or PNG image", ErrBadImage)
	})
}

// eachModel makes an ImageQuery of a function that encodes an upload for
// one model: it is called for each model in turn.
func eachModel(f func(ctx context.Context, b []byte, m model.Model) (*model.Embeddings, error)) ImageQuery {
	return func(ctx context.Context, b []byte, models []model.Model) ([]*model.Embeddings, error) {
		qs := make([]*model.Embeddings, len(models))
		for k, m := range models {
			q, err := f(ctx, b, m)
			if err != nil {
				return nil, err
			}
			qs[k] = q
		}
		return qs, nil
	}
}

func upload(t *testing.T, c *http.Client, url, ctype string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes()
}

// TestSearchUpload searches by an uploaded image, raw and in a form, and
// gets what a search by the same image's id gets; bad uploads get their
// statuses.
func TestSearchUpload(t *testing.T) {
	f := testFixture(t)
	_, ts := newServer(t, &Options{ImageQuery: fakeImageQuery(t), MaxUploadBytes: 1000})
	c := ts.Client()
	code, body := post(t, c, ts.URL+"/api/search/image", map[string]any{"image_id": f.ids[0], "k": 5})
	if code != 200 {
		t.Fatalf("search by id: %d %s", code, body)
	}
	want := decodeJSON[searchResponse](t, body)

	code, body = upload(t, c, ts.URL+"/api/search/upload?k=5", "image/png", []byte("PNG..."))
	got := decodeJSON[searchResponse](t, body)
	if code != 200 || got.Mode != "image-to-text" || len(got.Results) != 5 {
		t.Fatalf("upload: %d %s", code, body)
	}
	for i := range got.Results {
		if got.Results[i].Item != want.Results[i].Item || got.Results[i].Caption.Text != want.Results[i].Caption.Text {
			t.Errorf("result %d: %+v, by id %+v", i, got.Results[i], want.Results[i])
		}
	}

	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	mw.WriteField("note", "x")
	fw, _ := mw.CreateFormFile("image", "photo.png")
	fw.Write([]byte("PNG..."))
	mw.Close()
	code, body = upload(t, c, ts.URL+"/api/search/upload?k=5", mw.FormDataContentType(), form.Bytes())
	if r := decodeJSON[searchResponse](t, body); code != 200 || len(r.Results) != 5 || r.Results[0].Item != want.Results[0].Item {
		t.Errorf("form upload: %d %s", code, body)
	}

	tests := []struct {
		name, url, ctype string
		body             []byte
		code             int
		want             string
	}{
		{"not an image", "", "image/jpeg", []byte("hello"), 400, "not a JPEG or PNG"},
		{"bomb", "", "image/png", []byte("HUGE"), 413, "100000x100000"},
		{"too many bytes", "", "image/png", bytes.Repeat([]byte("PNG"), 400), 413, "larger than 1000 bytes"},
		{"empty", "", "image/png", nil, 400, "empty upload"},
		{"bad k", "?k=x", "image/png", []byte("PNG"), 400, "k: want a whole number"},
		{"k too large", "?k=1000", "image/png", []byte("PNG"), 400, "k: want a number of results from 1 to 100"},
		{"json", "", "application/json", []byte(`{}`), 415, "image/jpeg or image/png"},
		{"form without the field", "", "multipart/form-data; boundary=x", []byte("--x--\r\n"), 400, `no file field "image"`},
	}
	for _, tc := range tests {
		code, body := upload(t, c, ts.URL+"/api/search/upload"+tc.url, tc.ctype, tc.body)
		e := decodeJSON[errorBody](t, body)
		if code != tc.code || !bytes.Contains([]byte(e.Error), []byte(tc.want)) {
			t.Errorf("%s: %d %s, want %d and %q", tc.name, code, body, tc.code, tc.want)
		}
	}
	code, _, body = do(t, c, "GET", ts.URL+"/api/info", nil)
	if info := decodeJSON[infoResponse](t, body); code != 200 || !info.ImageUpload || info.MaxUploadBytes != 1000 {
		t.Errorf("info: %d %s", code, body)
	}

	// A server without an ImageQuery refuses uploads.
	_, ts2 := newServer(t, nil)
	code, body = upload(t, ts2.Client(), ts2.URL+"/api/search/upload", "image/png", []byte("PNG"))
	if code != 501 || !bytes.Contains(body, []byte("takes no uploaded images")) {
		t.Errorf("no ImageQuery: %d %s", code, body)
	}
	_, _, body = do(t, ts2.Client(), "GET", ts2.URL+"/api/info", nil)
	if decodeJSON[infoResponse](t, body).ImageUpload {
		t.Errorf("info without ImageQuery: %s", body)
	}
}

// TestUploadReadTimeout: an upload whose body stops arriving is answered
// 408 with a message that names the read timeout, not a raw "i/o timeout".
func TestUploadReadTimeout(t *testing.T) {
	s := quietServer(t, &Options{ImageQuery: fakeImageQuery(t), ReadTimeout: 300 * time.Millisecond})
	ln := localListener(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	defer func() { cancel(); <-served }()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// 1,000 bytes announced, 10 sent, and then nothing.
	if _, err := io.WriteString(c, "POST /api/search/upload HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\nContent-Length: 1000\r\n\r\n0123456789"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled upload: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "did not arrive within the server's 300ms read timeout") {
		t.Errorf("stalled upload: %d %s, want 408 naming the read timeout", resp.StatusCode, body)
	}
}

// TestUploadRefusedReason: with no ImageQuery the 501 gives the reason the
// server was told (the detector could not be loaded), else the default.
func TestUploadRefusedReason(t *testing.T) {
	cases := []struct{ reason, want string }{
		{"", "its index's model was not trained on features that xmr extract makes"},
		{"the detector could not be loaded: no weights in /cache", "this server takes no uploaded images: the detector could not be loaded: no weights in /cache"},
	}
	for _, c := range cases {
		_, ts := newServer(t, &Options{NoImageQuery: c.reason})
		code, _, body := do(t, ts.Client(), "POST", ts.URL+"/api/search/upload", []byte("x"))
		if code != http.StatusNotImplemented || !strings.Contains(string(body), c.want) {
			t.Errorf("reason %q: %d %s, want 501 with %q", c.reason, code, body, c.want)
		}
	}
}

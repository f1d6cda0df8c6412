package server

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserUpload drives the page's photo control in headless Chromium:
// a photo chosen in it is uploaded and its captions are listed, the same
// as a search by the same image gets; a file the server cannot read and a
// file over the upload limit each show their message. The extractor is
// fakeImageQuery (a body starting with "PNG" is image 0 of the test split).
func TestBrowserUpload(t *testing.T) {
	ctx := browser(t)
	f := testFixture(t)
	const limit = 1000
	_, ts := newServer(t, &Options{Images: f.images, ImageQuery: fakeImageQuery(t), MaxUploadBytes: limit})
	errs := pageErrors(ctx)
	code, body := post(t, ts.Client(), ts.URL+"/api/search/image", map[string]any{"image_id": f.ids[0], "k": 24})
	if code != 200 {
		t.Fatalf("search by id: %d %s", code, body)
	}
	want := decodeJSON[searchResponse](t, body)
	if len(want.Results) != 24 {
		t.Fatalf("search by id: %d results, want 24", len(want.Results))
	}

	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	photo := write("photo.png", []byte("PNG: stands in for a photo"))
	notImage := write("notes.jpg", []byte("hello, not an image"))
	big := write("big.png", bytes.Repeat([]byte("PNG"), limit))

	eval, do := pageActions(t, ctx, errs)

	do("upload a photo",
		chromedp.Navigate(ts.URL),
		chromedp.WaitVisible("#photo"),
		chromedp.SetUploadFiles("#photo", []string{photo}),
		chromedp.WaitVisible("#results ol.captions li"),
	)
	items := eval(`[...document.querySelectorAll("#results ol.captions li")].map(li => li.textContent)`).([]any)
	if len(items) != len(want.Results) {
		t.Fatalf("%d captions listed for the photo, want %d", len(items), len(want.Results))
	}
	for i, it := range items {
		w := want.Results[i]
		if s := it.(string); !strings.Contains(s, w.Caption.Text) || !strings.Contains(s, "("+w.Caption.ImageID+")") {
			t.Errorf("caption %d listed as %q, want %q of %s", i, s, w.Caption.Text, w.Caption.ImageID)
		}
	}
	if s := eval(`document.getElementById("status").textContent`).(string); !strings.Contains(s, "24 captions for photo.png") {
		t.Errorf("status %q after the upload", s)
	}

	// A file that is no image: the server's message, no results.
	do("upload a file that is no image",
		chromedp.SetUploadFiles("#photo", []string{notImage}),
		chromedp.Poll[chromedp.Void](`document.getElementById("status").classList.contains("error")`),
	)
	if s := eval(`document.getElementById("status").textContent`).(string); !strings.Contains(s, "not a JPEG or PNG") {
		t.Errorf("status %q after uploading a file that is no image", s)
	}
	if n := eval(`document.querySelectorAll("#results li").length`); n != 0.0 {
		t.Errorf("%v results listed after a failed upload", n)
	}

	// A file over the limit is refused before it is sent.
	do("choose a file over the limit",
		chromedp.Navigate("about:blank"),
		chromedp.Navigate(ts.URL),
		chromedp.WaitVisible("#photo"),
		chromedp.SetUploadFiles("#photo", []string{big}),
		chromedp.Poll[chromedp.Void](`document.getElementById("status").classList.contains("error")`),
	)
	if s := eval(`document.getElementById("status").textContent`).(string); !strings.Contains(s, "big.png is larger than 1000 bytes") {
		t.Errorf("status %q after choosing a file over the limit", s)
	}
	// Chromium logs the refused upload's status; nothing else may be
	// logged.
	var other []string
	for _, e := range errs() {
		if !strings.Contains(e, "status of 400 (Bad Request)") {
			other = append(other, e)
		}
	}
	if len(other) > 0 {
		t.Errorf("the page logged errors: %q", other)
	}
}

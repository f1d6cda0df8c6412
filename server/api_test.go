package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
)

// stopWords says which words the API must mark as stop words.
var stopWords = map[string]bool{"a": true, "the": true, ".": true, "of": true, "and": true, "with": true,
	"circle": false, "red": false, "blue": false, "green": false, "small": false, "large": false, "big": false}

// TestSearchAndDetails exercises every endpoint's answer on the shared
// index: text and image search, alignments, item details, the page.
func TestSearchAndDetails(t *testing.T) {
	f := testFixture(t)
	_, ts := newServer(t, &Options{Images: f.images})
	c := ts.Client()
	q := f.captions[12].Text

	code, body := post(t, c, ts.URL+"/api/search/text", map[string]any{"text": q, "k": 5, "explain": true})
	if code != 200 {
		t.Fatalf("text search: %d %s", code, body)
	}
	tr := decodeJSON[searchResponse](t, body)
	if tr.Query != q || tr.Mode != "text-to-image" || tr.Scoring != "MrSw" || len(tr.Results) != 5 {
		t.Fatalf("text search answer %s", body)
	}
	for k, r := range tr.Results {
		if r.Rank != k+1 || r.Image == nil || r.Caption != nil || (k > 0 && r.Score > tr.Results[k-1].Score) {
			t.Fatalf("result %d: %+v", k, r)
		}
		if r.Image.URL != "/images/"+r.Image.ID+".png" || r.Image.Width != 160 || len(r.Image.Boxes) == 0 {
			t.Errorf("result %d image %+v", k, r.Image)
		}
		if len(r.Alignments) == 0 {
			t.Errorf("result %d has no alignments", k)
		}
		for _, a := range r.Alignments {
			if !slices.Contains(strings.Fields(q), a.Word) || a.Box == nil || *a.Box != r.Image.Boxes[a.Region] {
				t.Errorf("alignment %+v for %q", a, q)
			}
			if w, ok := stopWords[a.Word]; ok && w != a.StopWord {
				t.Errorf("alignment %+v: stop_word should be %v", a, w)
			}
		}
	}
	// The alignment of the best image with the query gives its score and
	// its alignments.
	best := tr.Results[0]
	code, body = post(t, c, ts.URL+"/api/align", map[string]any{"image_id": best.Image.ID, "text": q})
	if code != 200 {
		t.Fatalf("align: %d %s", code, body)
	}
	al := decodeJSON[alignResponse](t, body)
	if al.Image.ID != best.Image.ID || al.Text != q || math.Abs(float64(al.Score-best.Score)) > 1e-4 || len(al.Alignments) != len(best.Alignments) {
		t.Fatalf("align answer %s; search gave %+v", body, best)
	}
	for i, a := range al.Alignments {
		if b := best.Alignments[i]; a.Word != b.Word || a.Region != b.Region {
			t.Errorf("align %+v, search %+v", a, b)
		}
	}

	id := f.ids[3]
	code, body = post(t, c, ts.URL+"/api/search/image", map[string]any{"image_id": id, "k": 7, "explain": true})
	if code != 200 {
		t.Fatalf("image search: %d %s", code, body)
	}
	ir := decodeJSON[searchResponse](t, body)
	if ir.Mode != "image-to-text" || len(ir.Results) != 7 || ir.Results[0].Caption == nil || ir.Results[0].Image != nil {
		t.Fatalf("image search answer %s", body)
	}
	for _, r := range ir.Results {
		if f.captions[r.Item].Text != r.Caption.Text || r.Caption.Item != r.Item || f.captions[r.Item].ImageID != r.Caption.ImageID || len(r.Alignments) == 0 {
			t.Errorf("caption result %+v", r)
		}
	}
	cr := ir.Results[2]
	code, body = post(t, c, ts.URL+"/api/align", map[string]any{"image_id": id, "caption": cr.Item})
	if code != 200 {
		t.Fatalf("align caption: %d %s", code, body)
	}
	al = decodeJSON[alignResponse](t, body)
	if al.Text != cr.Caption.Text || al.Caption == nil || *al.Caption != cr.Item || math.Abs(float64(al.Score-cr.Score)) > 1e-4 {
		t.Fatalf("align caption answer %s; search gave %+v", body, cr)
	}

	code, _, body = do(t, c, "GET", ts.URL+"/api/images/"+id, nil)
	if code != 200 {
		t.Fatalf("image details: %d %s", code, body)
	}
	det := decodeJSON[struct {
		imageJSON
		Captions []struct {
			Item int
			Text string
		}
	}](t, body)
	var want []string
	for _, cp := range f.captions {
		if cp.ImageID == id {
			want = append(want, cp.Text)
		}
	}
	var got []string
	for _, cp := range det.Captions {
		got = append(got, cp.Text)
		if f.captions[cp.Item].Text != cp.Text {
			t.Errorf("caption item %d is %q, the details say %q", cp.Item, f.captions[cp.Item].Text, cp.Text)
		}
	}
	if det.ID != id || det.URL == "" || det.Height != 120 || len(det.Boxes) < 4 || !slices.Equal(got, want) {
		t.Fatalf("image details %s; want captions %q", body, want)
	}

	code, _, body = do(t, c, "GET", ts.URL+"/api/captions/17", nil)
	if cp := decodeJSON[captionJSON](t, body); code != 200 || cp.Item != 17 || cp.Text != f.captions[17].Text || cp.ImageID != f.captions[17].ImageID {
		t.Fatalf("caption details: %d %s", code, body)
	}
	code, _, body = do(t, c, "GET", ts.URL+"/api/info", nil)
	if in := decodeJSON[infoResponse](t, body); code != 200 || in.Images != 40 || in.Captions != 200 || in.Model != "teran" || !in.ImageFiles || in.Example != f.captions[0].Text {
		t.Fatalf("info: %d %s", code, body)
	}
	code, _, body = do(t, c, "GET", ts.URL+"/healthz", nil)
	if code != 200 || !bytes.Contains(body, []byte(`"status":"ok"`)) {
		t.Fatalf("healthz: %d %s", code, body)
	}
	code, h, body := do(t, c, "GET", ts.URL+det.URL, nil)
	if code != 200 || h.Get("Content-Type") != "image/png" || !bytes.HasPrefix(body, []byte("\x89PNG")) {
		t.Fatalf("image file %s: %d %s", det.URL, code, h)
	}
	code, h, body = do(t, c, "GET", ts.URL+"/", nil)
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !bytes.Contains(body, []byte("<title>xmr")) || !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("page: %d %s %.100s", code, h, body)
	}
	for _, name := range []string{"app.js", "style.css"} {
		code, h, body = do(t, c, "GET", ts.URL+"/static/"+name, nil)
		if code != 200 || len(body) < 1000 || h.Get("ETag") == "" {
			t.Fatalf("%s: %d %s", name, code, h)
		}
	}
}

// TestNoImageFiles checks that without an image directory no image has a
// URL and /images/ serves nothing.
func TestNoImageFiles(t *testing.T) {
	f := testFixture(t)
	_, ts := newServer(t, nil)
	code, body := post(t, ts.Client(), ts.URL+"/api/search/text", map[string]any{"text": f.captions[0].Text, "k": 3})
	r := decodeJSON[searchResponse](t, body)
	if code != 200 || len(r.Results) != 3 || r.Results[0].Image.URL != "" || len(r.Results[0].Image.Boxes) == 0 || r.Results[0].Alignments != nil {
		t.Fatalf("search: %d %s", code, body)
	}
	if code, _, body := do(t, ts.Client(), "GET", ts.URL+"/images/"+f.ids[0]+".png", nil); code != 404 {
		t.Fatalf("image file without --images: %d %s", code, body)
	}
}

// TestErrors sends bad requests: each gets its status and a JSON error
// that says what is wrong.
func TestErrors(t *testing.T) {
	f := testFixture(t)
	_, ts := newServer(t, &Options{Images: f.images})
	id := f.ids[0]
	long := strings.Repeat("red circle ", 200)       // 2,200 characters: under the body limit, over the query limit
	huge := strings.Repeat("a big blue star ", 5000) // 80,000 bytes: over the body limit
	cases := []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"POST", "/api/search/text", `{"text": "a red`, 400, "malformed JSON"},
		{"POST", "/api/search/text", `{"text": "a red circle"`, 400, "malformed JSON"},
		{"POST", "/api/search/text", `{"text": "a"} {"text": "b"}`, 400, "data after the JSON object"},
		{"POST", "/api/search/text", `{"text": 5}`, 400, `field "text": want a string, got a JSON number`},
		{"POST", "/api/search/text", `{"text": "a circle", "k": "5"}`, 400, `field "k": want a whole number, got a JSON string`},
		{"POST", "/api/search/text", `{"text": "a circle", "explain": 1}`, 400, `field "explain": want true or false`},
		{"POST", "/api/search/text", `{"txt": "a red circle"}`, 400, `unknown field "txt"`},
		{"POST", "/api/search/text", `["a red circle"]`, 400, "want a JSON object, got a JSON array"},
		{"POST", "/api/search/text", ``, 400, "empty request body"},
		{"POST", "/api/search/text", `{}`, 400, "text: required"},
		{"POST", "/api/search/text", `{"text": "  \t "}`, 400, "text: required"},
		{"POST", "/api/search/text", `{"text": "\ufeff\u200b \u2060"}`, 400, "text: required"}, // nothing visible: text.Blank
		{"POST", "/api/search/text", `{"text": "` + long + `"}`, 400, "text: 2200 characters, at most 1000"},
		{"POST", "/api/search/text", `{"text": "` + huge + `"}`, 413, "request body larger than 65536 bytes"},
		{"POST", "/api/search/text", `{"text": "a circle", "k": -1}`, 400, "k: want a number of results from 1 to 100, got -1"},
		{"POST", "/api/search/text", `{"text": "a circle", "k": 101}`, 400, "k: want a number of results from 1 to 100, got 101"},
		{"POST", "/api/search/image", `{"image_id": "no-such-image"}`, 404, `no image "no-such-image" in the index`},
		{"POST", "/api/search/image", `{}`, 400, "image_id: required"},
		{"POST", "/api/search/image", `{"image_id": "` + id + `", "k": 1000}`, 400, "k: want a number of results from 1 to 100"},
		{"POST", "/api/align", `{"image_id": "` + id + `"}`, 400, "give text (a sentence) or caption"},
		{"POST", "/api/align", `{"image_id": "` + id + `", "text": "a red circle", "caption": 2}`, 400, "give text (a sentence) or caption"},
		{"POST", "/api/align", `{"image_id": "nope", "text": "a red circle"}`, 404, `no image "nope" in the index`},
		{"POST", "/api/align", `{"image_id": "` + id + `", "caption": 100000}`, 404, "no caption 100000 in the index (it holds captions 0 to 199)"},
		{"POST", "/api/align", `{"image_id": "` + id + `", "caption": -3}`, 404, "no caption -3"},
		{"POST", "/api/align", `{"image_id": "` + id + `", "caption": 1.5}`, 400, `field "caption": want a whole number, got a JSON number 1.5`},
		{"GET", "/api/images/nope", ``, 404, `no image "nope" in the index`},
		{"GET", "/api/captions/200", ``, 404, "no caption 200"},
		{"GET", "/api/captions/abc", ``, 400, `item: want a caption's item number (a whole number), got "abc"`},
		{"GET", "/api/search/text", ``, 405, "method GET not allowed on /api/search/text: use POST"},
		{"PUT", "/api/align", `{}`, 405, "use POST"},
		{"DELETE", "/api/images/" + id, ``, 405, "use GET, HEAD"},
		{"POST", "/healthz", ``, 405, "use GET, HEAD"},
		{"POST", "/", ``, 405, "use GET, HEAD"},
		{"GET", "/api/nothing", ``, 404, "no endpoint GET /api/nothing"},
		{"GET", "/static/secret.go", ``, 404, `no file "secret.go"`},
		{"GET", "/images/" + id + ".txt", ``, 404, "no image file"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s %s %.30s", c.method, c.path, c.body), func(t *testing.T) {
			var body []byte
			if c.body != "" || c.method == "POST" {
				body = []byte(c.body)
			}
			code, h, got := do(t, ts.Client(), c.method, ts.URL+c.path, body)
			if code != c.code {
				t.Fatalf("status %d, want %d: %s", code, c.code, got)
			}
			if ct := h.Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Fatalf("Content-Type %q", ct)
			}
			var e errorBody
			if err := json.Unmarshal(got, &e); err != nil || !strings.Contains(e.Error, c.want) {
				t.Fatalf("error %s, want one containing %q", got, c.want)
			}
			if c.code == 405 && h.Get("Allow") == "" {
				t.Fatalf("405 without Allow")
			}
		})
	}
}

// TestConcurrentQueries sends text and image searches and alignments from
// 32 goroutines at once (run with -race): every answer is 200 and equals
// the one a lone request gets.
func TestConcurrentQueries(t *testing.T) {
	f := testFixture(t)
	_, ts := newServer(t, &Options{Images: f.images})
	c := ts.Client()
	type req struct {
		path string
		body map[string]any
	}
	var reqs []req
	for k := range 6 {
		cp := f.captions[k*31]
		reqs = append(reqs,
			req{"/api/search/text", map[string]any{"text": cp.Text, "k": 8, "explain": true}},
			req{"/api/search/image", map[string]any{"image_id": cp.ImageID, "k": 8}},
			req{"/api/align", map[string]any{"image_id": f.ids[k], "text": cp.Text}})
	}
	want := make([][]byte, len(reqs))
	for i, r := range reqs {
		code, body := post(t, c, ts.URL+r.path, r.body)
		if code != 200 {
			t.Fatalf("%s: %d %s", r.path, code, body)
		}
		want[i] = withoutTiming(t, body)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 32)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 3 {
				i := (g*3 + k) % len(reqs)
				b, err := json.Marshal(reqs[i].body)
				if err != nil {
					errs <- err.Error()
					return
				}
				resp, err := c.Post(ts.URL+reqs[i].path, "application/json", bytes.NewReader(b))
				if err != nil {
					errs <- err.Error()
					return
				}
				var buf bytes.Buffer
				buf.ReadFrom(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					errs <- fmt.Sprintf("%s: %d %s", reqs[i].path, resp.StatusCode, buf.Bytes())
					return
				}
				if got := withoutTiming(t, buf.Bytes()); !bytes.Equal(got, want[i]) {
					errs <- fmt.Sprintf("%s %v: answer differs from the lone request's:\n%s\n%s", reqs[i].path, reqs[i].body, got, want[i])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// withoutTiming drops the "ms" field of an answer, which varies.
func withoutTiming(t testing.TB, b []byte) []byte {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	delete(m, "ms")
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

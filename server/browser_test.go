package server

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium returns the Chromium binary: $XMR_CHROMIUM, else the first of
// the usual names on $PATH; "" when there is none.
func chromium() string {
	if p := os.Getenv("XMR_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser starts a headless Chromium with a fresh profile and returns a
// tab's context. Without Chromium the test is skipped, unless CI is set:
// CI must run it (scripts/test installs Chromium).
func browser(t *testing.T) context.Context {
	t.Helper()
	bin := chromium()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but there is no Chromium (apt-get install chromium, as scripts/test does; or set XMR_CHROMIUM)")
		}
		t.Skip("no Chromium on this machine (apt-get install chromium, or set XMR_CHROMIUM); CI runs this test")
	}
	// The machine has no internet: these flags keep Chromium from trying
	// to reach it (and from hanging on the attempt).
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() {
		cancelTime()
		cancelTab()
		cancelAlloc()
	})
	return ctx
}

// pageErrors collects what the page writes to the console as errors and
// its uncaught exceptions (a blocked script or style under the page's
// content security policy is one).
func pageErrors(ctx context.Context) func() []string {
	var mu sync.Mutex
	var errs []string
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == "error" {
				mu.Lock()
				errs = append(errs, m.String())
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(errs)
	}
}

// TestBrowser drives the page in headless Chromium: it types a query,
// sees the result images, opens one and finds the alignment overlay (a
// labelled box per word), finds the image's captions, shows one of its
// captions' alignment, and opens the same view on a phone-width screen
// from the page's address. It asserts on the DOM and saves screenshots in
// its temporary directory (and in $XMR_SCREENSHOTS when set).
func TestBrowser(t *testing.T) {
	ctx := browser(t)
	f := testFixture(t)
	_, ts := newServer(t, &Options{Images: f.images})
	_, plain := newServer(t, nil)
	errs := pageErrors(ctx)
	shots := t.TempDir()
	save := func(name string) {
		t.Helper()
		b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		for _, dir := range []string{shots, os.Getenv("XMR_SCREENSHOTS")} {
			if dir == "" {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("screenshot %s", filepath.Join(shots, name))
	}
	eval, do := pageActions(t, ctx, errs)

	q := f.captions[20].Text
	do("type a query",
		chromedp.Navigate(ts.URL),
		chromedp.WaitVisible("#q"),
		chromedp.Poll[chromedp.Void](`document.getElementById("info").textContent.includes("40 images")`),
		chromedp.SendKeys("#q", q),
		chromedp.Click(`#search button[type=submit]`),
		chromedp.WaitVisible("#results .card"),
		// Every shown image has loaded from the server.
		chromedp.Poll[chromedp.Void](`[...document.querySelectorAll("#results .card img")].slice(0, 8).every(i => i.complete && i.naturalWidth === 160)`),
	)
	if n := eval(`document.querySelectorAll("#results .card").length`); n != 24.0 {
		t.Fatalf("%v result cards, want 24", n)
	}
	if s := eval(`document.getElementById("status").textContent`).(string); !strings.Contains(s, "24 images for") {
		t.Fatalf("status %q", s)
	}
	if h := eval(`location.hash`).(string); h != "#q="+strings.ReplaceAll(url.QueryEscape(q), "%27", "'") {
		t.Errorf("address %q does not keep the query %q", h, q)
	}
	save("desktop-results.png")

	do("open the best image",
		chromedp.Click("#results .card"),
		chromedp.WaitVisible("#detail #overlay g.align"),
		chromedp.Poll[chromedp.Void](`document.querySelector("#stage img").complete`),
	)
	checkOverlay(t, eval, q)
	if id := eval(`document.getElementById("detail-title").textContent`); id != eval(`document.querySelector("#results .card").dataset.id`) {
		t.Errorf("the dialog shows %v, the first card is another image", id)
	}
	save("desktop-alignment.png")
	shown := eval(`document.querySelectorAll("#overlay g.align").length`).(float64)
	do("show stop words", chromedp.Click("#stopwords"))
	if all := eval(`document.querySelectorAll("#overlay g.align").length`).(float64); all <= shown {
		t.Errorf("with stop words %v boxes, without %v", all, shown)
	}

	do("find the image's captions",
		chromedp.Click("#findcaps"),
		chromedp.WaitVisible("#captions li button"),
	)
	if n := eval(`document.querySelectorAll("#captions li").length`); n != 10.0 {
		t.Fatalf("%v captions found, want 10", n)
	}
	first := eval(`document.querySelector("#captions li button").textContent`).(string)
	do("show a found caption's alignment", chromedp.Click("#captions li button"))
	if s := eval(`document.getElementById("sentence").textContent.trim()`).(string); !strings.HasSuffix(strings.TrimSuffix(first, " ✓"), s) {
		t.Errorf("sentence %q after choosing the caption %q", s, first)
	}
	truth := eval(`document.querySelector("#truth li button").textContent`).(string)
	do("show one of the image's own captions",
		chromedp.Click("#truth li button"),
		chromedp.Poll[chromedp.Void](`document.getElementById("sentence").textContent.trim() === `+jsString(truth)),
	)
	checkOverlay(t, eval, truth)
	do("close the dialog", chromedp.Click("#close"), chromedp.WaitNotVisible("#detail"))

	// A phone: the address opens the same view; nothing is wider than
	// the screen.
	id := eval(`document.querySelector("#results .card").dataset.id`).(string)
	do("phone",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait, chromedp.EmulateScale(2)),
		chromedp.Navigate("about:blank"), // else only the address's fragment changes: no new page
		chromedp.Navigate(ts.URL+"/#"+url.Values{"q": {q}, "image": {id}}.Encode()),
		chromedp.WaitVisible("#detail #overlay g.align"),
		chromedp.Poll[chromedp.Void](`document.querySelector("#stage img").complete`),
	)
	checkOverlay(t, eval, q)
	if w := eval(`[document.documentElement.scrollWidth, document.getElementById("detail").getBoundingClientRect().width]`).([]any); w[0].(float64) > 390 || w[1].(float64) > 390 {
		t.Errorf("on a 390-pixel screen the page is %v wide and the dialog %v", w[0], w[1])
	}
	save("phone-alignment.png")
	do("phone results", chromedp.Click("#close"), chromedp.WaitNotVisible("#detail"))
	if cols := eval(`getComputedStyle(document.getElementById("results")).gridTemplateColumns.split(" ").length`).(float64); cols < 2 || cols > 3 {
		t.Errorf("%v columns of results on a phone", cols)
	}
	save("phone-results.png")

	// Without image files: each result is a drawing of its regions.
	do("placeholders",
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(plain.URL+"/#q="+url.QueryEscape(q)),
		chromedp.WaitVisible("#results .card svg.placeholder"),
	)
	if n := eval(`[document.querySelectorAll("#results .card img").length, document.querySelectorAll("#results .card svg.placeholder rect.ph-box").length]`).([]any); n[0] != 0.0 || n[1].(float64) < 24*4 {
		t.Errorf("without image files: %v images and %v region boxes", n[0], n[1])
	}
	if e := errs(); len(e) > 0 {
		t.Errorf("the page logged errors: %q", e)
	}
}

// checkOverlay checks the overlay of sentence: a box and a label "word
// cosine" (drawn after every box, so over them) for each word shown, each
// a word of the sentence, as many as the list beside it.
func checkOverlay(t *testing.T, eval func(string) any, sentence string) {
	t.Helper()
	labels := eval(`[...document.querySelectorAll("#overlay g.align")].map((g, i) => [g.dataset.word, g.querySelector("rect.box") !== null, document.querySelectorAll("#overlay g.label")[i].textContent])`).([]any)
	if len(labels) == 0 {
		t.Fatalf("no alignment boxes for %q", sentence)
	}
	words := strings.Fields(sentence)
	for _, l := range labels {
		l := l.([]any)
		word, hasBox, label := l[0].(string), l[1].(bool), l[2].(string)
		if !slices.Contains(words, word) || !hasBox || !regexp.MustCompile(`^`+regexp.QuoteMeta(word)+` -?[01]\.\d\d$`).MatchString(label) {
			t.Errorf("overlay group %q (box %v, label %q) for sentence %q", word, hasBox, label, sentence)
		}
	}
	if n := eval(`document.querySelectorAll("#words li").length`).(float64); int(n) != len(labels) {
		t.Errorf("%v words listed, %d boxes drawn", n, len(labels))
	}
}

// jsString quotes s as a JavaScript string.
func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// pageActions returns a browser test's two helpers: eval runs JavaScript
// in the page and returns its value, do runs steps named what; each fails
// the test on an error, do with the page's errors so far (errs).
func pageActions(t *testing.T, ctx context.Context, errs func() []string) (eval func(js string) any, do func(what string, steps ...chromedp.Action[chromedp.Void])) {
	eval = func(js string) any {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[any](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return v
	}
	do = func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v\npage errors: %q", what, err, errs())
		}
	}
	return eval, do
}

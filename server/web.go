package server

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"
)

// web holds the page: plain HTML, CSS and JavaScript, no external assets.
//
//go:embed web/index.html web/app.js web/style.css
var web embed.FS

// contentSecurityPolicy lets the page load only its own script, style,
// images and API.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	s.webFile(w, r, "index.html")
}

func (s *Server) static(w http.ResponseWriter, r *http.Request) {
	switch name := r.PathValue("file"); name {
	case "app.js", "style.css":
		s.webFile(w, r, name)
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("no file %q", name))
	}
}

// webFile serves one embedded file, revalidated by its content's hash.
func (s *Server) webFile(w http.ResponseWriter, r *http.Request, name string) {
	b, err := web.ReadFile("web/" + name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sum := sha256.Sum256(b)
	h := w.Header()
	h.Set("ETag", `"`+hex.EncodeToString(sum[:8])+`"`)
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}

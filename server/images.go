package server

import (
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/xmr-project/xmr/index"
)

// imageTypes are the files served from the image directory, by extension.
var imageTypes = map[string]string{".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}

// imageFiles serves the image files of one directory. The directory is
// opened as an os.Root, so no name reaches outside it: not "..", not an
// absolute path, not a symbolic link that points out.
type imageFiles struct {
	dir  string // absolute
	root *os.Root
	urls sync.Map // image id -> URL ("" when it has no file)
}

func openImageFiles(dir string) (*imageFiles, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("images %s: %w", dir, err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	return &imageFiles{dir: abs, root: root}, nil
}

// url returns the address of the file of the image of row on this server,
// or "" when the directory has none (or f is nil). It tries the
// catalogue's file (its path below the directory, then its name) and then
// ID.png, ID.jpg and ID.jpeg.
func (f *imageFiles) url(row index.ImageRow) string {
	if f == nil {
		return ""
	}
	if u, ok := f.urls.Load(row.ID); ok {
		return u.(string)
	}
	var names []string
	if row.Path != "" {
		if rel, err := filepath.Rel(f.dir, row.Path); err == nil && filepath.IsAbs(row.Path) && filepath.IsLocal(rel) {
			names = append(names, filepath.ToSlash(rel))
		}
		names = append(names, filepath.Base(row.Path))
	}
	for _, ext := range []string{".png", ".jpg", ".jpeg"} {
		names = append(names, row.ID+ext)
	}
	u := ""
	for _, name := range names {
		if _, ok := imageTypes[strings.ToLower(path.Ext(name))]; !ok || !fs.ValidPath(name) {
			continue
		}
		if st, err := f.root.Stat(name); err == nil && st.Mode().IsRegular() {
			u = "/images/" + escapePath(name)
			break
		}
	}
	f.urls.Store(row.ID, u)
	return u
}

// escapePath escapes each element of a slash-separated path.
func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// imageFile serves GET /images/{path...}: an image file below the
// directory, or 404.
func (s *Server) imageFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("path")
	notFound := func() {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no image file %q", name))
	}
	ctype, ok := imageTypes[strings.ToLower(path.Ext(name))]
	if s.images == nil || !ok || !fs.ValidPath(name) {
		notFound()
		return
	}
	// O_NONBLOCK: opening a FIFO would otherwise wait for a writer, and
	// the request, and its OS thread, with it.
	file, err := s.images.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		notFound()
		return
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil || !st.Mode().IsRegular() {
		notFound()
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "public, max-age=3600")
	http.ServeContent(w, r, name, st.ModTime(), file)
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"syscall"
	"time"

	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/server"
	"github.com/xmr-project/xmr/weaviate"
)

var serveFlags struct {
	index         string
	images        string
	addr          string
	timeout       time.Duration
	maxConcurrent int
	weaviate      string
	models        string
	maxUpload     int64
	pixelBudget   int64
	drainTimeout  time.Duration
}

func init() {
	register(&command{
		name:    "serve",
		summary: "serve an index over HTTP: a JSON API and a page that shows results and each word's region",
		usage:   "(--index INDEX [--images DIR] | --images PHOTOS) [--addr 127.0.0.1:8080]",
		examples: `  xmr serve --index xmr-demo/index --images xmr-demo/world/images/test
  xmr serve --images ~/Pictures   # a folder of photos, indexed first with the built-in photo model
  xmr serve --index coco5k.idx --images /data/coco/val2014 --addr 0.0.0.0:8080
  curl -s localhost:8080/api/search/text -d '{"text": "a red circle", "k": 3}'

Open the address in a browser to search. The JSON API (search by text or
by image, alignments, item details), /healthz and /metrics are described
in docs/api.md. Image files are served from --images only; without it the
page draws each image's regions. SIGINT or SIGTERM shut the server down
gracefully: new connections are refused, idle ones closed, and every
request already accepted (running or waiting for its turn) is answered
before it exits, within --shutdown-timeout. Uploaded images are decoded
at most --upload-pixel-budget pixels at a time: an upload waits for
room within --timeout, then gets 503 with Retry-After; an image larger
than the whole budget gets 413.

A Weaviate-backed index (xmr index --backend weaviate) is served the same
way; its searches run in Weaviate (docs/weaviate.md).

With --images and no --index, the folder's photos are indexed first with
the built-in photo model (TERAN trained on Flickr8k, fused with five
SEAM-E models and TERN; docs/photos.md) into
the models' cache directory (--models), and that index is served; the
next run reuses it while the folder holds as many photos.`,
		setFlags: func(fs *flag.FlagSet) {
			fs.StringVar(&serveFlags.index, "index", "", "index `DIR` made by xmr index")
			fs.StringVar(&serveFlags.images, "images", "", "directory of the image files (ID.png, ID.jpg, or the catalogue's file names); none are served without it")
			fs.StringVar(&serveFlags.addr, "addr", "127.0.0.1:8080", "`host:port` to listen on (port 0 picks a free one)")
			fs.DurationVar(&serveFlags.timeout, "timeout", 10*time.Second, "longest time one search may take (then 503)")
			fs.StringVar(&serveFlags.weaviate, "weaviate-url", "", "Weaviate-backed index: ask this server `URL` instead of the one in its weaviate.json")
			fs.IntVar(&serveFlags.maxConcurrent, "max-concurrent", 0, "searches run at once, the others wait (0: one per CPU)")
			fs.StringVar(&serveFlags.models, "models", "", "`DIR` caching the detector's weights, for searches by an uploaded image (an index whose model reads xmr extract's features); default $XMR_MODELS, else ~/.cache/xmr")
			fs.Int64Var(&serveFlags.maxUpload, "max-upload-bytes", server.DefaultMaxUploadBytes, "largest uploaded image, in bytes (then 413)")
			fs.Int64Var(&serveFlags.pixelBudget, "upload-pixel-budget", server.DefaultUploadPixelBudget, "pixels of uploaded images decoded at once, all uploads together (7 bytes each; a 16-bit PNG's pixels count 11/7); a larger image gets 413")
			fs.DurationVar(&serveFlags.drainTimeout, "shutdown-timeout", 15*time.Second, "longest time SIGINT or SIGTERM waits for the requests already accepted (then their connections are closed)")
		},
		run: func(ctx context.Context, args []string) error {
			f := serveFlags
			switch {
			case len(args) > 0:
				return usageErrorf("unexpected arguments %q", args)
			case f.index == "" && f.images == "":
				return usageErrorf("--index is required (or --images DIR alone: its photos, indexed with the built-in photo model)")
			case f.timeout <= 0:
				return usageErrorf("--timeout must be positive, is %v", f.timeout)
			case f.maxConcurrent < 0:
				return usageErrorf("--max-concurrent must be positive or 0, is %d", f.maxConcurrent)
			case f.maxUpload <= 0:
				return usageErrorf("--max-upload-bytes must be positive, is %d", f.maxUpload)
			case f.maxUpload > server.MaxUploadBytesCeiling:
				return usageErrorf("--max-upload-bytes %d: want at most %d (1 GiB: an upload is held in memory whole before it is decoded)", f.maxUpload, int64(server.MaxUploadBytesCeiling))
			case f.pixelBudget <= 0:
				return usageErrorf("--upload-pixel-budget must be positive, is %d", f.pixelBudget)
			case f.pixelBudget > server.UploadPixelBudgetCeiling:
				return usageErrorf("--upload-pixel-budget %d: want at most %d (decoding takes about 7 bytes a pixel: that is 7.7 TB)", f.pixelBudget, int64(server.UploadPixelBudgetCeiling))
			case f.drainTimeout <= 0:
				return usageErrorf("--shutdown-timeout must be positive, is %v", f.drainTimeout)
			}
			if f.index == "" {
				// A folder of photos: searched with the built-in model.
				dir, err := folderIndex(ctx, f.images, f.models)
				if err != nil {
					return err
				}
				f.index = dir
			}
			return serveIndex(ctx, f.index, f.images, f.addr, "", &server.Options{SearchTimeout: f.timeout, MaxConcurrent: f.maxConcurrent,
				MaxUploadBytes: f.maxUpload, UploadPixelBudget: f.pixelBudget, ShutdownTimeout: f.drainTimeout}, f.weaviate)
		},
	})
}

// serveIndex serves the index in dir on addr until ctx is cancelled, with
// image files from images (none when empty). It prints the page's address
// and a link that runs an example query (example, else the first indexed
// caption).
func serveIndex(ctx context.Context, dir, images, addr, example string, o *server.Options, weaviateURL string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return usageErrorf("--addr %q: want host:port, such as 127.0.0.1:8080 (%v)", addr, err)
	}
	var ix index.Searcher
	var err error
	if weaviate.IsIndex(dir) || weaviateURL != "" || index.IsFusion(dir) {
		ix, err = openIndex(ctx, dir, weaviateURL)
	} else {
		// A local index is followed: what xmr index --append or
		// --overwrite publishes into dir is served from the next request.
		ix, err = index.OpenLive(ctx, dir, nil)
	}
	if err != nil {
		return err
	}
	defer ix.Close()
	var opts server.Options
	if o != nil {
		opts = *o
	}
	opts.Images = images
	// An index of a model trained on xmr extract's features takes
	// uploaded images: the detector is loaded now.
	if opts.MaxUploadBytes <= 0 {
		opts.MaxUploadBytes = server.DefaultMaxUploadBytes
	}
	if q, err := serveUploads(ctx, dir, ix, weaviate.IsIndex(dir) || weaviateURL != "", serveFlags.models, opts.MaxUploadBytes); err != nil {
		slog.Warn("searches by uploaded image are off: the detector could not be loaded", "err", err)
		opts.NoImageQuery = fmt.Sprintf("the detector could not be loaded (%v)", err)
	} else {
		opts.ImageQuery = q
	}
	s, err := server.New(ix, &opts)
	if err != nil {
		return err
	}
	defer s.Close()
	ni, nc := ix.Len()
	if example == "" && nc > 0 {
		if cp, err := ix.Caption(ctx, 0); err == nil {
			example = cp.Text
		}
	}
	err = s.ListenAndServe(ctx, addr, func(a net.Addr) {
		u := "http://" + a.String() + "/"
		fmt.Fprintf(stdout, "serving %s (%d images, %d captions) on %s (Ctrl-C stops)\n", dir, ni, nc, u)
		if example != "" {
			fmt.Fprintf(stdout, "    try %s#%s\n", u, url.Values{"q": {example}}.Encode())
		}
	})
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w: another program listens on %s; choose another address with --addr", err, addr)
	}
	if err == nil {
		slog.Info("server stopped")
	}
	return err
}

// serveUploads returns the server's ImageQuery for the index ix in dir:
// a fusion's (fusionUploads) or one index's (uploadQuery).
func serveUploads(ctx context.Context, dir string, ix index.Searcher, weaviateIndex bool, cache string, maxBytes int64) (server.ImageQuery, error) {
	if fu, ok := ix.(*index.Fusion); ok {
		return fusionUploads(ctx, fu, cache, maxBytes)
	}
	return uploadQuery(ctx, dir, ix, weaviateIndex, cache, maxBytes)
}

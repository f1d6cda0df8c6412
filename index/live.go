package index

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/xmr-project/xmr/model"
)

// Live is an index directory kept open at its latest published
// generation, for a server that runs while `xmr index --append` or
// `--overwrite` publishes into the same directory. Each call first checks
// (at most once per LiveCheckEvery) whether manifest.json changed, and if
// so opens the new generation; calls already running finish on the
// generation they started with, which is closed when the last of them
// returns. A new generation that fails to open (an error, or a panic
// while opening it) is logged once and the previous one stays in
// service; a later publish is opened as usual. A generation opens (its
// checksums verified, unless the options skip them) while the other
// calls go on with the one in service. Live is safe for concurrent use.
type Live struct {
	dir  string
	opts *OpenOptions

	mu         sync.Mutex
	cur        *generation
	stamp      manifestStamp
	checked    time.Time
	failed     manifestStamp // the stamp of a manifest that failed to open
	closed     bool
	refreshing bool // a call is opening a new generation
	reopened   int  // generations opened after the first (for tests)
}

// LiveCheckEvery is how often a Live index looks at its manifest.
var LiveCheckEvery = time.Second

// generation is one opened generation of the directory and the number of
// calls using it.
type generation struct {
	ix      *Index
	refs    int
	retired bool
}

// manifestStamp identifies a version of manifest.json: a publish renames
// a newly written file over it, with its own modification time.
type manifestStamp struct {
	size    int64
	modTime time.Time
}

func stampOf(dir string) (manifestStamp, error) {
	st, err := os.Stat(filepath.Join(dir, manifestFile))
	if err != nil {
		return manifestStamp{}, err
	}
	return manifestStamp{size: st.Size(), modTime: st.ModTime()}, nil
}

var _ Searcher = (*Live)(nil)

// OpenLive opens the index in dir (as Open does, with o) and keeps
// following its publishes.
func OpenLive(ctx context.Context, dir string, o *OpenOptions) (*Live, error) {
	stamp, err := stampOf(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("open index: %w", err)
	}
	ix, err := Open(ctx, dir, o)
	if err != nil {
		return nil, err
	}
	return &Live{dir: dir, opts: o, cur: &generation{ix: ix}, stamp: stamp, checked: time.Now()}, nil
}

// acquire returns the generation a call runs on. When a check is due it
// first opens a newly published generation, without holding l.mu: the
// other calls go on with the current one meanwhile.
func (l *Live) acquire(ctx context.Context) (*generation, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, errors.New("index: closed")
	}
	now := time.Now()
	due := !l.refreshing && now.Sub(l.checked) >= LiveCheckEvery
	if due {
		l.checked, l.refreshing = now, true
	}
	l.mu.Unlock()
	if due {
		l.refresh(ctx)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errors.New("index: closed")
	}
	g := l.cur
	g.refs++
	return g, nil
}

// refresh opens the published generation when the manifest changed since
// the current one was opened, and puts it in service.
func (l *Live) refresh(ctx context.Context) {
	// However this ends, the next due call checks again: a refresh left
	// marked as under way would stop the following for good.
	defer func() {
		l.mu.Lock()
		l.refreshing = false
		l.mu.Unlock()
	}()
	l.mu.Lock()
	known, failed := l.stamp, l.failed
	l.mu.Unlock()
	var ix *Index
	stamp, err := stampOf(l.dir)
	if err == nil && stamp != known && stamp != failed {
		ix, err = l.openGeneration(ctx)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case ix == nil && err != nil && stamp != (manifestStamp{}) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		l.failed = stamp
		slog.Warn("the index's new generation does not open; serving the previous one", "index", l.dir, "err", err)
		return
	case ix == nil:
		return
	case l.closed:
		ix.Close()
		return
	}
	old := l.cur
	l.cur, l.stamp = &generation{ix: ix}, stamp
	l.reopened++
	slog.Info("serving the index's new generation", "index", l.dir, "generation", ix.man.Generation)
	old.retired = true
	if old.refs == 0 {
		old.ix.Close()
	}
}

// openIndex is Open; tests replace it to make opening fail in ways that
// Open's own checks leave no file to cause.
var openIndex = Open

// openGeneration opens the directory's published generation as Open
// does, and turns a panic while opening it into an error: whatever a new
// generation's files hold, the calls go on with the generation in
// service, and later publishes are still followed. (What a panicking
// Open had mapped stays mapped: a panic is a bug, and this keeps the
// server up until it is fixed.)
func (l *Live) openGeneration(ctx context.Context) (ix *Index, err error) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("opening the index's new generation panicked", "index", l.dir, "panic", r, "stack", string(debug.Stack()))
			ix, err = nil, fmt.Errorf("open index %s: panic: %v", l.dir, r)
		}
	}()
	return openIndex(ctx, l.dir, l.opts)
}

// release ends a call on g, closing g when it was retired and this was
// its last call.
func (l *Live) release(g *generation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g.refs--
	if g.retired && g.refs == 0 {
		g.ix.Close()
	}
}

// current returns the generation in service without counting a call, for
// the calls that only read its manifest.
func (l *Live) current() *Index {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur.ix
}

// with runs f on the current generation.
func with[T any](ctx context.Context, l *Live, f func(ix *Index) (T, error)) (T, error) {
	g, err := l.acquire(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	defer l.release(g)
	return f(g.ix)
}

// SearchText searches the current generation (see Index.SearchText).
func (l *Live) SearchText(ctx context.Context, text string, o *SearchOptions) ([]Result, error) {
	return with(ctx, l, func(ix *Index) ([]Result, error) { return ix.SearchText(ctx, text, o) })
}

// SearchImage searches the current generation (see Index.SearchImage).
func (l *Live) SearchImage(ctx context.Context, imageID string, o *SearchOptions) ([]Result, error) {
	return with(ctx, l, func(ix *Index) ([]Result, error) { return ix.SearchImage(ctx, imageID, o) })
}

// Search searches the current generation by an encoded query (see
// Index.Search).
func (l *Live) Search(ctx context.Context, q *model.Embeddings, queryIsText bool, o *SearchOptions) ([]Result, error) {
	return with(ctx, l, func(ix *Index) ([]Result, error) { return ix.Search(ctx, q, queryIsText, o) })
}

// Image looks up an image in the current generation.
func (l *Live) Image(ctx context.Context, imageID string) (ImageRow, error) {
	return with(ctx, l, func(ix *Index) (ImageRow, error) { return ix.Image(ctx, imageID) })
}

// ImageCaptions looks up an image's captions in the current generation.
func (l *Live) ImageCaptions(ctx context.Context, imageID string) ([]CaptionItem, error) {
	return with(ctx, l, func(ix *Index) ([]CaptionItem, error) { return ix.ImageCaptions(ctx, imageID) })
}

// Caption looks up caption item n in the current generation.
func (l *Live) Caption(ctx context.Context, n int) (CaptionRow, error) {
	return with(ctx, l, func(ix *Index) (CaptionRow, error) { return ix.Caption(ctx, n) })
}

// Align matches a sentence with an image of the current generation.
func (l *Live) Align(ctx context.Context, imageID, text string, o *SearchOptions) (*Match, error) {
	return with(ctx, l, func(ix *Index) (*Match, error) { return ix.Align(ctx, imageID, text, o) })
}

// AlignCaption matches a caption with an image of the current generation.
func (l *Live) AlignCaption(ctx context.Context, imageID string, n int, o *SearchOptions) (*Match, error) {
	return with(ctx, l, func(ix *Index) (*Match, error) { return ix.AlignCaption(ctx, imageID, n, o) })
}

// Len returns the size of the current generation (as of the last check).
func (l *Live) Len() (images, captions int) { return l.current().Len() }

// ModelInfo identifies the model of the current generation.
func (l *Live) ModelInfo() ModelInfo { return l.current().ModelInfo() }

// Model returns the model of the current generation.
func (l *Live) Model() (model.Model, error) { return l.current().Model() }

// Close closes the generation in service once its calls have returned;
// later calls fail.
func (l *Live) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	l.cur.retired = true
	if l.cur.refs == 0 {
		return l.cur.ix.Close()
	}
	return nil
}

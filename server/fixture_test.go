package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/synth"
	"github.com/xmr-project/xmr/synth/synthtest"
)

// world is the small synthetic world of the tests, with its PNG images.
var world = &synthtest.World{Prefix: "xmr-server-world-", Config: synth.Config{N: 160, Seed: 3, Dim: 16, Regions: 6, Noise: 0.1, Dev: 20, Test: 40}}

// fixture is an index of the world's test split, built once.
type fixture struct {
	dir      string // the index
	images   string // the test split's PNGs
	ix       *index.Index
	captions []index.CaptionRow // in item order
	ids      []string           // image ids in item order
}

var shared struct {
	once sync.Once
	f    *fixture
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.f != nil {
		shared.f.ix.Close()
		os.RemoveAll(shared.f.dir)
	}
	world.Remove()
	os.Exit(code)
}

// testFixture returns the shared index, building it on the first call
// with a small untrained TERAN: the API's behaviour does not depend on
// how well the model ranks.
func testFixture(t testing.TB) *fixture {
	t.Helper()
	w := world.Dir(t)
	shared.once.Do(func() { shared.f, shared.err = buildFixture(w) })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.f
}

func buildFixture(w string) (*fixture, error) {
	s, err := data.LoadPrecomp(context.Background(), w, "test", nil)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	cfg := model.Default()
	cfg.ImageModel = model.ImageConfig{Name: "bottomup", FeatDim: 16, TransformerLayers: 1, Heads: 2, FF: 16, Hidden: 16, PosEncoding: "concat-and-process"}
	cfg.TextModel = model.TextConfig{Name: "bert", WordDim: 16, ExtractionHiddenLayer: 1, FineTune: true, Heads: 2, FF: 16, MaxPositions: 64}
	cfg.Model = model.JointConfig{Name: "teran", EmbedSize: 16, Layers: 1, Heads: 2, FF: 16}
	tok, err := model.BuildTokenizer(cfg, s.Captions)
	if err != nil {
		return nil, err
	}
	m, err := model.New(cfg, tok, 7)
	if err != nil {
		return nil, err
	}
	f := &fixture{images: filepath.Join(w, "images", "test")}
	c := index.Collection{Images: s.Images}
	for i := 0; i < s.NumImages(); i++ {
		row := index.ImageRow{ID: s.ID(i), Path: filepath.Join(f.images, s.ID(i)+".png"), Width: s.Sizes[i][0], Height: s.Sizes[i][1]}
		for r := 0; r < s.Images.NumRegions(i); r++ {
			b := s.Images.Box5(i, r)
			row.Boxes = append(row.Boxes, [4]float32{b[0], b[1], b[2], b[3]})
		}
		c.ImageRows = append(c.ImageRows, row)
		f.ids = append(f.ids, row.ID)
		for _, cp := range s.CaptionsOf(i) {
			c.Captions = append(c.Captions, index.CaptionRow{Text: cp, ImageID: row.ID})
		}
	}
	f.captions = c.Captions
	if f.dir, err = os.MkdirTemp("", "xmr-server-index-"); err != nil {
		return nil, err
	}
	if _, err := index.Build(context.Background(), f.dir, m, c, nil); err != nil {
		return nil, err
	}
	f.ix, err = index.Open(context.Background(), f.dir, nil)
	return f, err
}

// quietServer returns a server of the shared index with o (Logger
// defaulting to a discarding one), closed when the test ends.
func quietServer(t testing.TB, o *Options) *Server {
	t.Helper()
	f := testFixture(t)
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := New(f.ix, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newServer returns quietServer(t, o) and an httptest server running it.
func newServer(t testing.TB, o *Options) (*Server, *httptest.Server) {
	t.Helper()
	s := quietServer(t, o)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

// localListener listens on a free port of the loopback interface.
func localListener(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// do sends a request with a body (nil for none) and returns the status,
// the headers and the body.
func do(t testing.TB, c *http.Client, method, url string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// post sends v as JSON.
func post(t testing.TB, c *http.Client, url string, v any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	code, _, body := do(t, c, "POST", url, b)
	return code, body
}

func decodeJSON[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

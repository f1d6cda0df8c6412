package weaviate

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
)

func TestObjectID(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	cases := []struct{ class, name string }{{"WorldImages", "synth-0000001"}, {"WorldImages", "synth-0000002"}, {"WorldCaptions", "0"}, {"OtherImages", "synth-0000001"}}
	seen := map[string]bool{}
	for _, c := range cases {
		id := objectID(c.class, c.name)
		if !uuid.MatchString(id) {
			t.Errorf("objectID(%q, %q) = %q: not a version-5 UUID", c.class, c.name, id)
		}
		if id != objectID(c.class, c.name) {
			t.Errorf("objectID(%q, %q) is not deterministic", c.class, c.name)
		}
		if seen[id] {
			t.Errorf("objectID(%q, %q) = %q collides", c.class, c.name, id)
		}
		seen[id] = true
	}
}

func TestConfigCheck(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string // error substring; "" for none
	}{
		{Config{URL: "http://127.0.0.1:8080", Collection: "World"}, ""},
		{Config{URL: "", Collection: "World"}, "no server url"},
		{Config{URL: "127.0.0.1:8080", Collection: "World"}, "want http://host:port"},
		{Config{URL: "http://127.0.0.1:8080", Collection: "world"}, "upper-case letter"},
		{Config{URL: "http://127.0.0.1:8080", Collection: "World-1"}, "upper-case letter"},
		{Config{URL: "http://127.0.0.1:8080", Collection: "World", Shards: -1}, "must not be negative"},
	}
	for _, c := range cases {
		err := c.cfg.check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.cfg, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: error %v, want one with %q", c.cfg, err, c.want)
		}
	}
	c := Config{URL: "http://127.0.0.1:8080", Collection: "World"}
	if err := c.check(); err != nil || c.Shards != 1 || c.Replication != 1 || c.BatchSize != 64 || c.Parallel != 2 || c.Retries != 5 {
		t.Errorf("defaults: %+v, %v", c, err)
	}
}

func TestClassSchema(t *testing.T) {
	for _, muvera := range []bool{false, true} {
		c := Config{URL: "http://x:1", Collection: "W", Shards: 2, Replication: 3, EfConstruction: 64, MaxConnections: 16, Muvera: muvera}
		b, _ := json.Marshal(c.classSchema(c.ImagesCollection(), vecRegions, imageProps))
		var s struct {
			Class        string `json:"class"`
			VectorConfig map[string]struct {
				VectorIndexConfig struct {
					Distance       string `json:"distance"`
					EfConstruction int    `json:"efConstruction"`
					MaxConnections int    `json:"maxConnections"`
					Multivector    *struct {
						Enabled     bool   `json:"enabled"`
						Aggregation string `json:"aggregation"`
						Muvera      struct {
							Enabled bool `json:"enabled"`
						} `json:"muvera"`
					} `json:"multivector"`
				} `json:"vectorIndexConfig"`
			} `json:"vectorConfig"`
			Sharding    struct{ DesiredCount int } `json:"shardingConfig"`
			Replication struct{ Factor int }       `json:"replicationConfig"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		r := s.VectorConfig[vecRegions].VectorIndexConfig
		g := s.VectorConfig[vecGlobal].VectorIndexConfig
		if s.Class != "WImages" || s.Sharding.DesiredCount != 2 || s.Replication.Factor != 3 || r.Distance != "dot" ||
			r.EfConstruction != 64 || r.MaxConnections != 16 || r.Multivector == nil || !r.Multivector.Enabled ||
			r.Multivector.Aggregation != "maxSim" || r.Multivector.Muvera.Enabled != muvera || g.Multivector != nil || g.Distance != "dot" {
			t.Errorf("muvera=%v: schema %s", muvera, b)
		}
	}
}

func TestWriteObject(t *testing.T) {
	e := &model.Embeddings{Dim: 2, Offsets: []int{0, 2, 2}, Vecs: []float32{0.1, -0.2, 1e-7, 1}, Pos: []int32{0, 3}, Global: []float32{0.5, 0.25, 1, 0}}
	var buf bytes.Buffer
	writeObject(&buf, "WImages", "id0", map[string]any{"item": 0}, vecRegions, e, 0)
	writeObject(&buf, "WImages", "id1", map[string]any{"item": 1}, vecRegions, e, 1)
	dec := json.NewDecoder(&buf)
	var o0, o1 struct {
		Vectors map[string]json.RawMessage `json:"vectors"`
	}
	if err := dec.Decode(&o0); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&o1); err != nil {
		t.Fatal(err)
	}
	var multi [][]float32
	if err := json.Unmarshal(o0.Vectors[vecRegions], &multi); err != nil || len(multi) != 2 || multi[1][0] != 1e-7 || multi[0][1] != -0.2 {
		t.Errorf("item 0's multi-vector %s (%v)", o0.Vectors[vecRegions], err)
	}
	if _, ok := o1.Vectors[vecRegions]; ok || string(o1.Vectors[vecGlobal]) != "[1,0]" {
		t.Errorf("item 1 (no vectors): %v", o1.Vectors)
	}
}

func TestNearQuery(t *testing.T) {
	q := nearQuery("WImages", vecRegions, [][]float32{{1, 0.5}, {-0.25, 0}}, true, 7, imageFields, nil, ",consistencyLevel:ONE")
	want := `{Get{WImages(limit:7,consistencyLevel:ONE,nearVector:{targetVectors:["regions"],vectorPerTarget:{regions:[[[1,0.5],[-0.25,0]]]}}){` + imageFields + ` _additional{id distance}}}}`
	if q != want {
		t.Errorf("multi-vector query\n%s\nwant\n%s", q, want)
	}
	q = nearQuery("WCaptions", vecGlobal, [][]float32{{1, 0}}, false, 3, captionFields, []string{vecWords, vecGlobal}, "")
	if !strings.Contains(q, `{Get{WCaptions(limit:3,nearVector:`) || !strings.Contains(q, `vectorPerTarget:{global:[1,0]}`) || !strings.Contains(q, "vectors{words global}") {
		t.Errorf("global query %s", q)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	good := Manifest{Format: Format, Version: Version, Config: Config{URL: "http://127.0.0.1:1", Collection: "W"},
		Model: index.ModelInfo{File: modelFile, Scoring: model.MrSw, Dim: 16}, Complete: true}
	cases := []struct {
		name string
		edit func(m *Manifest)
		raw  string
		want string
	}{
		{"bad json", nil, "{", "weaviate.json"},
		{"format", func(m *Manifest) { m.Format = "x" }, "", `format "x"`},
		{"version", func(m *Manifest) { m.Version = 9 }, "", "version 9"},
		{"collection", func(m *Manifest) { m.Config.Collection = "w" }, "", "upper-case letter"},
		{"unfinished", func(m *Manifest) { m.Complete, m.Images, m.ImagesDone = false, 10, 4 }, "", "the upload is unfinished (4 of 10 images"},
		{"no scoring", nil, `{"format": "xmr-weaviate", "version": 1, "weaviate": {"url": "http://127.0.0.1:1", "collection": "W"}, "model": {"file": "model.safetensors", "dim": 16}}`, "no model scoring"},
		{"bad scoring", nil, `{"format": "xmr-weaviate", "version": 1, "model": {"scoring": "best"}}`, `unknown scoring "best"`},
		{"dim", func(m *Manifest) { m.Model.Dim = 0 }, "", "model dim 0"},
		{"negative count", func(m *Manifest) { m.Images = -1 }, "", "counts are not negative"},
		{"done beyond count", func(m *Manifest) { m.Complete, m.Images, m.ImagesDone = false, 10, 11 }, "", "11 of 10 images"},
		{"complete but short", func(m *Manifest) { m.Captions, m.CaptionsDone = 50, 49 }, "", "complete, but"},
		{"no server", func(m *Manifest) {}, "", "the server does not answer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			b := []byte(c.raw)
			if c.edit != nil {
				m := good
				c.edit(&m)
				b, _ = json.Marshal(m)
			}
			if err := os.WriteFile(filepath.Join(dir, ManifestFile), b, 0o644); err != nil {
				t.Fatal(err)
			}
			if !IsIndex(dir) {
				t.Fatal("IsIndex is false")
			}
			_, err := Open(ctx, dir, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: %v, want an error with %q", err, c.want)
			}
		})
	}
	if IsIndex(t.TempDir()) {
		t.Error("IsIndex of an empty directory")
	}
}

// TestPlan checks how each search reaches its items: Weaviate's maxSim
// ranks text-to-image MrSw itself; the alignment scorings and the cosine
// re-rank candidates; the order scoring, which no Weaviate search orders
// by, reads every item whatever the collection's size (it used to ask
// maxSim for candidates and fail on a query without word vectors).
func TestPlan(t *testing.T) {
	cases := []struct {
		name      string
		s         model.Scoring
		text      bool
		exact     bool
		k, cands  int
		total     int
		want      fetch
		wantLimit int
	}{
		{"t2i MrSw", model.MrSw, true, false, 10, 0, 5000, fetchDirect, 10},
		{"t2i MrSw exact", model.MrSw, true, true, 10, 0, 5000, fetchAll, 5000},
		{"i2t MrSw", model.MrSw, false, false, 10, 0, 5000, fetchMulti, 100},
		{"t2i MwSr", model.MwSr, true, false, 20, 0, 5000, fetchMulti, 200},
		{"t2i Symm candidates", model.Symm, true, false, 10, 300, 5000, fetchMulti, 300},
		{"candidates below k", model.Symm, true, false, 50, 5, 5000, fetchMulti, 50},
		{"t2i global", model.Global, true, false, 10, 0, 5000, fetchGlobal, 100},
		{"i2t global", model.Global, false, false, 10, 0, 5000, fetchGlobal, 100},
		{"t2i order", model.Order, true, false, 10, 0, 5000, fetchAll, 5000},
		{"i2t order", model.Order, false, false, 10, 0, 25000, fetchAll, 25000},
		{"order with candidates", model.Order, true, false, 10, 200, 5000, fetchAll, 5000},
		{"candidates cover all", model.MwSr, true, false, 10, 0, 80, fetchAll, 80},
		{"global exact", model.Global, true, true, 10, 0, 5000, fetchAll, 5000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, limit := plan(c.s, c.text, c.exact, c.k, c.cands, c.total)
			if f != c.want || limit != c.wantLimit {
				t.Fatalf("plan = %d, %d; want %d, %d", f, limit, c.want, c.wantLimit)
			}
		})
	}
}

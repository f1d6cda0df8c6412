// Package weaviate holds xmr indexes in Weaviate, a distributed vector
// database, for collections larger than one machine's index: sharding and
// replication come from Weaviate. Each index is two Weaviate collections,
// images and captions, whose objects carry the catalogue fields as
// properties, the region (or word) vectors as a multi-vector (named
// vector "regions" or "words", late-interaction maxSim) and the global
// vector (named vector "global").
//
// With L2-normalised vectors, Weaviate's maxSim score of a caption's word
// vectors against an image's region vectors is TERAN's MrSw score, so a
// text-to-image MrSw search is Weaviate's search itself. The other
// scorings (MwSr, Symm, MrAvgw, global, and image-to-text) fetch
// candidates from Weaviate with their vectors and re-rank them exactly
// with model.ScoreMatrix.
//
// An index is named on the command line by a small local directory
// (docs/weaviate.md): weaviate.json (the server, the collections, the
// model's fingerprint, the upload's progress) and the model that encoded
// the vectors, which search needs to encode text queries.
package weaviate

import (
	"fmt"
	"regexp"
)

// Config says where and how an index is held in Weaviate.
type Config struct {
	// URL is the Weaviate server's REST address (http://host:port); any
	// node of a cluster.
	URL string `json:"url"`
	// Collection names the index: its collections are Collection+"Images"
	// and Collection+"Captions". It starts with an upper-case letter and
	// holds letters, digits and underscores (Weaviate's class names).
	Collection string `json:"collection"`
	// Shards is the number of shards of each collection (0: 1).
	Shards int `json:"shards"`
	// Replication is the replication factor (0: 1); a cluster needs at
	// least as many nodes.
	Replication int `json:"replication"`
	// EfConstruction, MaxConnections and Ef are the HNSW parameters of
	// the vector indexes (0: Weaviate's defaults, 128, 32 and dynamic).
	EfConstruction int `json:"ef_construction,omitempty"`
	MaxConnections int `json:"max_connections,omitempty"`
	Ef             int `json:"ef,omitempty"`
	// Muvera indexes each multi-vector by its MUVERA encoding (one
	// fixed-size vector) instead of every one of its vectors: a smaller,
	// faster-built index whose candidates are rescored with maxSim.
	Muvera bool `json:"muvera"`
	// BatchSize is the number of objects per batch request (0: 64);
	// Parallel the number of batch requests in flight (0: 2); Retries how
	// many times a failed batch is sent again (0: 5), with backoff.
	BatchSize int `json:"-"`
	Parallel  int `json:"-"`
	Retries   int `json:"-"`
}

var collectionName = regexp.MustCompile(`^[A-Z][_0-9A-Za-z]*$`)

// check validates c and fills in the defaults.
func (c *Config) check() error {
	switch {
	case c.URL == "":
		return fmt.Errorf("weaviate: no server url (--weaviate-url http://host:port)")
	case !collectionName.MatchString(c.Collection):
		return fmt.Errorf("weaviate collection %q: want an upper-case letter, then letters, digits or underscores (e.g. World)", c.Collection)
	case c.Shards < 0 || c.Replication < 0 || c.EfConstruction < 0 || c.MaxConnections < 0 || c.Ef < 0 || c.BatchSize < 0 || c.Parallel < 0 || c.Retries < 0:
		return fmt.Errorf("weaviate: shards, replication, HNSW parameters, batch size, parallel and retries must not be negative")
	}
	if _, err := NewClient(c.URL); err != nil {
		return err
	}
	if c.Shards == 0 {
		c.Shards = 1
	}
	if c.Replication == 0 {
		c.Replication = 1
	}
	if c.BatchSize == 0 {
		c.BatchSize = 64
	}
	if c.Parallel == 0 {
		c.Parallel = 2
	}
	if c.Retries == 0 {
		c.Retries = 5
	}
	return nil
}

// Names of the collections' named vectors.
const (
	vecRegions = "regions" // images: one vector per region (multi-vector)
	vecWords   = "words"   // captions: one vector per word (multi-vector)
	vecGlobal  = "global"  // both: the item's global vector
)

// ImagesCollection returns the name of the index's collection of images.
func (c *Config) ImagesCollection() string { return c.Collection + "Images" }

// CaptionsCollection returns the name of the index's collection of
// captions.
func (c *Config) CaptionsCollection() string { return c.Collection + "Captions" }

// classSchema returns the Weaviate schema of one of the index's
// collections: multi is the name of its multi-vector, props its
// properties.
func (c *Config) classSchema(name, multi string, props []map[string]any) map[string]any {
	hnsw := func(extra map[string]any) map[string]any {
		cfg := map[string]any{"distance": "dot"}
		if c.EfConstruction > 0 {
			cfg["efConstruction"] = c.EfConstruction
		}
		if c.MaxConnections > 0 {
			cfg["maxConnections"] = c.MaxConnections
		}
		if c.Ef > 0 {
			cfg["ef"] = c.Ef
		}
		for k, v := range extra {
			cfg[k] = v
		}
		return cfg
	}
	none := map[string]any{"none": map[string]any{}}
	return map[string]any{
		"class": name,
		"vectorConfig": map[string]any{
			multi: map[string]any{
				"vectorizer":      none,
				"vectorIndexType": "hnsw",
				"vectorIndexConfig": hnsw(map[string]any{"multivector": map[string]any{
					"enabled":     true,
					"aggregation": "maxSim",
					"muvera":      map[string]any{"enabled": c.Muvera},
				}}),
			},
			vecGlobal: map[string]any{"vectorizer": none, "vectorIndexType": "hnsw", "vectorIndexConfig": hnsw(nil)},
		},
		"shardingConfig":    map[string]any{"desiredCount": c.Shards},
		"replicationConfig": map[string]any{"factor": c.Replication},
		"properties":        props,
	}
}

func prop(name, dataType string) map[string]any {
	p := map[string]any{"name": name, "dataType": []string{dataType}}
	if dataType == "text" {
		p["tokenization"] = "field"
	}
	return p
}

// imageProps and captionProps are the catalogue fields, as properties.
var (
	imageProps = []map[string]any{prop("item", "int"), prop("extId", "text"), prop("path", "text"),
		prop("width", "number"), prop("height", "number"), prop("boxes", "number[]"), prop("pos", "int[]")}
	captionProps = []map[string]any{prop("item", "int"), prop("text", "text"), prop("imageId", "text"), prop("pos", "int[]")}
)

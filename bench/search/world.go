package search

import (
	"math/rand/v2"

	"github.com/xmr-project/xmr/model"
)

// World is the clustered synthetic generator of `xmr bench search
// scale=N`, for the benchmarks that compare other engines on the same
// vectors (bench/weaviate).
type World struct{ w *worldGen }

// NewWorld returns the generator of d-dimensional vectors with seed.
func NewWorld(d int, seed uint64) *World { return &World{newWorldGen(d, seed)} }

// Images generates images lo..hi-1 of r region vectors each
// (deterministic by index).
func (w *World) Images(lo, hi, r int) *model.Embeddings { return w.w.images(lo, hi, r) }

// Query generates a caption of image t: its objects' words, then function
// words that lean towards those objects, words vectors in all.
func (w *World) Query(t, words int, rng *rand.Rand) *model.Embeddings {
	return w.w.query(t, words, rng)
}

// StubModel is a small TERAN whose vectors are d wide: an index needs the
// model that made its vectors, and these benchmarks make vectors directly.
func StubModel(d int) (model.Model, error) { return stubModel(d) }

package model

import (
	"fmt"
)

// Embeddings are encoded items of one modality, the currency between the
// encoders, scoring, evaluation and the index: every item (an image or a
// caption) is a small set of vectors in the common space (one per region
// or word that takes part in the alignment; items have different counts,
// and a model that compares global vectors only, SEAM, keeps none) and one
// global vector. Every vector is L2-normalised, so that the cosine
// scorings are dot products; SEAM's global vectors are also non-negative,
// as its order-embedding similarity (Order) needs.
//
// The layout is flat: item i owns vectors Offsets[i] .. Offsets[i+1]-1,
// vector k being Vecs[k*Dim : (k+1)*Dim]. Pos[k] says where vector k came
// from: the region index in the image's features (region r of the data is
// the model's slot r+1), or the index of the caption word in
// strings.Fields(caption) that the token belongs to (several WordPiece
// tokens may share a word). Offsets are absolute positions in Vecs, so a
// Slice shares the arrays of its parent.
type Embeddings struct {
	Dim     int
	Offsets []int     // N+1 entries, Offsets[0] = first vector of item 0
	Vecs    []float32 // vectors, row-major
	Pos     []int32   // one per vector
	Global  []float32 // N*Dim: one global vector per item
}

// Len returns the number of items.
func (e *Embeddings) Len() int {
	if len(e.Offsets) == 0 {
		return 0
	}
	return len(e.Offsets) - 1
}

// Count returns the number of vectors of item i.
func (e *Embeddings) Count(i int) int { return e.Offsets[i+1] - e.Offsets[i] }

// Item returns the vectors of item i, Count(i) rows of Dim floats.
func (e *Embeddings) Item(i int) []float32 {
	return e.Vecs[e.Offsets[i]*e.Dim : e.Offsets[i+1]*e.Dim]
}

// ItemPos returns the positions (region or word indices) of item i's
// vectors.
func (e *Embeddings) ItemPos(i int) []int32 { return e.Pos[e.Offsets[i]:e.Offsets[i+1]] }

// GlobalOf returns the global vector of item i.
func (e *Embeddings) GlobalOf(i int) []float32 {
	return e.Global[i*e.Dim : (i+1)*e.Dim]
}

// Slice returns items lo..hi-1 as a view sharing e's arrays.
func (e *Embeddings) Slice(lo, hi int) *Embeddings {
	return &Embeddings{Dim: e.Dim, Offsets: e.Offsets[lo : hi+1], Vecs: e.Vecs, Pos: e.Pos, Global: e.Global[lo*e.Dim : hi*e.Dim]}
}

// Append adds the items of o after e's. o must have the same Dim; e must
// not be a Slice of larger arrays (Append copies o into e's arrays).
func (e *Embeddings) Append(o *Embeddings) error {
	if e.Dim == 0 && e.Len() == 0 {
		e.Dim = o.Dim
	}
	if o.Dim != e.Dim {
		return fmt.Errorf("append embeddings: dimension %d to %d", o.Dim, e.Dim)
	}
	if len(e.Offsets) == 0 {
		e.Offsets = []int{0}
	}
	base := e.Offsets[len(e.Offsets)-1]
	if base*e.Dim != len(e.Vecs) {
		return fmt.Errorf("append embeddings: %d vectors stored, offsets end at %d", len(e.Vecs)/max(e.Dim, 1), base)
	}
	for i := 1; i < len(o.Offsets); i++ {
		e.Offsets = append(e.Offsets, base+o.Offsets[i]-o.Offsets[0])
	}
	first, last := o.Offsets[0], o.Offsets[len(o.Offsets)-1]
	e.Vecs = append(e.Vecs, o.Vecs[first*o.Dim:last*o.Dim]...)
	e.Pos = append(e.Pos, o.Pos[first:last]...)
	e.Global = append(e.Global, o.Global...)
	return nil
}

// Unpermute returns e's items in the order they came from: e's item k is
// item order[k] of the result. order must be a permutation of 0..Len()-1.
func (e *Embeddings) Unpermute(order []int) *Embeddings {
	n := e.Len()
	at := make([]int, n) // at[i]: where item i is in e
	for k, i := range order {
		at[i] = k
	}
	out := &Embeddings{Dim: e.Dim, Offsets: make([]int, n+1), Global: make([]float32, 0, len(e.Global))}
	for i, k := range at {
		out.Offsets[i+1] = out.Offsets[i] + e.Count(k)
	}
	out.Vecs = make([]float32, 0, out.Offsets[n]*e.Dim)
	out.Pos = make([]int32, 0, out.Offsets[n])
	for _, k := range at {
		out.Vecs = append(out.Vecs, e.Item(k)...)
		out.Pos = append(out.Pos, e.ItemPos(k)...)
		out.Global = append(out.Global, e.GlobalOf(k)...)
	}
	return out
}

// Validate checks that the arrays agree with each other.
func (e *Embeddings) Validate() error {
	n := e.Len()
	if e.Dim <= 0 && n > 0 {
		return fmt.Errorf("embeddings: dimension %d", e.Dim)
	}
	if len(e.Global) != n*e.Dim {
		return fmt.Errorf("embeddings: %d global floats for %d items of %d", len(e.Global), n, e.Dim)
	}
	for i := 0; i < n; i++ {
		if e.Offsets[i+1] < e.Offsets[i] {
			return fmt.Errorf("embeddings: offsets decrease at item %d", i)
		}
	}
	if n > 0 {
		if last := e.Offsets[n]; last*e.Dim > len(e.Vecs) || last > len(e.Pos) || e.Offsets[0] < 0 {
			return fmt.Errorf("embeddings: offsets end at vector %d, have %d vectors and %d positions", last, len(e.Vecs)/e.Dim, len(e.Pos))
		}
	}
	return nil
}

// Embeddings converts an encoded batch (computed without a tape) to the
// flat layout, keeping the vectors whose mask is set.
func (enc *Encoded) Embeddings() *Embeddings {
	n, d := enc.Global.Shape[0], enc.Global.Shape[1]
	e := &Embeddings{Dim: d, Offsets: make([]int, 1, n+1), Global: append([]float32(nil), enc.Global.Data...)}
	if enc.Vecs == nil {
		e.Offsets = make([]int, n+1) // no vectors: every item is empty
		return e
	}
	l := enc.Vecs.Shape[1]
	for i := 0; i < n; i++ {
		for s := 0; s < l; s++ {
			if enc.Mask.Data[i*l+s] == 0 {
				continue
			}
			e.Vecs = append(e.Vecs, enc.Vecs.Data[(i*l+s)*d:(i*l+s+1)*d]...)
			e.Pos = append(e.Pos, enc.Pos[i*l+s])
		}
		e.Offsets = append(e.Offsets, len(e.Pos))
	}
	return e
}

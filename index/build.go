package index

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/progress"
)

// Collection is what Build indexes: images as region features with their
// catalogue rows, and captions with the ids of the images they describe.
type Collection struct {
	Images    model.ImageSource
	ImageRows []ImageRow // one per image of Images
	Captions  []CaptionRow
}

// BuildOptions tune Build. The zero value (and nil) gives the defaults.
type BuildOptions struct {
	// Mode is Create (the default), Append or Overwrite.
	Mode Mode
	// SegmentItems caps the items of one segment file (0: 65536), which
	// bounds the memory a build holds.
	SegmentItems int
	// Encode tunes the encoding batches.
	Encode *model.EncodeOptions
	// Progress shows progress bars (or log lines off a terminal).
	Progress bool
	// Layout says how the vectors are stored (LayoutAuto: compressed
	// when the index will hold more than AutoCompressItems images, or
	// captions); Dsub and Coder set its residual codes' size and coder
	// (as LayoutOptions).
	Layout Layout
	Dsub   int
	Coder  ResidualCoder
	// Attach is stored in the index's copy of the model (Writer.Attach).
	Attach *Attachment
	// Features records what made the images' features
	// (Writer.SetFeatures; nil: nothing).
	Features json.RawMessage
}

// Stats describes what Build added.
type Stats struct {
	Images, Captions int
	Segments         int
}

// Build encodes a collection with m and writes it to the index in dir
// (created, appended to or replaced as o.Mode says). Nothing is visible
// until the end, when the new manifest is published; cancelling ctx or a
// kill leaves the previous index as it was.
func Build(ctx context.Context, dir string, m model.Model, c Collection, o *BuildOptions) (*Stats, error) {
	var mode Mode
	if o != nil {
		mode = o.Mode
	}
	if n := c.Images.Len(); len(c.ImageRows) != n {
		return nil, fmt.Errorf("index %s: %d image rows for %d images", dir, len(c.ImageRows), n)
	}
	w, err := NewWriter(dir, m, mode)
	if err != nil {
		return nil, err
	}
	defer w.Abort()
	if o != nil {
		w.Attach(o.Attach)
		w.SetFeatures(o.Features)
	}
	lo := LayoutOptions{Images: c.Images.Len(), Captions: len(c.Captions)}
	if o != nil {
		lo.Layout, lo.Dsub, lo.Coder = o.Layout, o.Dsub, o.Coder
	}
	if err := w.SetLayout(lo); err != nil {
		return nil, err
	}
	st, err := Encode(ctx, m, c, w, o)
	if err != nil {
		return nil, err
	}
	if err := w.Commit(ctx); err != nil {
		return nil, err
	}
	return st, nil
}

// Sink receives what Encode encodes, a run of items at a time: the local
// index's Writer, or an index held elsewhere (package weaviate). ctx is
// Encode's: a sink stops, with an error wrapping ctx's error, once it is
// cancelled.
type Sink interface {
	AddImages(ctx context.Context, e *model.Embeddings, rows []ImageRow) error
	AddCaptions(ctx context.Context, e *model.Embeddings, rows []CaptionRow) error
}

// Encode encodes a collection with m, in runs of o.SegmentItems items,
// and hands each run to sink: images first, then captions. o.Mode is
// ignored; o.Progress shows progress bars.
func Encode(ctx context.Context, m model.Model, c Collection, sink Sink, o *BuildOptions) (*Stats, error) {
	var opt BuildOptions
	if o != nil {
		opt = *o
	}
	if opt.SegmentItems <= 0 {
		opt.SegmentItems = 65536
	}
	if n := c.Images.Len(); len(c.ImageRows) != n {
		return nil, fmt.Errorf("encode: %d image rows for %d images", len(c.ImageRows), n)
	}
	st := &Stats{}
	encode := func(desc string, total int, unit string, add func(lo, hi int, eo *model.EncodeOptions) error) error {
		var bar *progress.Bar
		if opt.Progress {
			bar = progress.New(desc, int64(total), unit)
			defer bar.Finish()
		}
		for lo := 0; lo < total; lo += opt.SegmentItems {
			hi := min(lo+opt.SegmentItems, total)
			eo := model.EncodeOptions{}
			if opt.Encode != nil {
				eo = *opt.Encode
			}
			done := 0
			eo.Progress = func(d, _ int) {
				bar.Add(int64(d - done))
				done = d
			}
			if err := add(lo, hi, &eo); err != nil {
				return err
			}
			st.Segments++
		}
		return nil
	}
	err := encode("encode images", c.Images.Len(), "images", func(lo, hi int, eo *model.EncodeOptions) error {
		e, err := model.EncodeImages(ctx, m, model.SliceImages(c.Images, lo, hi), eo)
		if err != nil {
			return err
		}
		return sink.AddImages(ctx, e, c.ImageRows[lo:hi])
	})
	if err != nil {
		return nil, err
	}
	err = encode("encode captions", len(c.Captions), "captions", func(lo, hi int, eo *model.EncodeOptions) error {
		texts := make([]string, hi-lo)
		for i := range texts {
			texts[i] = c.Captions[lo+i].Text
		}
		e, err := model.EncodeTexts(ctx, m, texts, eo)
		if err != nil {
			return err
		}
		return sink.AddCaptions(ctx, e, c.Captions[lo:hi])
	})
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st.Images, st.Captions = c.Images.Len(), len(c.Captions)
	return st, nil
}

package index

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/tensor"
)

// attachedFile opens the model file of the index in dir, as its manifest
// names it, and returns its tensors named with prefix, its metadata and
// the manifest.
func attachedFile(t *testing.T, dir, prefix string) (map[string][]float32, map[string]string, *Manifest) {
	t.Helper()
	man, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := checkpoint.Open(filepath.Join(dir, man.Model.File))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ts := map[string][]float32{}
	for _, name := range f.Names() {
		if strings.HasPrefix(name, prefix) {
			d, _, err := f.Tensor(name)
			if err != nil {
				t.Fatal(err)
			}
			ts[name] = d
		}
	}
	return ts, f.Metadata(), man
}

// TestAttach builds an index with an attachment (what the copy of a model
// that fine-tuned the detector carries: the part's weights and the cut)
// and checks that the index's model file holds it beside the model, which
// LoadModel still loads with the manifest's fingerprint; that an append
// with the same model keeps the file and what it carries; and that an
// index built without one, or overwritten without one, carries nothing.
func TestAttach(t *testing.T) {
	s := loadTest(t)
	m := testModel(t, "teran", 8, s.Captions)
	ctx := context.Background()
	att := &Attachment{
		Tensors: []nn.Named{
			{Name: "vision.a.w", T: tensor.FromData([]float32{1, 2, 3, 4, 5, 6}, 2, 3)},
			{Name: "vision.b", T: tensor.FromData([]float32{-0.5}, 1)},
		},
		Meta: map[string]string{"vision_cut": "s32"},
	}
	check := func(t *testing.T, dir string, want *Attachment) *Manifest {
		t.Helper()
		ts, md, man := attachedFile(t, dir, "vision.")
		var wantMeta string
		if want != nil {
			wantMeta = want.Meta["vision_cut"]
			if len(ts) != len(want.Tensors) {
				t.Errorf("%s: %d tensors named vision.*, want %d", man.Model.File, len(ts), len(want.Tensors))
			}
			for _, w := range want.Tensors {
				if got, ok := ts[w.Name]; !ok || !slices.Equal(got, w.T.Data) {
					t.Errorf("%s: tensor %s is %v (stored: %v), want %v", man.Model.File, w.Name, got, ok, w.T.Data)
				}
			}
		} else if len(ts) != 0 {
			t.Errorf("%s: %d tensors named vision.*, want none", man.Model.File, len(ts))
		}
		if md["vision_cut"] != wantMeta {
			t.Errorf("%s: metadata vision_cut %q, want %q", man.Model.File, md["vision_cut"], wantMeta)
		}
		if md["index_generation"] == "" {
			t.Errorf("%s: no index_generation in the metadata %v", man.Model.File, md)
		}
		lm, err := LoadModel(dir, man.Model)
		if err != nil {
			t.Fatalf("LoadModel: %v", err)
		}
		if fp := model.Fingerprint(lm); fp != model.Fingerprint(m) || fp != man.Model.Fingerprint {
			t.Errorf("the loaded model's fingerprint %s, the model's %s, the manifest's %s", fp, model.Fingerprint(m), man.Model.Fingerprint)
		}
		return man
	}

	dir := t.TempDir()
	if _, err := Build(ctx, dir, m, collectionOf(s, 0, 10), &BuildOptions{Attach: att}); err != nil {
		t.Fatal(err)
	}
	first := check(t, dir, att)

	// An append keeps the model's file, and what it carries: with the
	// attachment given again, and without.
	for i, a := range []*Attachment{att, nil} {
		lo := 10 + 5*i
		if _, err := Build(ctx, dir, m, collectionOf(s, lo, lo+5), &BuildOptions{Mode: Append, Attach: a}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		man := check(t, dir, att)
		if man.Model.File != first.Model.File {
			t.Errorf("append %d: the model's file is %s, was %s", i, man.Model.File, first.Model.File)
		}
		ix, err := Open(ctx, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ni, _ := ix.Len(); ni != lo+5 {
			t.Errorf("append %d: %d images, want %d", i, ni, lo+5)
		}
		ix.Close()
	}

	// Without an attachment the file carries none; overwritten with one, it
	// does, and overwritten again without, it no longer does.
	plain := t.TempDir()
	if _, err := Build(ctx, plain, m, collectionOf(s, 0, 10), nil); err != nil {
		t.Fatal(err)
	}
	check(t, plain, nil)
	if _, err := Build(ctx, plain, m, collectionOf(s, 0, 10), &BuildOptions{Mode: Overwrite, Attach: att}); err != nil {
		t.Fatal(err)
	}
	check(t, plain, att)
	if _, err := Build(ctx, plain, m, collectionOf(s, 0, 10), &BuildOptions{Mode: Overwrite}); err != nil {
		t.Fatal(err)
	}
	check(t, plain, nil)
}

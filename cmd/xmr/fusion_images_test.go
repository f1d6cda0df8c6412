package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/index"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/photomodel"
)

// checkFusionImages checks how a photo is encoded for the built-in
// photo model's fusion in dir (xmr index --images with no model): one
// detector run for all its members, and for each member the query that
// the member's own extraction gives (its index alone), bit for bit; an
// upload to xmr serve (fusionUploads) gets the same queries, for the
// members' models in any order, and a model that is no member's is
// refused.
func checkFusionImages(t *testing.T, dir, photo string) {
	t.Helper()
	ctx := context.Background()
	fu, err := index.OpenFusion(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fu.Close()
	cache := detect.DefaultCacheDir()
	members := fu.Members()
	fi, err := newFusionImages(ctx, members, cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(fi.runs) != 1 || !fi.runs[0].Untuned() {
		t.Fatalf("%d detector runs for %d members (the first gives the published features: %v); want one that gives them", len(fi.runs), len(members), len(fi.runs) > 0 && fi.runs[0].Untuned())
	}
	for k, mi := range fi.members {
		if mi.untuned != (k > 0) {
			t.Errorf("member %d reads the published detector's features: %v; want only the partners (members 2-%d)", k+1, mi.untuned, len(members))
		}
	}
	pic, err := extract.LoadFile(photo, extract.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	shared, err := fi.encode(ctx, pic, fi.all())
	if err != nil {
		t.Fatal(err)
	}
	for k, ix := range members {
		alone, err := newFusionImages(ctx, []*index.Index{ix}, cache)
		if err != nil {
			t.Fatal(err)
		}
		if alone.runs[0].Untuned() {
			t.Errorf("member %d alone asks for the published features besides its own", k+1)
		}
		q, err := alone.encode(ctx, pic, alone.all())
		if err != nil {
			t.Fatal(err)
		}
		if !sameEmbeddings(q[0], shared[k]) {
			t.Errorf("member %d (%s): the shared run's query differs from the member's own extraction's", k+1, ix.Dir())
		}
	}

	uq, err := fusionUploads(ctx, fu, cache, 1<<26)
	if err != nil || uq == nil {
		t.Fatalf("fusionUploads: %v (a query: %v)", err, uq != nil)
	}
	b, err := os.ReadFile(photo)
	if err != nil {
		t.Fatal(err)
	}
	var models []model.Model
	for _, ix := range members {
		m, err := ix.Model()
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, m)
	}
	slices.Reverse(models)
	qs, err := uq(ctx, b, models)
	if err != nil || len(qs) != len(models) {
		t.Fatalf("the upload's queries: %v (%d for %d models)", err, len(qs), len(models))
	}
	for i, q := range qs {
		if k := len(members) - 1 - i; !sameEmbeddings(q, shared[k]) {
			t.Errorf("upload: member %d's query differs from the shared run's", k+1)
		}
	}
	// The first partner's model loaded again: a model of no member.
	path, err := photomodel.Partners()[0].Path(cache)
	if err != nil {
		t.Fatal(err)
	}
	stranger, cf, err := model.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cf.Close()
	if _, err := uq(ctx, b, []model.Model{models[0], stranger}); err == nil || !strings.Contains(err.Error(), "no member of model") {
		t.Errorf("an upload for a model of no member: %v; want it refused", err)
	}
}

// sameEmbeddings reports whether a and b hold the same vectors, bit for
// bit.
func sameEmbeddings(a, b *model.Embeddings) bool {
	return a.Dim == b.Dim && slices.Equal(a.Offsets, b.Offsets) && slices.Equal(a.Vecs, b.Vecs) &&
		slices.Equal(a.Pos, b.Pos) && slices.Equal(a.Global, b.Global)
}

// BenchmarkFusionUpload encodes a photo for the eight members of the
// built-in photo model's fusion (an index of 4 shared photos): "shared"
// as xmr serve and search --image-file do, one detector run for all;
// "each" with a run for each member, what the sharing saves.
func BenchmarkFusionUpload(b *testing.B) {
	dir := b.TempDir()
	photos := sharedPhotoFiles(b, "3*.jpg", 4)
	folder := filepath.Join(dir, "photos")
	linkAll(b, photos[:4], folder)
	ctx := context.Background()
	cache := modelCache(b, dir)
	redirectStdout(b, io.Discard)
	ixDir, err := folderIndex(ctx, folder, cache)
	if err != nil {
		b.Fatal(err)
	}
	fu, err := index.OpenFusion(ctx, ixDir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer fu.Close()
	pic, err := extract.LoadFile(photos[0], extract.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	fi, err := newFusionImages(ctx, fu.Members(), cache)
	if err != nil {
		b.Fatal(err)
	}
	var each []*fusionImages
	for _, ix := range fu.Members() {
		one, err := newFusionImages(ctx, []*index.Index{ix}, cache)
		if err != nil {
			b.Fatal(err)
		}
		each = append(each, one)
	}
	b.Run("shared", func(b *testing.B) {
		for b.Loop() {
			if _, err := fi.encode(ctx, pic, fi.all()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("each", func(b *testing.B) {
		for b.Loop() {
			for _, one := range each {
				if _, err := one.encode(ctx, pic, one.all()); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

package main

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/npy"
	"github.com/xmr-project/xmr/text"
	"github.com/xmr-project/xmr/tools"
)

// TestImportedCompatMatchesOfficial runs the whole chain of
// --compat official on an official checkpoint: tools/import_reference.py
// builds a TERAN in PyTorch as the official code does and writes its
// region and word vectors; tools/official_scores.py scores those vectors
// with the official evaluation's formulas (its padding to 37 image slots
// and 88 caption tokens, its masks); xmr imports the checkpoint, encodes
// the same inputs and scores them with model.CompatOfficial.
func TestImportedCompatMatchesOfficial(t *testing.T) {
	if testing.Short() {
		t.Skip("PyTorch cross-check skipped in -short mode")
	}
	ref := pytorchReference(t)
	py := referencePython(t)
	ctx := context.Background()
	vocab, err := text.LoadVocab(filepath.Join(ref, "bert", "vocab.txt"))
	if err != nil {
		t.Fatal(err)
	}
	bcfg, err := model.ReadBERTConfig(filepath.Join(ref, "bert"))
	if err != nil {
		t.Fatal(err)
	}
	m, _, _, err := importCheckpoint(filepath.Join(ref, "teran.pth"), model.OfficialOptions{Vocab: vocab, BERT: &bcfg})
	if err != nil {
		t.Fatal(err)
	}
	captions := referenceCaptions(t, ref)
	imgs, err := model.EncodeImages(ctx, m, referenceImages(t, ref), nil)
	if err != nil {
		t.Fatal(err)
	}
	txts, err := model.EncodeTexts(ctx, m, captions, nil)
	if err != nil {
		t.Fatal(err)
	}

	// The official side: PyTorch's vectors, with the counts of the
	// reference's inputs (regions; token ids other than [PAD], less [CLS]
	// and [SEP]).
	dir := t.TempDir()
	ids := readInts(t, filepath.Join(ref, "ids.npy"))
	width := len(ids) / len(captions)
	var txtCounts []int32
	for c := range captions {
		n := 0
		for _, id := range ids[c*width : (c+1)*width] {
			if id != 0 {
				n++
			}
		}
		if n-2 != txts.Count(c) {
			t.Fatalf("caption %d: %d tokens in the reference, xmr scores %d", c, n-2, txts.Count(c))
		}
		txtCounts = append(txtCounts, int32(n-2))
	}
	var imgCounts []int32
	for _, n := range readInts(t, filepath.Join(ref, "nregions.npy")) {
		imgCounts = append(imgCounts, int32(n))
	}
	for _, f := range []struct {
		name   string
		vecs   string
		counts []int32
	}{{"img", "teran_regions.npy", imgCounts}, {"txt", "teran_words.npy", txtCounts}} {
		v, shape := readFloats(t, filepath.Join(ref, f.vecs))
		if err := npy.WriteFile(filepath.Join(dir, f.name+"_vecs.npy"), shape, v); err != nil {
			t.Fatal(err)
		}
		if err := npy.WriteFile(filepath.Join(dir, f.name+"_counts.npy"), []int{len(f.counts)}, f.counts); err != nil {
			t.Fatal(err)
		}
	}
	script, err := tools.WriteScript(dir, "official_scores.py")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, py, script, dir).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", py, script, err, out)
	}

	ni, nt := imgs.Len(), txts.Len()
	for _, s := range []model.Scoring{model.MrSw, model.MwSr, model.Symm} {
		got, err := model.ScoreMatrixCompat(ctx, imgs, txts, s, model.CompatOfficial)
		if err != nil {
			t.Fatal(err)
		}
		own, err := model.ScoreMatrix(ctx, imgs, txts, s)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "official_"+strings.ToLower(string(s))+"_f64.txt"))
		if err != nil {
			t.Fatal(err)
		}
		fields := strings.Fields(string(b))
		if len(fields) != ni*nt {
			t.Fatalf("%s: %d official scores, want %d", s, len(fields), ni*nt)
		}
		var diff, ownDiff, scale float64
		for k, f := range fields {
			want, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatal(err)
			}
			diff = math.Max(diff, math.Abs(float64(got[k])-want))
			ownDiff = math.Max(ownDiff, math.Abs(float64(own[k])-want))
			scale = math.Max(scale, math.Abs(want))
		}
		t.Logf("%s: xmr --compat official vs the official evaluation of the PyTorch vectors: max |diff| %.2g (%.2g of the largest score, %.3g); xmr's own scoring differs by up to %.3g", s, diff, diff/scale, scale, ownDiff)
		if diff > 1e-4*scale {
			t.Errorf("%s: max |diff| %.3g > 1e-4 x %.3g", s, diff, scale)
		}
		// On these vectors (a random-weight model: nearly all cosines
		// positive) MwSr happens to be the same under both conventions;
		// MrSw differs by the dropped token's term. model's
		// TestCompatOfficialMatchesPyTorch covers every floor.
		if s == model.MrSw && ownDiff < 1e-3*scale {
			t.Errorf("%s: xmr's own scores equal the official ones (%.3g): the case does not test the compat", s, ownDiff)
		}
	}
}

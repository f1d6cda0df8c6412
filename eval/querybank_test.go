package eval

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/model"
)

// TestApplyOffsetsDemotesAHub: an image that every bank caption scores high
// (a hub) loses more than the others, so that a caption whose own image
// it outranked finds its own image first; each score loses exactly its
// item's model.BankOffset, in both directions.
func TestApplyOffsetsDemotesAHub(t *testing.T) {
	// 3 images x 3 captions (one a image); image 0 is a hub.
	byCaption := &Matrix{Rows: 3, Cols: 3, Data: []float32{
		1.0, 0.9, 0.8,
		0.2, 0.7, 0.1,
		0.1, 0.2, 0.5,
	}}
	byImage := &Matrix{Rows: 3, Cols: 3, Data: slices.Clone(byCaption.Data)}
	f := &Fused{ByImage: byImage, ByCaption: byCaption}
	before := &Fused{ByImage: &Matrix{Rows: 3, Cols: 3, Data: slices.Clone(byImage.Data)}, ByCaption: &Matrix{Rows: 3, Cols: 3, Data: slices.Clone(byCaption.Data)}}
	// The bank's captions: image 0 scores high for all of them.
	caps := &Fused{ByCaption: &Matrix{Rows: 3, Cols: 4, Data: []float32{
		0.9, 0.8, 0.9, 0.7,
		0.1, 0.3, 0.0, 0.2,
		0.2, 0.1, 0.3, 0.0,
	}}}
	// The bank's images: caption 2 scores high for both.
	ims := &Fused{ByImage: &Matrix{Rows: 2, Cols: 3, Data: []float32{
		0.1, 0.0, 0.9,
		0.2, 0.1, 0.8,
	}}}
	const beta = 3
	if err := applyOffsets(f, caps, ims, beta); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		off := model.BankOffset(caps.ByCaption.Row(i), beta)
		for j := 0; j < 3; j++ {
			if got, want := f.ByCaption.Data[i*3+j], before.ByCaption.Data[i*3+j]-off; math.Abs(float64(got-want)) > 1e-6 {
				t.Fatalf("by caption [%d,%d] = %v, want %v", i, j, got, want)
			}
		}
	}
	for j := 0; j < 3; j++ {
		off := model.BankOffset([]float32{ims.ByImage.Data[j], ims.ByImage.Data[3+j]}, beta)
		for i := 0; i < 3; i++ {
			if got, want := f.ByImage.Data[i*3+j], before.ByImage.Data[i*3+j]-off; math.Abs(float64(got-want)) > 1e-6 {
				t.Fatalf("by image [%d,%d] = %v, want %v", i, j, got, want)
			}
		}
	}
	// Caption 1 (image 1's) ranked the hub first; now its own image.
	col := func(m *Matrix, j int) []float32 { return []float32{m.Data[j], m.Data[3+j], m.Data[6+j]} }
	if top := model.TopK(col(before.ByCaption, 1), 1)[0].Index; top != 0 {
		t.Fatalf("before the bank, caption 1 ranks image %d first, want the hub 0", top)
	}
	if top := model.TopK(col(f.ByCaption, 1), 1)[0].Index; top != 1 {
		t.Fatalf("with the bank, caption 1 ranks image %d first, want its own 1", top)
	}
	// Image 2 ranked caption 2 (the bank's hub) first, and still does by a
	// smaller margin: 0.5-0.2 before.
	if d := f.ByImage.Data[8] - f.ByImage.Data[7]; !(d < 0.3) {
		t.Fatalf("caption 2's lead for image 2 is %v, want less than before (0.3)", d)
	}
	if err := applyOffsets(f, &Fused{ByCaption: NewMatrix(2, 4)}, nil, beta); err == nil || !strings.Contains(err.Error(), "2 images scored by the bank's captions, the split has 3") {
		t.Fatalf("a bank of another split's images: %v", err)
	}
}

// TestEvaluateModelsWithBank: a query bank's evaluation equals the one
// computed by hand from each model's matrices (Fuse of the split, Fuse of
// the bank's scores, their offsets at beta over the weights' sum), and the
// bank is refused where it cannot go.
func TestEvaluateModelsWithBank(t *testing.T) {
	ctx := context.Background()
	split, bankSplit := tinySplit(8), tinySplit(6)
	models := []model.Model{tinyTERAN(t, 1), tinyTERAN(t, 2)}
	weights := []float32{1, 0.5}
	bank := &QueryBank{Captions: bankSplit.Captions[:10], Images: []model.ImageSource{bankSplit.Images, PickImages(bankSplit.Images, []int{0, 1, 2, 3, 4, 5})}, Beta: 2}
	got, err := EvaluateModels(ctx, models, split, ModelOptions{Weights: weights, Bank: bank})
	if err != nil {
		t.Fatal(err)
	}
	var each, caps, ims []*Matrix
	for _, m := range models {
		sc := func(imgs model.ImageSource, texts []string) *Matrix {
			ie, err := model.EncodeImages(ctx, m, imgs, nil)
			if err != nil {
				t.Fatal(err)
			}
			te, err := model.EncodeTexts(ctx, m, texts, nil)
			if err != nil {
				t.Fatal(err)
			}
			s, err := model.ScoreMatrix(ctx, ie, te, m.Scoring())
			if err != nil {
				t.Fatal(err)
			}
			return &Matrix{Rows: ie.Len(), Cols: te.Len(), Data: s}
		}
		each = append(each, sc(split.Images, split.Captions))
		caps = append(caps, sc(split.Images, bank.Captions))
		ims = append(ims, sc(bankSplit.Images, split.Captions))
	}
	f, err := Fuse(each, weights)
	if err != nil {
		t.Fatal(err)
	}
	plain := slices.Clone(f.ByImage.Data)
	fc, _ := Fuse(caps, weights)
	fi, _ := Fuse(ims, weights)
	if err := applyOffsets(f, fc, fi, 2/1.5); err != nil {
		t.Fatal(err)
	}
	want, err := EvaluateFused(f, Options{CaptionsPerImage: 5})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range f.ByImage.Data {
		if math.Abs(float64(got.Fused.ByImage.Data[i]-v)) > 1e-4 || math.Abs(float64(got.Fused.ByCaption.Data[i]-f.ByCaption.Data[i])) > 1e-4 {
			t.Fatalf("score %d: %v / %v, want %v / %v", i, got.Fused.ByImage.Data[i], got.Fused.ByCaption.Data[i], v, f.ByCaption.Data[i])
		}
	}
	if got.Report.RSum != want.RSum {
		t.Fatalf("rsum %v, want %v", got.Report.RSum, want.RSum)
	}
	// Each member alone, before the fusion and without the bank.
	if len(got.Report.Members) != len(models) {
		t.Fatalf("%d members' metrics, want %d", len(got.Report.Members), len(models))
	}
	for k, s := range each {
		alone, err := Evaluate(s, Options{CaptionsPerImage: 5})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Report.Members[k], alone.Metrics) {
			t.Fatalf("member %d: %+v, want %+v", k+1, got.Report.Members[k], alone.Metrics)
		}
	}
	var table strings.Builder
	if err := got.Report.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), fmt.Sprintf("#2     | %6.1f", got.Report.Members[1].I2T.R1)) {
		t.Fatalf("the table has no line for model 2 alone:\n%s", table.String())
	}
	if slices.Equal(f.ByImage.Data, plain) {
		t.Fatalf("the bank changed no score")
	}
	for _, c := range []struct {
		o    ModelOptions
		want string
	}{
		{ModelOptions{Bank: bank}, "not an average of 2"},
		{ModelOptions{Weights: weights, Bank: &QueryBank{}}, "the query bank is empty"},
		{ModelOptions{Weights: weights, Bank: &QueryBank{Images: bank.Images[:1]}}, "read by 1 models, want one a model (2)"},
		{ModelOptions{Weights: weights, Bank: &QueryBank{Images: []model.ImageSource{bankSplit.Images, PickImages(bankSplit.Images, []int{0})}}}, "model 2 reads 1 bank images, model 1 6"},
	} {
		if _, err := EvaluateModels(ctx, models, split, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
}

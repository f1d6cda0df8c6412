package train

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/model"
)

// validator evaluates a model on (a prefix of) the dev split: Recall@K and
// rsum, NDCG with every relevance available, and word-region alignment
// accuracy where ground truth exists.
type validator struct {
	m         model.Model
	split     *data.Split
	rel       []eval.Relevance
	grounding []data.Grounding
	ndcgKey   string  // relevance whose NDCG picks the best checkpoint
	chance    float64 // rsum of a random ranking (chanceRSum)
	// refeature, when set, recomputes the split's features before each
	// validation (an image network trained with the model: Vision).
	refeature func(*data.Regions) (*data.Regions, error)
}

func newValidator(ctx context.Context, m model.Model, dev *data.Split, grounding []data.Grounding, maxImages int) (*validator, error) {
	if maxImages <= 0 {
		maxImages = 1000
	}
	s := dev
	if dev.NumImages() > maxImages {
		s = dev.Slice(0, maxImages)
	}
	rel, err := eval.RelevanceMatrices(ctx, s.Captions, s.CapsPerImage)
	if err != nil {
		return nil, err
	}
	if len(grounding) > s.NumCaptions() {
		grounding = grounding[:s.NumCaptions()]
	}
	// Checked now rather than at the first validation, iterations later.
	if err := data.CheckGrounding(grounding, s); err != nil {
		return nil, fmt.Errorf("validation grounding: %w", err)
	}
	v := &validator{m: m, split: s, rel: rel, grounding: grounding, ndcgKey: rel[len(rel)-1].Name,
		chance: chanceRSum(s.NumImages(), s.CapsPerImage)}
	slog.Info("validation set", "images", s.NumImages(), "captions", s.NumCaptions(), "relevance", v.ndcgKey, "grounded_captions", len(grounding))
	return v, nil
}

// run evaluates the model's current weights.
func (v *validator) run(ctx context.Context) (Record, error) {
	s := v.split
	if v.refeature != nil {
		im, err := v.refeature(s.Images)
		if err != nil {
			return Record{}, err
		}
		c := *s
		c.Images = im
		s = &c
	}
	res, err := eval.EvaluateModels(ctx, []model.Model{v.m}, s, eval.ModelOptions{
		Options:   eval.Options{Relevances: v.rel},
		Grounding: v.grounding,
	})
	if err != nil {
		return Record{}, err
	}
	r := recordOf(res.Report)
	r.ImgCos = meanCosine(res.Images.Global, res.Images.Dim)
	r.TxtCos = meanCosine(res.Texts.Global, res.Texts.Dim)
	return r, nil
}

// ndcgScore is the quantity the best-NDCG checkpoint maximises: the sum of
// both directions' NDCG for the chosen relevance.
func (v *validator) ndcgScore(r Record) float64 {
	return r.NDCG[v.ndcgKey+"/i2t"] + r.NDCG[v.ndcgKey+"/t2i"]
}

// recordOf turns an evaluation report into a curve record.
func recordOf(rep *eval.Report) Record {
	mt := rep.Metrics
	r := Record{
		R1I2T: mt.I2T.R1, R5I2T: mt.I2T.R5, R10I2T: mt.I2T.R10,
		R1T2I: mt.T2I.R1, R5T2I: mt.T2I.R5, R10T2I: mt.T2I.R10, RSum: mt.RSum,
		NDCG: map[string]float64{},
	}
	for name, nd := range mt.NDCG {
		r.NDCG[name+"/i2t"], r.NDCG[name+"/t2i"] = nd.I2T, nd.T2I
	}
	if a := rep.Alignment; a != nil {
		r.AlignAcc, r.AlignN = a.Accuracy, a.Words
	}
	return r
}

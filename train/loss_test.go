package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/tensor"
)

func TestContrastiveLossValues(t *testing.T) {
	s := tensor.FromData([]float32{
		0.9, 0.5, 0.1,
		0.8, 0.6, 0.2,
		0.0, 0.7, 0.3,
	}, 3, 3)
	// Captions vs image i (rows): [m + s(i,j) - s(i,i)]+, j != i, margin 0.2.
	// row 0: 0.5-0.9+0.2=-0.2 -> 0; 0.1-0.9+0.2 -> 0        => max 0, sum 0
	// row 1: 0.8-0.6+0.2=0.4; 0.2-0.6+0.2=-0.2 -> 0         => max 0.4, sum 0.4
	// row 2: 0.0-0.3+0.2=-0.1 -> 0; 0.7-0.3+0.2=0.6         => max 0.6, sum 0.6
	// Images vs caption j (columns): [m + s(i,j) - s(j,j)]+, i != j.
	// col 0: 0.8-0.9+0.2=0.1; 0.0-0.9+0.2 -> 0              => max 0.1, sum 0.1
	// col 1: 0.5-0.6+0.2=0.1; 0.7-0.6+0.2=0.3               => max 0.3, sum 0.4
	// col 2: 0.1-0.3+0.2=0.0; 0.2-0.3+0.2=0.1               => max 0.1, sum 0.1
	cases := []struct {
		maxViol bool
		want    float64
	}{
		{true, 0 + 0.4 + 0.6 + 0.1 + 0.3 + 0.1},
		{false, 0 + 0.4 + 0.6 + 0.1 + 0.4 + 0.1},
	}
	for _, c := range cases {
		got := ContrastiveLoss(nil, s, 0.2, c.maxViol).Item()
		if math.Abs(float64(got)-c.want) > 1e-5 {
			t.Errorf("maxViolation=%v: loss %v, want %v", c.maxViol, got, c.want)
		}
	}
}

func TestLossGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	s := tensor.RandN(rng, 4, 4)
	for _, mv := range []bool{true, false} {
		f := func(tp *tensor.Tape) *tensor.Tensor { return ContrastiveLoss(tp, s, 0.2, mv) }
		if err := tensor.GradCheck(f, []*tensor.Tensor{s}, tensor.GradCheckOptions{Eps: 1e-3}); err != nil {
			t.Fatalf("maxViolation=%v: %v", mv, err)
		}
	}
	lv := tensor.FromData([]float32{0.3, -0.2}, 2)
	a, b := tensor.FromData([]float32{1.5}), tensor.FromData([]float32{0.7})
	f := func(tp *tensor.Tape) *tensor.Tensor { return UncertaintyWeighted(tp, lv, a, b) }
	if err := tensor.GradCheck(f, []*tensor.Tensor{lv, a, b}, tensor.GradCheckOptions{}); err != nil {
		t.Fatal(err)
	}
	// Value: 0.5*(e^-0.3*1.5 + 0.3) + 0.5*(e^0.2*0.7 - 0.2)
	want := 0.5*(math.Exp(-0.3)*1.5+0.3) + 0.5*(math.Exp(0.2)*0.7-0.2)
	if got := UncertaintyWeighted(nil, lv, a, b).Item(); math.Abs(float64(got)-want) > 1e-5 {
		t.Fatalf("uncertainty-weighted loss %v, want %v", got, want)
	}
}

func TestInfoNCELoss(t *testing.T) {
	s := tensor.FromData([]float32{
		0.9, 0.5, 0.1,
		0.8, 0.6, 0.2,
		0.0, 0.7, 0.3,
	}, 3, 3)
	// infoNCE computes the loss in float64 from its definition: the mean
	// over both directions of -log softmax of the match, at temperature tau,
	// leaving out the entries that same marks.
	infoNCE := func(tau float64, same []bool) float64 {
		var total float64
		for dir := 0; dir < 2; dir++ {
			for i := 0; i < 3; i++ {
				var z float64
				for j := 0; j < 3; j++ {
					r, c := i, j
					if dir == 1 {
						r, c = j, i
					}
					if same != nil && same[r*3+c] {
						continue
					}
					z += math.Exp(float64(s.Data[r*3+c]) / tau)
				}
				total += -(float64(s.Data[i*3+i])/tau - math.Log(z))
			}
		}
		return total / 6
	}
	cases := []struct {
		name  string
		tau   float32
		items []int
		same  []bool
	}{
		{"distinct", 0.1, []int{4, 7, 9}, nil},
		{"warm", 1, nil, nil},
		// captions 0 and 2 are of one image: neither is the other's negative
		{"same image", 0.1, []int{4, 7, 4}, []bool{false, false, true, false, false, false, true, false, false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			same := sameImage(c.items)
			if (same == nil) != (c.same == nil) {
				t.Fatalf("sameImage(%v) = %v, want a mask: %v", c.items, same, c.same != nil)
			}
			got := InfoNCELoss(nil, s, c.tau, same).Item()
			if want := infoNCE(float64(c.tau), c.same); math.Abs(float64(got)-want) > 1e-5*max(1, want) {
				t.Errorf("loss %v, want %v", got, want)
			}
			f := func(tp *tensor.Tape) *tensor.Tensor { return InfoNCELoss(tp, s, c.tau, same) }
			if err := tensor.GradCheck(f, []*tensor.Tensor{s}, tensor.GradCheckOptions{Eps: 1e-3}); err != nil {
				t.Fatal(err)
			}
		})
	}
	// The loss falls as the matches pull away from the negatives.
	sharper := tensor.FromData(append([]float32(nil), s.Data...), 3, 3)
	for i := 0; i < 3; i++ {
		sharper.Data[i*3+i] += 0.5
	}
	if a, b := InfoNCELoss(nil, s, 0.1, nil).Item(), InfoNCELoss(nil, sharper, 0.1, nil).Item(); b >= a {
		t.Errorf("loss %v with the matches 0.5 higher, not below %v", b, a)
	}
}

// TestModelGradients checks the whole training objective's gradient
// (every parameter group of each model, through both pipelines, the
// scoring and the loss, TERN w. Align's weights included) against finite
// differences.
func TestModelGradients(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Config)
	}{
		{"teran-mrsw-bert", nil},
		{"teran-symm-shared", func(c *Config) { c.Training.AlignmentMode = model.Symm; c.Model.SharedTransformer = true }},
		{"tern", func(c *Config) { c.Model.Name = "tern"; c.Training.LossType = LossMatching }},
		{"tern-align", func(c *Config) { c.Model.Name = "tern"; c.Training.LossType = LossMatchingAlignment }},
		{"teran-gru", func(c *Config) { c.TextModel.Name = "gru" }},
		{"teran-lstm", func(c *Config) { c.TextModel.Name = "lstm" }},
		{"teran-transformer", func(c *Config) { c.TextModel.Name = "transformer" }},
		// the photo recipe's pieces: InfoNCE on MrAvgw, standardised features
		{"teran-infonce-standardize", func(c *Config) {
			c.Training.Contrastive, c.Training.Temperature = ContrastiveInfoNCE, 0.5
			c.Training.AlignmentMode = model.MrAvgw
			c.ImageModel.FeatureNorm = "standardize"
		}},
		{"seam-c-order-penalty", func(c *Config) { *c = seamGradConfig(t, "seam-c-penalty-small.yaml") }},
		{"seam-g-cosine", func(c *Config) { *c = seamGradConfig(t, "seam-g-small.yaml"); c.Model.Similarity = model.Global }},
		// MEMBER: the hinge on its self and cross spaces (Encoded.Spaces)
		// and the generation losses (PairLoss); its banks are empty here
		// (model.TestEncoderGradients goes through built ones).
		{"member", func(c *Config) {
			c.Model = model.JointConfig{Name: "member", EmbedSize: 8, Layers: 1, Heads: 2, FF: 8, Pool: "max", Fusion: "late",
				Responses: 5, UsageRatio: 1, Space: "comb", Combination: "similarity", GenerationWeight: 0.5}
			c.Training.LossType = LossMatching
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Default()
			cfg.ImageModel = model.ImageConfig{Name: "bottomup", FeatDim: 6, TransformerLayers: 1, Heads: 2, FF: 8, Hidden: 8, PosEncoding: "concat-and-process"}
			cfg.TextModel = model.TextConfig{Name: "bert", WordDim: 8, ExtractionHiddenLayer: 1, FineTune: true, Heads: 2, FF: 8, MaxPositions: 16,
				EmbedDim: 8, Hidden: 4, Bidirectional: true, Layers: 1}
			cfg.Model = model.JointConfig{Name: "teran", EmbedSize: 8, Layers: 1, Heads: 2, FF: 8}
			cfg.Dataset.MaxCaptionTokens = 16 // within BERT's 16 positions
			cfg.Training.MaxViolation = false // smooth enough for finite differences
			if c.edit != nil {
				c.edit(&cfg)
			}
			mc := cfg.ModelConfig()
			tok, err := model.BuildTokenizer(mc, []string{"a red circle left of a blue square"})
			if err != nil {
				t.Fatal(err)
			}
			m, err := model.New(mc, tok, 1)
			if err != nil {
				t.Fatal(err)
			}
			if fn, ok := m.(model.FeatureNormalizer); ok && fn.NormalizesFeatures() {
				if err := fn.SetFeatureStats([]float32{0.2, -0.1, 0, 0.3, 0.1, 0}, []float32{1.2, 0.9, 1, 1.1, 0, 1}); err != nil {
					t.Fatal(err)
				}
			}
			// Word embeddings drawn as the official code draws them
			// (U(-0.1, 0.1)) leave these toy widths' states so small that
			// float32 finite differences cannot tell the curvature of
			// the normalisations from a kink; at the scale of N(0, 1)
			// they can. The gradient checked is the same function's.
			for _, p := range m.Params() {
				if strings.HasSuffix(p.Name, "embed.weight") && cfg.Model.Name == "seam" {
					for i := range p.T.Data {
						p.T.Data[i] *= 10
					}
				}
			}
			rng := rand.New(rand.NewPCG(1, 1))
			im := model.Images{Feat: tensor.RandN(rng, 3, 4, 6), Boxes: tensor.New(3, 4, 5), Valid: tensor.FromData([]float32{1, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 1}, 3, 4)}
			for i := range im.Boxes.Data {
				im.Boxes.Data[i] = rng.Float32()
			}
			tx := model.TextBatch(m, []string{"a red circle", "blue square left of a red circle", "a square"})
			obj := newObjective(cfg.Training, m)
			if obj.logVars != nil {
				copy(obj.logVars.Data, []float32{0.3, -0.2})
			}
			var named []nn.Named // the trained parameters (not the feature statistics)
			for _, p := range append(m.Params(), obj.Params()...) {
				if p.T.RequiresGrad() {
					named = append(named, p)
				}
			}
			params := nn.Tensors(named)
			f := func(tp *tensor.Tape) *tensor.Tensor {
				return obj.Loss(tp, m.EncodeImages(tp, im), m.EncodeTexts(tp, tx), tx, nil, 0)
			}
			tp := tensor.NewTape()
			tp.Backward(f(tp))
			for _, p := range named {
				if p.T.Grad == nil {
					t.Errorf("%s gets no gradient", p.Name)
				}
			}
			tp.Reset()
			for _, p := range params {
				p.Grad = nil
			}
			if err := tensor.GradCheck(f, params, tensor.GradCheckOptions{MaxPerInput: 4, Eps: 1e-3, ATol: 1e-2, RTol: 5e-2}); err != nil {
				t.Fatal(fmt.Errorf("%w (params in order: first %s)", err, named[0].Name))
			}
		})
	}
}

// seamGradConfig is a built-in SEAM config at a size for finite
// differences, trained with the sum over negatives.
func seamGradConfig(t *testing.T, name string) Config {
	cfg, err := LoadConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	tm := &cfg.TextModel
	tm.EmbedDim, tm.AttentionUnits, tm.Hops, tm.Filters, tm.Hidden = 5, 4, 2, 3, 4
	cfg.Model.EmbedSize, cfg.ImageModel.FeatDim = 8, 6
	cfg.Training.MaxViolation = false
	return cfg
}

// TestAttentionPenaltyInLoss shows that SEAM's attention penalty is part
// of what training minimises: with lambda > 0 the loss grows by the
// penalty and the gradient of the attention weights by exactly the
// penalty's gradient, which is not zero.
func TestAttentionPenaltyInLoss(t *testing.T) {
	cfg := seamGradConfig(t, "seam-e-penalty-small.yaml")
	captions := []string{"a dog runs on the grass", "two dogs", "a man rides a red bike down a hill"}
	tok, err := model.BuildTokenizer(cfg.ModelConfig(), captions)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	im := model.Images{Feat: tensor.RandN(rng, 3, 1, 6)}
	// run returns the objective's loss for a model with penalty weight
	// lambda (the same weights for every lambda: they come from the seed)
	// and the gradient of the first attention module's W1; with
	// penaltyOnly, the penalty alone and its gradient.
	run := func(lambda float32, penaltyOnly bool) (float32, []float32) {
		mc := cfg.ModelConfig()
		mc.TextModel.AttentionPenalty = lambda
		m, err := model.New(mc, tok, 1)
		if err != nil {
			t.Fatal(err)
		}
		var w1 *tensor.Tensor
		for _, p := range m.Params() {
			if p.Name == "txt_enc.attention.0.ws1.weight" {
				w1 = p.T
			}
		}
		tp := tensor.NewTape()
		defer tp.Reset()
		txt := m.EncodeTexts(tp, model.TextBatch(m, captions))
		l := txt.Penalty
		if !penaltyOnly {
			l = newObjective(cfg.Training, m).Loss(tp, m.EncodeImages(tp, im), txt, model.Texts{}, nil, 0)
		}
		tp.Backward(l)
		return l.Item(), w1.Grad
	}
	l0, g0 := run(0, false)
	l1, g1 := run(0.5, false)
	p, gp := run(0.5, true)
	if p <= 0 || math.Abs(float64(l1-l0-p)) > 1e-4*math.Max(1, float64(p)) {
		t.Fatalf("loss %v without the penalty, %v with it: they differ by %v, want the penalty %v > 0", l0, l1, l1-l0, p)
	}
	var norm float64
	for i := range gp {
		norm += float64(gp[i]) * float64(gp[i])
		if d := g1[i] - g0[i]; math.Abs(float64(d-gp[i])) > 1e-5+1e-3*math.Abs(float64(gp[i])) {
			t.Fatalf("W1 gradient %d: %v without the penalty, %v with it; the difference %v is not the penalty's %v", i, g0[i], g1[i], d, gp[i])
		}
	}
	if norm == 0 {
		t.Fatal("the penalty does not change the attention's gradient")
	}
}

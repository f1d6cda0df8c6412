package eval

import (
	"context"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/model"
)

// TestEvaluateModelsCompatOfficial: with Compat set, the evaluated matrix
// is model.ScoreMatrixCompat's on the split's embeddings (with and without
// the progress bar's row blocks), and differs from xmr's own (the tiny
// split's 4 regions and 3-word captions are well inside the official
// padding, so the floors and the dropped word all act).
func TestEvaluateModelsCompatOfficial(t *testing.T) {
	m := tinyTERAN(t, 1)
	split := tinySplit(6)
	ctx := context.Background()
	for _, s := range []model.Scoring{model.MrSw, model.MwSr, model.Symm} {
		for _, bar := range []bool{false, true} {
			res, err := EvaluateModels(ctx, []model.Model{m}, split, ModelOptions{Scoring: s, Compat: model.CompatOfficial, Progress: bar})
			if err != nil {
				t.Fatal(err)
			}
			want, err := model.ScoreMatrixCompat(ctx, res.Images, res.Texts, s, model.CompatOfficial)
			if err != nil {
				t.Fatal(err)
			}
			mine, err := model.ScoreMatrix(ctx, res.Images, res.Texts, s)
			if err != nil {
				t.Fatal(err)
			}
			differs := false
			for k, v := range res.Sims.Data {
				if v != want[k] {
					t.Fatalf("%s, bar %v: S[%d] = %v, ScoreMatrixCompat %v", s, bar, k, v, want[k])
				}
				differs = differs || v != mine[k]
			}
			if !differs {
				t.Errorf("%s: the official scores equal xmr's own", s)
			}
		}
	}
}

// renamed is a model that says it is another.
type renamed struct {
	model.Model
	name string
}

func (r renamed) Name() string { return r.name }

// TestCheckCompatRefuses: what the official evaluation cannot score, or
// xmr cannot score as it does, is refused by name before anything is
// encoded.
func TestCheckCompatRefuses(t *testing.T) {
	m := tinyTERAN(t, 1)
	stop := func() model.Model {
		cfg := m.Config()
		cfg.Model.ExcludeStopwords = true
		sm, err := model.New(cfg, m.Tokenizer(), 1)
		if err != nil {
			t.Fatal(err)
		}
		return sm
	}()
	long := func(words int) *data.Split {
		s := tinySplit(1)
		s.Captions[2] = strings.TrimSpace(strings.Repeat("red ", words))
		return s
	}
	wide := tinySplit(1)
	wide.Images = &data.Regions{N: 1, R: 37, D: 6, Feat: make([]float32, 37*6)}
	for _, c := range []struct {
		name  string
		m     model.Model
		s     model.Scoring
		split *data.Split
		want  string
	}{
		{"tern", renamed{m, "tern"}, model.MrSw, tinySplit(1), "scores TERAN models; this is a tern model"},
		{"global scoring", m, model.Global, tinySplit(1), "not to global scoring"},
		{"stop words", stop, model.MrSw, tinySplit(1), "excludes stop words"},
		{"cut caption", m, model.MrSw, long(20), "caption 2 (\"red red"},
		{"cut caption says why", m, model.MrSw, long(20), "the model cuts captions at 16"},
		{"caption over 88 tokens", m, model.MrSw, long(87), "has 89 tokens with [CLS] and [SEP]; the official TERAN evaluation holds at most 88"},
		{"37 regions", m, model.MrSw, wide, "has 37 regions"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := CheckCompat(c.m, c.s, c.split, model.CompatOfficial); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CheckCompat: %v, want an error with %q", err, c.want)
			}
			encoded := 0
			enc := &model.EncodeOptions{Progress: func(done, total int) { encoded = done }}
			_, err := EvaluateModels(context.Background(), []model.Model{c.m}, c.split, ModelOptions{Scoring: c.s, Compat: model.CompatOfficial, Encode: enc})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("EvaluateModels: %v, want an error with %q", err, c.want)
			}
			if encoded != 0 {
				t.Errorf("%d items encoded before the refusal", encoded)
			}
		})
	}
	if err := CheckCompat(m, model.MrSw, tinySplit(2), model.CompatOfficial); err != nil {
		t.Errorf("a TERAN on whole captions refused: %v", err)
	}
	if err := CheckCompat(renamed{m, "seam"}, model.Order, tinySplit(2), model.CompatNone); err != nil {
		t.Errorf("no compatibility refused: %v", err)
	}
}

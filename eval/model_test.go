package eval

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/text"
)

// tinyTERAN is an untrained TERAN with every width 8 over 6-d region
// features and a toy WordPiece vocabulary.
func tinyTERAN(t *testing.T, seed uint64) model.Model {
	t.Helper()
	cfg := model.Default()
	cfg.ImageModel = model.ImageConfig{Name: "bottomup", FeatDim: 6, TransformerLayers: 1, Heads: 2, FF: 8, Hidden: 8, PosEncoding: "concat-and-process"}
	cfg.TextModel = model.TextConfig{Name: "bert", WordDim: 8, ExtractionHiddenLayer: 1, FineTune: true, Heads: 2, FF: 8, MaxPositions: 16}
	cfg.Model = model.JointConfig{Name: "teran", EmbedSize: 8, Layers: 1, Heads: 2, FF: 8}
	cfg.MaxCaptionTokens = 16
	tok, err := text.NewWordPiece(text.NewVocab([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "red", "blue", "circle", "square"}))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cfg, tok, seed)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tinySplit is n random images of 4 regions of 6 features, 5 captions each.
func tinySplit(n int) *data.Split {
	r := rand.New(rand.NewPCG(uint64(n), 1))
	feat := make([]float32, n*4*6)
	for i := range feat {
		feat[i] = r.Float32()
	}
	words := []string{"a", "red", "blue", "circle", "square"}
	var caps []string
	for range 5 * n {
		caps = append(caps, words[r.IntN(3)]+" "+words[1+r.IntN(4)]+" "+words[3+r.IntN(2)])
	}
	return &data.Split{Name: "tiny", Images: &data.Regions{N: n, R: 4, D: 6, Feat: feat}, Captions: caps, CapsPerImage: 5}
}

// TestEvaluateModelsChecksProtocolFirst: a protocol the split cannot
// have is refused before anything is encoded, naming the split.
func TestEvaluateModelsChecksProtocolFirst(t *testing.T) {
	m := tinyTERAN(t, 1)
	split := tinySplit(3)
	for _, c := range []struct {
		proto Protocol
		want  string
	}{
		{Protocol5K, "protocol 5k needs 5000 images, split tiny has 3"},
		{Protocol1K, "split tiny has 3 images, not a multiple of 1000"},
	} {
		encoded := 0
		enc := &model.EncodeOptions{Progress: func(done, total int) { encoded = done }}
		_, err := EvaluateModels(context.Background(), []model.Model{m}, split, ModelOptions{Options: Options{Protocol: c.proto}, Encode: enc})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("protocol %s: error %v, want %q", c.proto, err, c.want)
		}
		if encoded != 0 {
			t.Errorf("protocol %s: %d items encoded before the protocol was refused", c.proto, encoded)
		}
	}
}

// TestEvaluateModelsProgress: with Progress, encoding and scoring each
// show their progress (log lines off a terminal), model by model for an
// ensemble, and a caller's own encoding hook still sees every batch.
func TestEvaluateModelsProgress(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(prev)

	split := tinySplit(6)
	last := 0
	enc := &model.EncodeOptions{BatchSize: 4, Progress: func(done, total int) { last = done }}
	models := []model.Model{tinyTERAN(t, 1), tinyTERAN(t, 2)}
	for _, progress := range []bool{false, true} {
		buf.Reset()
		if _, err := EvaluateModels(context.Background(), models, split, ModelOptions{Encode: enc, Progress: progress}); err != nil {
			t.Fatal(err)
		}
		log := buf.String()
		for _, want := range []string{
			`msg="model 1/2: encode images done" count=6 unit=images`,
			`msg="model 1/2: encode captions done" count=30 unit=captions`,
			`msg="model 1/2: score done" count=6 unit=images`,
			`msg="model 2/2: score done" count=6 unit=images`,
		} {
			if got := strings.Contains(log, want); got != progress {
				t.Errorf("Progress %v: log has %q: %v, want %v; log:\n%s", progress, want, got, progress, log)
			}
		}
		if last != 30 {
			t.Errorf("Progress %v: the caller's encoding hook saw %d captions done, want 30", progress, last)
		}
	}
	buf.Reset()
	if _, err := EvaluateModels(context.Background(), models[:1], split, ModelOptions{Progress: true}); err != nil {
		t.Fatal(err)
	}
	if log := buf.String(); !strings.Contains(log, `msg="encode images done"`) || strings.Contains(log, "model 1/") {
		t.Errorf("one model: log %q, want bars without a model number", log)
	}
}

// TestScoreMatrixInRows: scoring scoreRows images at a time (for the
// progress bar) gives model.ScoreMatrix's matrix exactly.
func TestScoreMatrixInRows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	random := func(n, maxVecs, dim int) *model.Embeddings {
		e := &model.Embeddings{Dim: dim, Offsets: []int{0}}
		for range n {
			k := r.IntN(maxVecs + 1)
			for range k * dim {
				e.Vecs = append(e.Vecs, r.Float32()-0.5)
			}
			for p := range k {
				e.Pos = append(e.Pos, int32(p))
			}
			e.Offsets = append(e.Offsets, e.Offsets[len(e.Offsets)-1]+k)
			for range dim {
				e.Global = append(e.Global, r.Float32()-0.5)
			}
		}
		return e
	}
	imgs, txts := random(2*scoreRows+37, 5, 8), random(23, 4, 8)
	for _, s := range []model.Scoring{model.MrSw, model.Symm, model.MrAvgw, model.Global, model.Order} {
		want, err := model.ScoreMatrix(context.Background(), imgs, txts, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, bar := range []bool{false, true} {
			got, err := scoreMatrix(context.Background(), imgs, txts, s, model.CompatNone, bar, "score")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s, bar %v: the matrix scored in rows differs from ScoreMatrix's", s, bar)
			}
		}
	}
}

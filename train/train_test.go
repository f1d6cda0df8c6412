package train

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/checkpoint"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/synth"
	"github.com/xmr-project/xmr/synth/synthtest"
	"github.com/xmr-project/xmr/tensor"
)

// world is the small synthetic world the tests share.
var world = &synthtest.World{Prefix: "xmr-train-world-", Config: synth.Config{N: 1400, Seed: 3, Dim: 64, Regions: 12, Noise: 0.1, NoImages: true, Dev: 200, Test: 200}}

// testWorld returns the shared world's directory.
func testWorld(t testing.TB) string { return world.Dir(t) }

func TestMain(m *testing.M) {
	// Every buffer the tape takes back is filled with NaN: code that used
	// a value after its release would show it in the losses and recalls
	// the tests check.
	tensor.PoisonReleased = true
	code := m.Run()
	world.Remove()
	os.Exit(code)
}

// loadLast loads the last checkpoint of the run in dir, closed when the
// test ends.
func loadLast(t *testing.T, dir string) (model.Model, *checkpoint.File) {
	t.Helper()
	m, f, err := model.Load(filepath.Join(dir, "last.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return m, f
}

// tinyConfig is a small TERAN/TERN for tests.
func tinyConfig(t testing.TB, base string) Config {
	cfg := builtinConfig(t, base)
	cfg.ImageModel.Hidden, cfg.ImageModel.FF, cfg.ImageModel.TransformerLayers = 64, 128, 1
	cfg.TextModel.WordDim, cfg.TextModel.FF, cfg.TextModel.ExtractionHiddenLayer = 64, 128, 1
	cfg.TextModel.EmbedDim, cfg.TextModel.Hidden = 64, 32
	cfg.Model.EmbedSize, cfg.Model.FF, cfg.Model.Layers = 64, 128, 1
	cfg.Training.BatchSize, cfg.Training.ValStep, cfg.Training.WarmupPeriod = 32, 0, 20
	cfg.Training.LR = 1e-3
	return cfg
}

// builtinConfig loads configs/base.
func builtinConfig(t testing.TB, base string) Config {
	cfg, err := LoadConfig(filepath.Join("..", "configs", base))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func BenchmarkTrainStep(b *testing.B) {
	dir := testWorld(b)
	cfg, err := LoadConfig(filepath.Join("..", "configs", "teran-mrsw-small.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	out := b.TempDir()
	b.ResetTimer()
	if _, err := Run(context.Background(), Options{Config: cfg, Data: data.Source{Path: dir}, Out: out, MaxIters: b.N, ValImages: 50}); err != nil {
		b.Fatal(err)
	}
}

// TestModelsLearn trains each model family briefly on the synthetic world
// and checks that the loss falls and that retrieval rises well above chance
// (dev has 200 images: chance R@1 is 0.5%, R@10 is 5%).
func TestModelsLearn(t *testing.T) {
	dir := testWorld(t)
	cases := []struct {
		name   string
		config string
		iters  int
		edit   func(*Config)
		data   func(t *testing.T) string // nil: the world
	}{
		{"teran-mrsw", "teran-mrsw-small.yaml", 250, nil, nil},
		{"teran-mrsw-drop", "teran-mrsw-small.yaml", 250, func(c *Config) { c.Training.RegionDrop, c.Training.WordDrop = 0.2, 0.1 }, nil},
		// The world's photos each with an augmented copy (its features
		// scaled), drawn in place of the photo at half the steps.
		{"teran-mrsw-views", "teran-mrsw-small.yaml", 250, func(c *Config) { c.Training.AugmentDraw = 0.5 },
			func(t *testing.T) string { return worldWithCopies(t, 1<<30, 1) }},
		// MwSr's hardest negatives collapse a model this small and this early
		// (R@1 near chance at 500 iterations once they start at 150 or 250): it
		// learns on the sum of hinges throughout. With them from iteration 400
		// (the config's), it ended at R@10 21 to 31%, by the CPU's kernels.
		{"teran-mwsr", "teran-mwsr-small.yaml", 500, func(c *Config) { c.Training.LR = 3e-4; c.Training.MaxViolationAfter = 500 }, nil},
		{"tern", "tern-small.yaml", 500, nil, nil},
		{"tern-align", "tern-align-small.yaml", 250, nil, nil},
		{"teran-bigru", "teran-mrsw-bigru-small.yaml", 250, nil, nil},
		{"teran-bilstm", "teran-mrsw-bilstm-small.yaml", 250, nil, nil},
		{"teran-transformer-text", "teran-mrsw-small.yaml", 250, func(c *Config) { c.TextModel.Name = "transformer" }, nil},
		// SEAM reads the mean of the world's region features (its global
		// feature stands-in); TestModelsLearnRealCaptions trains it on real
		// global features.
		{"seam-e", "seam-e-small.yaml", 400, nil, nil},
		{"seam-c-penalty", "seam-c-penalty-small.yaml", 400, nil, nil},
		{"seam-g", "seam-g-small.yaml", 400, nil, nil},
		// MEMBER retrieves by the combination of its self and cross
		// spaces; TestMemberSpacesLearn checks each space.
		{"member", "member-small.yaml", 150, func(c *Config) { c.Model.Responses = 2 }, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // a tiny model keeps about one core busy: two runs fill the machine
			cfg := tinyConfig(t, c.config)
			if c.edit != nil {
				c.edit(&cfg)
			}
			cfg.Training.ValStep = c.iters / 5
			out, from := t.TempDir(), dir
			if c.data != nil {
				from = c.data(t)
			}
			res, err := Run(context.Background(), Options{Config: cfg, Data: data.Source{Path: from}, Out: out, MaxIters: c.iters, ValImages: 200})
			if err != nil {
				t.Fatal(err)
			}
			hist := readHistory(t, out)
			first, last := hist[0], hist[len(hist)-1]
			t.Logf("%s: loss %.2f -> %.2f, R@1 t2i %.1f i2t %.1f, R@10 t2i %.1f, rsum %.1f, align acc %.2f",
				c.name, first.Loss, last.Loss, last.R1T2I, last.R1I2T, last.R10T2I, last.RSum, last.AlignAcc)
			if !(last.Loss < 0.8*first.Loss) {
				t.Errorf("loss did not fall: %.3f -> %.3f", first.Loss, last.Loss)
			}
			if last.R10T2I < 25 || last.R1T2I < 3 {
				t.Errorf("text-to-image R@1 %.1f%%, R@10 %.1f%%: not well above chance (0.5%%, 5%%)", last.R1T2I, last.R10T2I)
			}
			if res.BestRSum < last.RSum {
				t.Errorf("best rsum %.1f below the last validation's %.1f", res.BestRSum, last.RSum)
			}
			for _, f := range []string{"last.safetensors", "best-rsum.safetensors", "best-ndcg.safetensors", "metrics.csv", "metrics.json", "curves.png"} {
				if _, err := os.Stat(filepath.Join(out, f)); err != nil {
					t.Errorf("missing output: %v", err)
				}
			}
			if cfg.Model.Name == "member" {
				memberSpaces(t, out, data.Source{Path: dir}, "dev", 25)
			}
		})
	}
}

// memberSpaces evaluates the best MEMBER checkpoint of run directory out on
// a split in each of its spaces, with its memory banks from the checkpoint,
// and checks that every space retrieves with R@10 of at least minR10 both
// ways. It returns the rsum of each space.
func memberSpaces(t *testing.T, out string, src data.Source, split string, minR10 float64) map[string]float64 {
	t.Helper()
	m, f, err := model.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	mb, ok := m.(*model.MEMBER)
	if !ok {
		t.Fatalf("%s holds a %s, not member", out, m.Name())
	}
	sp, err := src.Load(context.Background(), split)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	rsums := map[string]float64{}
	for _, s := range []struct{ space, combination string }{{"self", ""}, {"cross", ""}, {"comb", "similarity"}, {"comb", "embedding"}} {
		ms, err := mb.InSpace(s.space, s.combination)
		if err != nil {
			t.Fatal(err)
		}
		res, err := eval.EvaluateModels(context.Background(), []model.Model{ms}, sp, eval.ModelOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mt := res.Report.Metrics
		name := strings.TrimSuffix(s.space+"-"+s.combination, "-")
		rsums[name] = mt.RSum
		t.Logf("member %s on %d %s images: R@1 i2t %.1f t2i %.1f, R@10 i2t %.1f t2i %.1f, rsum %.1f",
			name, sp.NumImages(), split, mt.I2T.R1, mt.T2I.R1, mt.I2T.R10, mt.T2I.R10, mt.RSum)
		if mt.I2T.R10 < minR10 || mt.T2I.R10 < minR10 {
			t.Errorf("member %s: R@10 i2t %.1f%% t2i %.1f%%, want at least %.0f%% both ways", name, mt.I2T.R10, mt.T2I.R10, minR10)
		}
	}
	return rsums
}

// TestResumeIsExact kills a run half-way (by its iteration limit) and
// resumes it: the weights must equal those of an uninterrupted run (for
// MEMBER, whose memory banks come back from the checkpoint, the
// validations too).
func TestResumeIsExact(t *testing.T) {
	dir := testWorld(t)
	for _, c := range []struct {
		base string
		ema  float64
		drop float64 // training.region-drop and word-drop
	}{{"teran-mrsw-small.yaml", 0, 0}, {"member-small.yaml", 0, 0}, {"teran-mwsr-small.yaml", 0.9, 0}, {"teran-mrsw-small.yaml", 0, 0.2}} {
		name := strings.TrimSuffix(c.base, "-small.yaml")
		if c.ema > 0 {
			name += "-ema"
		}
		if c.drop > 0 {
			name += "-drop"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := tinyConfig(t, c.base)
			cfg.Training.ValStep, cfg.Training.EMADecay = 10, c.ema
			cfg.Training.RegionDrop, cfg.Training.WordDrop = c.drop, c.drop
			straight, split := t.TempDir(), t.TempDir()
			if _, err := Run(context.Background(), Options{Config: cfg, Data: data.Source{Path: dir}, Out: straight, MaxIters: 20, ValImages: 50}); err != nil {
				t.Fatal(err)
			}
			if _, err := Run(context.Background(), Options{Config: cfg, Data: data.Source{Path: dir}, Out: split, MaxIters: 10, ValImages: 50}); err != nil {
				t.Fatal(err)
			}
			if _, err := Run(context.Background(), Options{Data: data.Source{Path: dir}, Out: split, MaxIters: 20, ValImages: 50, Resume: true}); err != nil {
				t.Fatal(err)
			}
			a, fa := loadLast(t, straight)
			b, fb := loadLast(t, split)
			pa, pb := a.Params(), b.Params()
			for i := range pa {
				for j := range pa[i].T.Data {
					if pa[i].T.Data[j] != pb[i].T.Data[j] {
						t.Fatalf("%s[%d]: %v uninterrupted, %v resumed", pa[i].Name, j, pa[i].T.Data[j], pb[i].T.Data[j])
					}
				}
			}
			// The optimiser state and the averaged weights too.
			for _, name := range fa.Names() {
				if !strings.HasPrefix(name, optimPrefix) && !strings.HasPrefix(name, averagePrefix) {
					continue
				}
				da, _, err := fa.Tensor(name)
				if err != nil {
					t.Fatal(err)
				}
				db, _, err := fb.Tensor(name)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !slices.Equal(da, db) {
					t.Fatalf("%s differs between the uninterrupted and the resumed run", name)
				}
			}
			if model.Fingerprint(a) != model.Fingerprint(b) {
				t.Fatal("the resumed run's model (weights and state) differs from the uninterrupted run's")
			}
			ha, hb := readHistory(t, straight), readHistory(t, split)
			if len(ha) != len(hb) || ha[len(ha)-1].RSum != hb[len(hb)-1].RSum {
				t.Fatalf("histories differ: %+v vs %+v", ha, hb)
			}
		})
	}
}

func readHistory(t *testing.T, dir string) []Record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "metrics.json"))
	if err != nil {
		t.Fatal(err)
	}
	var h []Record
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	if len(h) == 0 {
		t.Fatal("no validation records")
	}
	return h
}

// flickr8kMini is the real mini set of the shared data (302 Flickr8k images
// with real 2048-d global features and 5 human captions each), beside the
// repository; tests that need it skip without it.
func flickr8kMini(t *testing.T) string {
	dir := filepath.Join("..", "..", "shared", "data", "flickr8k-mini")
	if _, err := os.Stat(filepath.Join(dir, "train_ims.npy")); err != nil {
		t.Skipf("the real mini set is not here: %v", err)
	}
	return dir
}

// TestModelsLearnRealCaptions trains every model briefly on flickr8k-mini
// (real captions, real global CNN features) with its built-in small
// config's schedule, at test size, and evaluates the best checkpoint on
// its 91 test images, where chance is R@10 11% and rsum about 35. With 905
// training captions an epoch is 28 batches: a schedule counted in epochs
// (the old "step-size: 2") took the lr to nothing by iteration 112 and left
// TERN at chance (rsum 28.8), which this test catches.
//
// The bounds (rsum 100, about 3x chance; R@10 25%) leave room for the
// rounding of the CPU's matrix kernels, which changes which checkpoint 30
// dev images pick: VSE++, the weakest here, scored test rsum 119.1, 140.4
// and 139.3 with OpenBLAS's SkylakeX, Haswell and Prescott kernels on one
// machine (R@10 31.9% to 40.7%).
func TestModelsLearnRealCaptions(t *testing.T) {
	dir := flickr8kMini(t)
	for _, base := range []string{"teran-mrsw-small.yaml", "tern-small.yaml", "vsepp-small.yaml", "seam-e-small.yaml", "seam-c-penalty-small.yaml", "seam-g-small.yaml", "member-small.yaml"} {
		t.Run(strings.TrimSuffix(base, "-small.yaml"), func(t *testing.T) {
			t.Parallel()
			cfg := tinyConfig(t, base)
			// The config's own optimisation settings (batch, lr, warm-up,
			// schedule): how they fit a small data set is under test.
			cfg.Training = builtinConfig(t, base).Training
			cfg.TextModel.Hidden = 64 // SEAM-G's GRU: at 32 units it learns a real vocabulary slowly
			if cfg.Model.Name == "vsepp" {
				// Its GRU state is the embedding: at 64 units, or at its lr
				// of 2e-4, it learns too slowly for the test's 250 steps.
				cfg.Model.EmbedSize, cfg.TextModel.Hidden, cfg.Training.LR = 128, 128, 1e-3
			}
			iters := 250
			if cfg.Model.Name == "member" {
				// At test size: each memory response is a pass of the cross
				// encoder, and the two generation losses score the
				// vocabulary at every token; its validation rsum levels off
				// after about 100 steps.
				cfg.Model.Responses, iters = 2, 120
			}
			out := t.TempDir()
			src := data.Source{Path: dir}
			if _, err := Run(context.Background(), Options{Config: cfg, Data: src, Out: out, MaxIters: iters}); err != nil {
				t.Fatal(err)
			}
			m, f, err := model.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			test, err := src.Load(context.Background(), "test")
			if err != nil {
				t.Fatal(err)
			}
			defer test.Close()
			res, err := eval.EvaluateModels(context.Background(), []model.Model{m}, test, eval.ModelOptions{})
			if err != nil {
				t.Fatal(err)
			}
			mt := res.Report.Metrics
			t.Logf("%s on %d test images: R@1 i2t %.1f t2i %.1f, R@10 i2t %.1f t2i %.1f, rsum %.1f",
				base, test.NumImages(), mt.I2T.R1, mt.T2I.R1, mt.I2T.R10, mt.T2I.R10, mt.RSum)
			if mt.RSum < 100 || mt.I2T.R10 < 25 || mt.T2I.R10 < 25 {
				t.Errorf("rsum %.1f, R@10 i2t %.1f%% t2i %.1f%%: not far above chance (35, 11%%)", mt.RSum, mt.I2T.R10, mt.T2I.R10)
			}
			if cfg.Model.Name == "member" {
				for space, rsum := range memberSpaces(t, out, src, "test", 30) {
					if rsum < 100 {
						t.Errorf("member %s: rsum %.1f, not far above chance (35)", space, rsum)
					}
				}
			}
		})
	}
}

// TestWordVectors checks that text-model.word-vectors starts the word
// embeddings from the file: two words given the same vector start with the
// same row and are still nearly the same after a few steps, where random
// rows are unrelated; and that a bad file stops the run with its name.
func TestWordVectors(t *testing.T) {
	dir := testWorld(t)
	vecPath := filepath.Join(t.TempDir(), "vectors.txt")
	// The world's colour words: two share a vector, the third its own.
	if err := os.WriteFile(vecPath, []byte("red 1 0 0 2\nblue 1 0 0 2\ngreen -1 3 0.5 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cosine := func(edit func(*Config)) float64 {
		t.Helper()
		cfg := tinyConfig(t, "teran-mrsw-small.yaml")
		edit(&cfg)
		out := t.TempDir()
		if _, err := Run(context.Background(), Options{Config: cfg, Data: data.Source{Path: dir}, Out: out, MaxIters: 3, ValImages: 20}); err != nil {
			t.Fatal(err)
		}
		m, f, err := model.Load(filepath.Join(out, "last.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w, err := model.WordTable(m)
		if err != nil {
			t.Fatal(err)
		}
		row := func(word string) []float32 {
			id, ok := m.Tokenizer().Vocab().ID(word)
			if !ok {
				t.Fatalf("%q is not in the world's vocabulary", word)
			}
			d := w.Shape[1]
			return w.Data[int(id)*d : int(id+1)*d]
		}
		a, b := row("red"), row("blue")
		var ab, aa, bb float64
		for i := range a {
			ab += float64(a[i]) * float64(b[i])
			aa += float64(a[i]) * float64(a[i])
			bb += float64(b[i]) * float64(b[i])
		}
		return ab / math.Sqrt(aa*bb)
	}
	with := cosine(func(c *Config) { c.TextModel.WordVectors = vecPath })
	without := cosine(func(c *Config) {})
	t.Logf("cosine of red and blue after 3 steps: %.3f with the vectors, %.3f without", with, without)
	if with < 0.9 || math.Abs(without) > 0.5 {
		t.Fatalf("cosine of red and blue %.3f with the shared vector, %.3f without: want > 0.9 and near 0", with, without)
	}

	bad := filepath.Join(t.TempDir(), "bad.txt")
	if err := os.WriteFile(bad, []byte("red 1 2\nblue 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig(t, "teran-mrsw-small.yaml")
	cfg.TextModel.WordVectors = bad
	_, err := Run(context.Background(), Options{Config: cfg, Data: data.Source{Path: dir}, Out: t.TempDir(), MaxIters: 1, ValImages: 20})
	if err == nil || !strings.Contains(err.Error(), "text-model.word-vectors: "+bad+": line 2") {
		t.Fatalf("a bad vectors file: error %v, want one naming the key, file and line", err)
	}
}
